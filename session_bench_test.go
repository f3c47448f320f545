//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchWorkspace writes an agent-sized project tree, 10,000 files of
// 10,000 bytes (100 MB) in 100 directories, under dir.
func benchWorkspace(b *testing.B, dir string) {
	b.Helper()
	body := bytes.Repeat([]byte("0123456789"), 1000)
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", f)), body, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchSession is a session over the 100 MB tree, held in its upper layer
// (written through the file API) or as its initial content.
func benchSession(b *testing.B, flat, seeded bool) *Sandbox {
	b.Helper()
	requireSandbox(b)
	tree, err := os.MkdirTemp("/dev/shm", "sbxbench-")
	if err != nil {
		tree = b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(tree) })
	os.Chmod(tree, 0o755)
	uid, gid := (&Options{}).HostIDs()
	os.Chown(tree, uid, gid) // New refuses a Workspace its sandbox cannot write
	benchWorkspace(b, tree)
	ws := SessionWorkspace{Size: 1 << 30}
	if seeded {
		ws.From = tree
	}
	o := Options{Workspace: ws}
	s := newTest(b, o)
	if flat {
		keepFlat(s)
	}
	if !seeded {
		// Through a tar, as a caller would put a tree in.
		src := New(Options{Workspace: HostWorkspace{Dir: tree}})
		var buf bytes.Buffer
		err := src.WriteTar(&buf, ".")
		src.Close()
		if err == nil {
			err = s.ExtractTar(b.Context(), &buf, ".")
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if es, err := s.ReadDir("d99"); err != nil || len(es) != 100 {
		b.Fatalf("the tree is not in the workspace: %d entries, %v", len(es), err)
	}
	return s
}

func layoutBench(b *testing.B, fn func(b *testing.B, flat bool)) {
	for _, flat := range []bool{false, true} {
		name := "layered"
		if flat {
			name = "flat"
		}
		b.Run(name, func(b *testing.B) { fn(b, flat) })
	}
}

// BenchmarkSessionReset: Reset of a session whose initial content is the
// 100 MB tree, after a turn changed a file and removed a directory.
func BenchmarkSessionReset(b *testing.B) {
	layoutBench(b, func(b *testing.B, flat bool) {
		s := benchSession(b, flat, true)
		for b.Loop() {
			b.StopTimer()
			if err := s.WriteFile("d00/f000", []byte("changed"), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := s.RemoveAll("d01"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := s.Reset(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if data, err := s.ReadFile("d00/f000"); err != nil || len(data) != 10000 {
			b.Fatalf("after Reset: %d bytes, %v", len(data), err)
		}
	})
}

// BenchmarkSessionSnapshotRestore: a Snapshot of the workspace holding the
// 100 MB tree (written in the session), a change, and a Restore of the
// snapshot; each step's time is reported on its own.
func BenchmarkSessionSnapshotRestore(b *testing.B) {
	layoutBench(b, func(b *testing.B, flat bool) {
		s := benchSession(b, flat, false)
		var snapTime, restoreTime time.Duration
		for i := 0; b.Loop(); i++ {
			t0 := time.Now()
			snap, err := s.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			snapTime += time.Since(t0)
			if err := s.WriteFile(fmt.Sprintf("d%02d/f000", i%100), []byte("changed"), 0o644); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := s.Restore(snap); err != nil {
				b.Fatal(err)
			}
			restoreTime += time.Since(t1)
			snap.Release()
		}
		b.ReportMetric(float64(snapTime.Microseconds())/1000/float64(b.N), "snapshot-ms/op")
		b.ReportMetric(float64(restoreTime.Microseconds())/1000/float64(b.N), "restore-ms/op")
	})
}

// BenchmarkRunSession: a Run of /bin/true in a session (its workspace
// cloned from the keeper) against one with a fresh tmpfs per Run.
func BenchmarkRunSession(b *testing.B) {
	requireSandbox(b)
	for _, c := range []struct {
		name string
		o    Options
	}{{"session", Options{}}, {"fresh", Options{Workspace: FreshWorkspace{}}}} {
		b.Run(c.name, func(b *testing.B) {
			s := newTest(b, c.o)
			defer s.Close()
			ctx := context.Background()
			for b.Loop() {
				if res, err := s.Run(ctx, Command("/bin/true")); err != nil || !res.Success() {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// BenchmarkSessionStart: the cost of a session's keeper, from New to the
// first file written, and Close.
func BenchmarkSessionStart(b *testing.B) {
	requireSandbox(b)
	for b.Loop() {
		s := newTest(b, Options{})
		if err := s.WriteFile("f", []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
