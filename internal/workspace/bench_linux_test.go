package workspace

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// benchTree writes an agent-sized project workspace: 10,000 files of
// 10,000 bytes (100 MB) in 100 directories, under base.
func benchTree(b *testing.B, base string) *Root {
	b.Helper()
	dir := filepath.Join(base, "ws")
	os.Mkdir(dir, 0o755)
	r, err := Open(dir, -1, -1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	body := bytes.Repeat([]byte("0123456789"), 1000)
	for d := range 100 {
		for f := range 100 {
			if err := r.WriteFile(fmt.Sprintf("d%02d/f%03d", d, f), bytes.NewReader(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return r
}

// benchDirs are where the trees go: the test's temp directory (a disk
// here) and, when present, /dev/shm (a tmpfs, like the sandbox's own).
func benchDirs(b *testing.B) map[string]string {
	dirs := map[string]string{"disk": b.TempDir()}
	if d, err := os.MkdirTemp("/dev/shm", "wsbench-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(d) })
		dirs["tmpfs"] = d
	}
	return dirs
}

// BenchmarkSnapshot copies the 100 MB tree into an empty directory, as
// Snapshot does.
func BenchmarkSnapshot(b *testing.B) {
	for kind, base := range benchDirs(b) {
		b.Run(kind, func(b *testing.B) {
			r := benchTree(b, base)
			b.SetBytes(100 * 1000 * 1000)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				dir := filepath.Join(base, fmt.Sprintf("snap%d", i))
				os.Mkdir(dir, 0o755)
				dst, err := Open(dir, -1, -1)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.CopyTo(dst); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				dst.Empty()
				dst.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRestore empties the workspace and copies a snapshot back, as
// Restore and Reset do.
func BenchmarkRestore(b *testing.B) {
	for kind, base := range benchDirs(b) {
		b.Run(kind, func(b *testing.B) {
			snap := benchTree(b, base)
			wsDir := filepath.Join(base, "restored")
			os.Mkdir(wsDir, 0o755)
			ws, err := Open(wsDir, -1, -1)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			if err := snap.CopyTo(ws); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(100 * 1000 * 1000)
			b.ResetTimer()
			for b.Loop() {
				if err := ws.Empty(); err != nil {
					b.Fatal(err)
				}
				if err := snap.CopyTo(ws); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteTar streams the 100 MB tree as a tar, as Sandbox.WriteTar
// does: the walk's cost (a listing, an fstatat and a climb per
// directory) against the content's.
func BenchmarkWriteTar(b *testing.B) {
	for kind, base := range benchDirs(b) {
		b.Run(kind, func(b *testing.B) {
			r := benchTree(b, base)
			b.SetBytes(100 * 1000 * 1000)
			b.ResetTimer()
			for b.Loop() {
				if err := r.WriteTar(io.Discard, "."); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
