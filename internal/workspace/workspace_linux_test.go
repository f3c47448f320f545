package workspace

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// modes runs fn with openat2 and with the walk of our own.
func modes(t *testing.T, fn func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(walk)
			defer noOpenat2.Store(old)
			fn(t)
		})
	}
}

// host is a workspace root in a temporary directory, next to an outside
// directory holding a secret file that nothing may read or change.
type host struct {
	root             *Root
	dir, outside     string
	secret, original string
}

func newHost(t *testing.T) *host {
	t.Helper()
	return newHostIn(t, t.TempDir())
}

// newHostIn is newHost with its directories in base.
func newHostIn(t *testing.T, base string) *host {
	t.Helper()
	h := &host{dir: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside"), original: "host secret\n"}
	for _, d := range []string{h.dir, h.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.secret = filepath.Join(h.outside, "secret")
	if err := os.WriteFile(h.secret, []byte(h.original), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(h.dir, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	h.root = r
	return h
}

// plant makes what a hostile program could leave in the workspace.
func (h *host) plant(t *testing.T) {
	t.Helper()
	for name, target := range map[string]string{
		"abs":    h.secret,            // absolute, to the host file
		"absdir": h.outside,           // absolute, to the host directory
		"up":     "../../../../../..", // climbs
		"updir":  "../outside",        // the sibling directory, relatively
		"loop":   "loop",
	} {
		if err := os.Symlink(target, filepath.Join(h.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(h.dir, "nested"), 0o755)
	os.Symlink("../../outside/secret", filepath.Join(h.dir, "nested", "deep"))
	syscall.Mkfifo(filepath.Join(h.dir, "fifo"), 0o644)
}

// untouched fails the test if the host's secret or its directory changed.
func (h *host) untouched(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(h.secret)
	if err != nil || string(b) != h.original {
		t.Errorf("host secret now %q, %v", b, err)
	}
	des, _ := os.ReadDir(h.outside)
	if len(des) != 1 {
		t.Errorf("host directory holds %d entries, want only the secret", len(des))
	}
}

func TestFiles(t *testing.T) {
	modes(t, func(t *testing.T) {
		h := newHost(t)
		r := h.root
		if err := r.WriteFile("src/main.py", strings.NewReader("print(1)\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		f, err := r.ReadFile("/src/./main.py")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "print(1)\n" {
			t.Errorf("read %q", b)
		}
		if err := r.Symlink("main.py", "src/link"); err != nil {
			t.Fatal(err)
		}
		es, err := r.List("src")
		if err != nil || len(es) != 2 || es[0].Name != "link" || es[0].Target != "main.py" || es[1].Mode != 0o640 || es[1].Size != 9 {
			t.Errorf("List = %+v, %v", es, err)
		}
		if e, err := r.Stat("src"); err != nil || !e.Mode.IsDir() {
			t.Errorf("Stat(src) = %+v, %v", e, err)
		}
		if err := r.RemoveAll("src"); err != nil {
			t.Fatal(err)
		}
		if es, err := r.List("."); err != nil || len(es) != 0 {
			t.Errorf("after RemoveAll: %+v, %v", es, err)
		}
		if _, err := r.ReadFile("../outside/secret"); !errors.Is(err, ErrOutside) {
			t.Errorf("ReadFile(../outside/secret) = %v, want ErrOutside", err)
		}
		if err := r.WriteFile("a/../../x", strings.NewReader("x"), 0o644); !errors.Is(err, ErrOutside) {
			t.Errorf("WriteFile(a/../../x) = %v, want ErrOutside", err)
		}
	})
}

// TestEscapes plants symlinks and FIFOs as a hostile program would, then
// uses every operation on them: nothing outside the root is read,
// written, listed or removed, and nothing hangs.
func TestEscapes(t *testing.T) {
	modes(t, func(t *testing.T) {
		h := newHost(t)
		h.plant(t)
		r := h.root
		for _, name := range []string{"abs", "up/" + strings.TrimPrefix(h.secret, "/"), "updir/secret", "absdir/secret", "nested/deep",
			"up/outside/secret", "loop", "fifo"} {
			f, err := r.ReadFile(name)
			if err == nil {
				b, _ := io.ReadAll(f)
				f.Close()
				t.Errorf("ReadFile(%s) read %q", name, b)
			}
		}
		if es, err := r.List("absdir"); err == nil {
			t.Errorf("List(absdir) = %+v: listed the host directory", es)
		}
		// Writing at a symlink replaces the link; through one to a
		// directory fails rather than writes outside.
		for _, name := range []string{"abs", "nested/deep"} {
			if err := r.WriteFile(name, strings.NewReader("pwned"), 0o644); err != nil {
				t.Errorf("WriteFile(%s): %v", name, err)
			}
			if e, _ := r.Stat(name); !e.Mode.IsRegular() {
				t.Errorf("%s is %v after WriteFile, want a regular file", name, e.Mode)
			}
		}
		for _, name := range []string{"absdir/pwned", "updir/pwned", "up/pwned"} {
			r.WriteFile(name, strings.NewReader("pwned"), 0o644) // may land inside the root; never outside
		}
		if err := r.Symlink("/etc", "absdir"); err != nil {
			t.Errorf("Symlink over a planted link: %v", err)
		}
		r.RemoveAll("updir")
		r.RemoveAll("up")
		var buf bytes.Buffer
		if err := r.WriteTar(&buf, "."); err != nil {
			t.Errorf("WriteTar: %v", err)
		}
		if strings.Contains(buf.String(), h.original) {
			t.Errorf("the tar holds the host secret")
		}
		h.untouched(t)
	})
}

// TestEscapeRace swaps a directory for a symlink to the host while the
// host reads through it: no read ever returns the secret.
func TestEscapeRace(t *testing.T) {
	modes(t, func(t *testing.T) {
		h := newHost(t)
		d := filepath.Join(h.dir, "d")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				os.RemoveAll(d)
				os.Mkdir(d, 0o755)
				os.WriteFile(filepath.Join(d, "secret"), []byte("inside\n"), 0o644)
				os.RemoveAll(d)
				os.Symlink(h.outside, d)
			}
		}()
		defer func() {
			close(stop)
			wg.Wait()
		}()
		deadline := time.Now().Add(300 * time.Millisecond)
		reads := 0
		for time.Now().Before(deadline) {
			if f, err := h.root.ReadFile("d/secret"); err == nil {
				b, _ := io.ReadAll(f)
				f.Close()
				reads++
				if string(b) == h.original {
					t.Fatalf("read the host secret through a swapped symlink")
				}
			}
			h.root.WriteFile("d/new", strings.NewReader("x"), 0o644)
		}
		h.untouched(t)
		t.Logf("%d reads inside the root succeeded", reads)
	})
}

func TestExtractTarEscapes(t *testing.T) {
	modes(t, func(t *testing.T) {
		h := newHost(t)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		add := func(hdr *tar.Header, body string) {
			hdr.Size = int64(len(body))
			if hdr.Mode == 0 {
				hdr.Mode = 0o644
			}
			tw.WriteHeader(hdr)
			tw.Write([]byte(body))
		}
		add(&tar.Header{Name: "ok.txt", Typeflag: tar.TypeReg}, "fine")
		add(&tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: h.outside}, "")
		add(&tar.Header{Name: "s/pwned", Typeflag: tar.TypeReg}, "pwned")
		tw.Close()
		err := h.root.ExtractTar(t.Context(), &buf, ".")
		if err == nil {
			t.Errorf("extracting a file through a planted symlink succeeded")
		}
		buf.Reset()
		tw = tar.NewWriter(&buf)
		add(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg}, "pwned")
		tw.Close()
		if err := h.root.ExtractTar(t.Context(), &buf, "."); !errors.Is(err, ErrOutside) {
			t.Errorf("../evil: %v, want ErrOutside", err)
		}
		buf.Reset()
		tw = tar.NewWriter(&buf)
		add(&tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "s/secret"}, "")
		tw.Close()
		if err := h.root.ExtractTar(t.Context(), &buf, "."); err == nil {
			t.Errorf("a hard link through a planted symlink succeeded")
		}
		h.untouched(t)
		if b, err := os.ReadFile(filepath.Join(h.dir, "ok.txt")); string(b) != "fine" {
			t.Errorf("ok.txt: %q %v", b, err)
		}
	})
}

// tree describes a directory tree for comparison: path, mode, size,
// content hash or link target, mtime.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(p)
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %v %d", rel, fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	return strings.Join(lines, "\n")
}

func TestCopyToAndBack(t *testing.T) {
	modes(t, func(t *testing.T) {
		h := newHost(t)
		r := h.root
		r.WriteFile("bin/run.sh", strings.NewReader("#!/bin/sh\necho hi\n"), 0o755)
		r.WriteFile("secret.key", strings.NewReader("k"), 0o600)
		r.WriteFile("data/a/b/c.txt", strings.NewReader(strings.Repeat("x", 100000)), 0o644)
		r.WriteFile("empty", strings.NewReader(""), 0o444)
		r.Symlink("bin/run.sh", "run")
		r.Symlink("/etc/passwd", "abs")
		r.MkdirAll("shared")
		syscall.Chmod(filepath.Join(h.dir, "shared"), 0o1777)
		old := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
		os.Chtimes(filepath.Join(h.dir, "secret.key"), old, old)
		before := tree(t, h.dir)

		snapDir := t.TempDir()
		snap, err := Open(snapDir, -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		if err := r.CopyTo(snap); err != nil {
			t.Fatal(err)
		}
		if got := tree(t, snapDir); got != before {
			t.Errorf("snapshot differs:\n%s\nwant:\n%s", got, before)
		}
		// Change everything, then restore.
		r.WriteFile("secret.key", strings.NewReader("changed"), 0o666)
		r.RemoveAll("data")
		r.WriteFile("new", strings.NewReader("n"), 0o644)
		if err := r.Empty(); err != nil {
			t.Fatal(err)
		}
		if err := snap.CopyTo(r); err != nil {
			t.Fatal(err)
		}
		if got := tree(t, h.dir); got != before {
			t.Errorf("restored tree differs:\n%s\nwant:\n%s", got, before)
		}
		size, entries, err := r.Usage(".")
		if err != nil || size != 100000+18+1 || entries != 11 {
			t.Errorf("Usage = %d bytes, %d entries, %v", size, entries, err)
		}
		var buf bytes.Buffer
		if err := r.WriteTar(&buf, "."); err != nil {
			t.Fatal(err)
		}
		r.Empty()
		if err := r.ExtractTar(t.Context(), &buf, "."); err != nil {
			t.Fatal(err)
		}
		// A tar keeps the tree and every mode (not directory times).
		if got, want := modesOf(t, h.dir), modesOf(t, snapDir); got != want {
			t.Errorf("tar round trip: modes\n%s\nwant\n%s", got, want)
		}
		if b, _ := os.ReadFile(filepath.Join(h.dir, "data/a/b/c.txt")); len(b) != 100000 {
			t.Errorf("tar round trip lost data/a/b/c.txt")
		}
		if l, _ := os.Readlink(filepath.Join(h.dir, "abs")); l != "/etc/passwd" {
			t.Errorf("tar round trip: abs -> %q", l)
		}
	})
}

// modesOf lists the paths and modes of a tree, the root's excepted.
func modesOf(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(p)
		if rel, _ := filepath.Rel(dir, p); rel != "." {
			lines = append(lines, fmt.Sprintf("%s %v", rel, fi.Mode()))
		}
		return nil
	})
	return strings.Join(lines, "\n")
}
