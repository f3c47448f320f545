package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// countingWriter counts the bytes written to it and keeps none.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	return len(b), nil
}

// sampler watches this process's open descriptors and live heap while
// an operation runs, and reports the most of each above where they began.
type sampler struct {
	stop             chan struct{}
	done             chan struct{}
	baseFDs, maxFDs  atomic.Int64
	baseHeap, maxHep atomic.Int64
}

func openFDs() int64 {
	des, _ := os.ReadDir("/proc/self/fd")
	return int64(len(des))
}

func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func startSampler() *sampler {
	runtime.GC()
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.baseFDs.Store(openFDs())
	s.baseHeap.Store(liveHeap())
	go func() {
		defer close(s.done)
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			if n := openFDs(); n > s.maxFDs.Load() {
				s.maxFDs.Store(n)
			}
			if h := liveHeap(); h > s.maxHep.Load() {
				s.maxHep.Store(h)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// end stops the sampler and returns the descriptors (the sampler's own
// reading of /proc/self/fd excepted) and heap bytes held at most beyond
// the start.
func (s *sampler) end() (fds, heap int64) {
	close(s.stop)
	<-s.done
	return s.maxFDs.Load() - s.baseFDs.Load(), s.maxHep.Load() - s.baseHeap.Load()
}

// lowFDLimit lowers this process's soft descriptor limit to n for the
// rest of the test: an operation that holds a descriptor per level fails
// with EMFILE.
func lowFDLimit(t *testing.T, n uint64) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if open := uint64(openFDs()); open+16 > n {
		t.Fatalf("%d descriptors already open; the limit of %d leaves too few", open, n)
	}
	low := old
	low.Cur = n
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
}

// memHost is a host whose directories are on a tmpfs where there is one
// (deep trees on a disk file system take seconds a level deeper in the
// kernel's journal, not in what is measured); it is emptied with Empty,
// which works at any depth, where os.RemoveAll holds a descriptor per
// level.
func memHost(t *testing.T) *host {
	t.Helper()
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return newHost(t)
	}
	base, err := os.MkdirTemp("/dev/shm", "workspace-test-")
	if err != nil {
		return newHost(t)
	}
	t.Cleanup(func() {
		if r, err := Open(base, -1, -1); err == nil {
			r.Empty()
			r.Close()
		}
		os.RemoveAll(base)
	})
	return newHostIn(t, base)
}

// chain makes depth nested directories named name under dir, holding one
// descriptor at a time, and puts a file in the deepest.
func chain(t *testing.T, dir, name string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, "leaf", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte("leaf\n"))
	unix.Close(f)
}

// readTar reads a tar stream back with archive/tar and returns, per
// name, its type, link name and content.
func readTar(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("archive/tar cannot read the stream back: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("archive/tar: %s: %v", h.Name, err)
		}
		h.PAXRecords = map[string]string{"content": string(data)}
		out[h.Name] = h
	}
}

// gnuExtract extracts a tar stream with GNU tar into a new directory, or
// skips the test if GNU tar is missing.
func gnuExtract(t *testing.T, b []byte) string {
	t.Helper()
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("GNU tar is not installed (apt-get install tar)")
	}
	if v, _ := exec.Command(tarBin, "--version").Output(); !strings.Contains(string(v), "GNU tar") {
		t.Skip("tar is not GNU tar")
	}
	dir := t.TempDir()
	cmd := exec.Command(tarBin, "-x", "-C", dir)
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GNU tar -x: %v\n%s", err, out)
	}
	return dir
}

// TestWriteTarHardLinks: a file with many hard links goes out once; the
// other names are tar hard links to the first, and both archive/tar and
// GNU tar read them back so.
func TestWriteTarHardLinks(t *testing.T) {
	h := newHost(t)
	const size, links = 1 << 20, 300
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	if err := os.WriteFile(filepath.Join(h.dir, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(h.dir, "d"), 0o755)
	for i := range links {
		if err := os.Link(filepath.Join(h.dir, "big"), filepath.Join(h.dir, "d", "l"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := h.root.WriteTar(&buf, "."); err != nil {
		t.Fatal(err)
	}
	// One copy, and a header (with a PAX record at most) per link.
	if max := size + links*3*512 + 64<<10; buf.Len() > max {
		t.Errorf("%d links to a %d-byte file: %d bytes of tar, want at most %d", links, size, buf.Len(), max)
	}
	t.Logf("%d links to a %d-byte file: %d bytes of tar", links, size, buf.Len())
	hdrs := readTar(t, buf.Bytes())
	nlinks := 0
	for name, hd := range hdrs {
		if hd.Typeflag == tar.TypeLink {
			nlinks++
			if hd.Linkname != "big" {
				t.Errorf("%s links to %q, want big (the first name written)", name, hd.Linkname)
			}
		}
	}
	if nlinks != links || hdrs["big"] == nil || hdrs["big"].PAXRecords["content"] != string(data) {
		t.Errorf("tar has %d hard links (want %d), big whole: %v", nlinks, links, hdrs["big"] != nil && hdrs["big"].PAXRecords["content"] == string(data))
	}
	dir := gnuExtract(t, buf.Bytes())
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "big"), &st); err != nil || st.Nlink != links+1 {
		t.Errorf("GNU tar extracted big with %d links, %v; want %d", st.Nlink, err, links+1)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "d", "la0")); !bytes.Equal(b, data) {
		t.Errorf("GNU tar: d/la0 is %d bytes, not big's content", len(b))
	}
	// ExtractTar makes the links links again, not copies.
	if err := h.root.RemoveAll("d"); err != nil {
		t.Fatal(err)
	}
	if err := h.root.RemoveAll("big"); err != nil {
		t.Fatal(err)
	}
	if err := h.root.ExtractTar(t.Context(), bytes.NewReader(buf.Bytes()), "."); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(h.dir, "d", "la0"), &st); err != nil || st.Nlink != links+1 {
		t.Errorf("ExtractTar made d/la0 with %d links, %v; want %d", st.Nlink, err, links+1)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestWriteTarSparse: sparse files go out as their data, not their size,
// and read back whole with archive/tar and GNU tar.
func TestWriteTarSparse(t *testing.T) {
	h := newHost(t)
	const files, size = 64, 64 << 20
	chunk := bytes.Repeat([]byte("data"), 1024)
	for i := range files {
		f, err := os.Create(filepath.Join(h.dir, "s"+itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(chunk, 1<<20)
		f.WriteAt(chunk, size-int64(len(chunk)))
		f.Close()
	}
	var w countingWriter
	if err := h.root.WriteTar(&w, "."); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sparse files of %d bytes with %d bytes of data each: %d bytes of tar", files, size, 2*len(chunk), w.n)
	if max := int64(files * (2*len(chunk) + 8*512)); w.n > max {
		t.Fatalf("tar of %d sparse files is %d bytes, want at most %d", files, w.n, max)
	}
	// Read back: two files are enough.
	for _, f := range []string{"s0", "s1"} {
		os.Rename(filepath.Join(h.dir, f), filepath.Join(h.dir, "keep-"+f))
	}
	for i := 2; i < files; i++ {
		os.Remove(filepath.Join(h.dir, "s"+itoa(i)))
	}
	var buf bytes.Buffer
	if err := h.root.WriteTar(&buf, "."); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	copy(want[1<<20:], chunk)
	copy(want[size-len(chunk):], chunk)
	hdrs := readTar(t, buf.Bytes())
	if hd := hdrs["keep-s0"]; hd == nil || hd.Size != size || hd.PAXRecords["content"] != string(want) {
		t.Errorf("archive/tar read keep-s0 back as %+v", hd)
	}
	dir := gnuExtract(t, buf.Bytes())
	if b, _ := os.ReadFile(filepath.Join(dir, "keep-s1")); !bytes.Equal(b, want) {
		t.Errorf("GNU tar extracted keep-s1 as %d bytes, not the file", len(b))
	}
	// ExtractTar reads it back too.
	if err := h.root.ExtractTar(t.Context(), bytes.NewReader(buf.Bytes()), "copy"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "copy", "keep-s1")); !bytes.Equal(b, want) {
		t.Errorf("ExtractTar made keep-s1 %d bytes, not the file", len(b))
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(h.dir, "copy", "keep-s1"), &st); err != nil || st.Blocks*512 > 1<<20 {
		t.Errorf("ExtractTar wrote the holes of keep-s1: %d bytes allocated, %v", st.Blocks*512, err)
	}
}

// TestWriteTarPathLimit: a path longer than PATH_MAX, which nothing in
// the sandbox could open by name either, stops the tar with an error
// naming the limit, before the square of the depth is written.
func TestWriteTarPathLimit(t *testing.T) {
	h := memHost(t)
	name := strings.Repeat("n", 255)
	chain(t, h.dir, name, 3000)
	var w countingWriter
	s := startSampler()
	err := h.root.WriteTar(&w, ".")
	fds, heap := s.end()
	t.Logf("3,000 directories of 255-byte names: %v after %d bytes of tar; %d fds, %d heap bytes at most", err, w.n, fds, heap)
	if !errors.Is(err, unix.ENAMETOOLONG) || !strings.Contains(err.Error(), "4096") {
		t.Errorf("WriteTar = %v, want ENAMETOOLONG naming the 4096-byte limit", err)
	}
	if w.n > 256<<10 {
		t.Errorf("wrote %d bytes of tar before refusing", w.n)
	}
	if heap > 16<<20 {
		t.Errorf("heap grew by %d bytes", heap)
	}
}

// TestDeepTrees: at any depth, walking, copying and removing a tree holds
// a bounded number of descriptors and a heap bounded by one path.
func TestDeepTrees(t *testing.T) {
	for _, c := range []struct {
		name  string
		depth int
	}{{"d", 2000}, {strings.Repeat("n", 255), 3000}, {"d", 30000}} {
		t.Run(itoa(c.depth), func(t *testing.T) {
			t0 := time.Now()
			h := memHost(t)
			chain(t, h.dir, c.name, c.depth)
			path := int64(c.depth * (len(c.name) + 1))
			lowFDLimit(t, 64)
			check := func(op string, s *sampler, err error) {
				t.Helper()
				fds, heap := s.end()
				t.Logf("%v %s at depth %d: %d fds, %d heap bytes at most (the path: %d bytes)", time.Since(t0), op, c.depth, fds, heap, path)
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if fds > MaxDescriptors {
					t.Errorf("%s held %d descriptors at once", op, fds)
				}
				// A small frame per level and the path, not the
				// square of the depth; garbage not yet collected counts.
				if heap > 1024*int64(c.depth)+4*path+16<<20 {
					t.Errorf("%s grew the heap by %d bytes for a %d-byte path", op, heap, path)
				}
			}
			s := startSampler()
			bytes, entries, err := h.root.Usage(".")
			check("Usage", s, err)
			if entries != int64(c.depth+1) || bytes != 5 {
				t.Errorf("Usage = %d bytes, %d entries; want 5, %d", bytes, entries, c.depth+1)
			}
			copyDir := filepath.Join(filepath.Dir(h.dir), "copy")
			if err := os.Mkdir(copyDir, 0o755); err != nil {
				t.Fatal(err)
			}
			dst, err := Open(copyDir, -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			// A tar within PATH_MAX goes whole; a deeper one stops.
			var w countingWriter
			s = startSampler()
			err = h.root.WriteTar(&w, ".")
			if path+8 <= MaxTarPath {
				check("WriteTar", s, err)
				if w.n < int64(c.depth)*512 {
					t.Errorf("a tar of %d directories is %d bytes", c.depth, w.n)
				}
			} else if fds, _ := s.end(); !errors.Is(err, unix.ENAMETOOLONG) || fds > MaxDescriptors {
				t.Errorf("WriteTar of a %d-byte path: %v with %d fds", path, err, fds)
			}
			s = startSampler()
			err = h.root.CopyTo(dst)
			check("CopyTo", s, err)
			if _, n, err := dst.Usage("."); err != nil || n != int64(c.depth+1) {
				t.Errorf("the copy has %d entries, %v", n, err)
			}
			s = startSampler()
			err = dst.Empty()
			check("Empty", s, err)
			s = startSampler()
			err = h.root.RemoveAll(c.name)
			check("RemoveAll", s, err)
			if es, err := h.root.List("."); err != nil || len(es) != 0 {
				t.Errorf("after RemoveAll: %v, %v", es, err)
			}
		})
	}
}

// TestRootNotReplaced: a name that resolves to the root, or above it, is
// refused by every operation that would replace the root, and RemoveAll
// refuses the empty name and names above the root; the workspace stays
// as it was. (RemoveAll of the root empties it: TestRemoveAllRoot.)
func TestRootNotReplaced(t *testing.T) {
	h := newHost(t)
	r := h.root
	r.WriteFile("a/keep", strings.NewReader("keep"), 0o644)
	for _, name := range []string{"..", "a/../..", "/..", "a/../../b"} {
		if err := r.RemoveAll(name); !errors.Is(err, ErrOutside) || !strings.Contains(err.Error(), "remove") {
			t.Errorf("RemoveAll(%q) = %v, want ErrOutside naming the operation", name, err)
		}
	}
	if err := r.RemoveAll(""); !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "remove") {
		t.Errorf("RemoveAll(\"\") = %v, want fs.ErrInvalid naming the operation", err)
	}
	for _, name := range []string{"", ".", "/", "..", "a/..", "a/../..", "/a/../", "./a/.."} {
		if err := r.WriteFile(name, strings.NewReader("x"), 0o644); !errors.Is(err, ErrOutside) {
			t.Errorf("WriteFile(%q) = %v, want ErrOutside", name, err)
		}
		if err := r.Symlink("x", name); !errors.Is(err, ErrOutside) {
			t.Errorf("Symlink(x, %q) = %v, want ErrOutside", name, err)
		}
	}
	// A tar entry that is the root itself is refused as a file.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "a/..", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	if err := r.ExtractTar(t.Context(), &buf, "."); !errors.Is(err, ErrOutside) {
		t.Errorf("ExtractTar of a file named a/.. = %v, want ErrOutside", err)
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, "a/keep")); err != nil || string(b) != "keep" {
		t.Errorf("the workspace lost a/keep: %q, %v", b, err)
	}
	h.untouched(t)
}

// TestRemoveAllRoot: RemoveAll of a name that is the root empties it and
// keeps it, whatever it holds, and touches nothing outside.
func TestRemoveAllRoot(t *testing.T) {
	h := newHost(t)
	h.plant(t)
	for _, name := range []string{".", "/", "a/..", "/a/../", "./a/.."} {
		h.root.WriteFile("a/b/c", strings.NewReader("x"), 0o644)
		h.root.WriteFile(".hidden", strings.NewReader("x"), 0o644)
		if err := h.root.RemoveAll(name); err != nil {
			t.Fatalf("RemoveAll(%q) = %v, want the root emptied", name, err)
		}
		if des, err := os.ReadDir(h.dir); err != nil || len(des) != 0 {
			t.Errorf("after RemoveAll(%q) the root holds %v, %v; want it there and empty", name, des, err)
		}
	}
	h.untouched(t)
}

// TestWriteTarContentLimit: WriteTar writes no more file content than the
// workspace holds, and says so.
func TestWriteTarContentLimit(t *testing.T) {
	h := newHost(t)
	for _, f := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(h.dir, f), make([]byte, 400<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.root.SetSize(1 << 20)
	var w countingWriter
	err := h.root.WriteTar(&w, ".")
	if !errors.Is(err, unix.EFBIG) || !strings.Contains(err.Error(), "1048576") {
		t.Errorf("WriteTar of 1.2 MB in a 1 MiB workspace = %v, want EFBIG naming the size", err)
	}
	if w.n > 1<<20+16<<10 {
		t.Errorf("wrote %d bytes before stopping", w.n)
	}
	h.root.SetSize(2 << 20)
	if err := h.root.WriteTar(&w, "."); err != nil {
		t.Errorf("WriteTar of 1.2 MB in a 2 MiB workspace: %v", err)
	}
}

// TestCursorMoved: a directory moved while a walk is below it cannot lead
// the walk anywhere but back where it came from: climbing fails instead.
func TestCursorMoved(t *testing.T) {
	h := newHost(t)
	if err := os.MkdirAll(filepath.Join(h.dir, "top/a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	top, err := unix.Open(filepath.Join(h.dir, "top"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(top)
	for _, move := range []struct{ from, to string }{
		{"top/a/b", "b"},     // out of the walk's top, up to the root
		{"top/a/b", "top/b"}, // elsewhere below the top
	} {
		c, err := newCursor(top, unix.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"a", "b", "c"} {
			if err := c.down(d); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(filepath.Join(h.dir, move.from), filepath.Join(h.dir, move.to)); err != nil {
			t.Fatal(err)
		}
		if err := c.up(); err != nil {
			t.Fatalf("up into the moved directory itself: %v", err)
		}
		if err := c.up(); !errors.Is(err, errMoved) {
			t.Errorf("%s moved to %s: climbing from it = %v, want errMoved", move.from, move.to, err)
		}
		c.reset()
		if c.fd != top {
			t.Errorf("reset left the cursor at fd %d, not the top", c.fd)
		}
		os.Rename(filepath.Join(h.dir, move.to), filepath.Join(h.dir, move.from))
	}
}

// TestCopyToHardLinks: a snapshot copy keeps hard links links, so a file
// with many links fits a copy the size of the workspace.
func TestCopyToHardLinks(t *testing.T) {
	h := newHost(t)
	if err := os.WriteFile(filepath.Join(h.dir, "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(h.dir, "d/e"), 0o755)
	for i := range 100 {
		if err := os.Link(filepath.Join(h.dir, "big"), filepath.Join(h.dir, "d/e", "l"+itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	copyDir := copyOf(t, h)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(copyDir, "d/e/l7"), &st); err != nil || st.Nlink != 101 || st.Size != 1<<20 {
		t.Errorf("the copy of d/e/l7 has %d links and %d bytes, %v; want 101 links to big", st.Nlink, st.Size, err)
	}
}

// TestCopyToSparse: a snapshot copy of a sparse file is sparse too.
func TestCopyToSparse(t *testing.T) {
	h := newHost(t)
	f, err := os.Create(filepath.Join(h.dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("data"), 32<<20)
	f.Truncate(64 << 20)
	f.Close()
	copyDir := copyOf(t, h)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(copyDir, "sparse"), &st); err != nil || st.Size != 64<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("the copy of a 64 MiB sparse file: %d bytes, %d allocated, %v", st.Size, st.Blocks*512, err)
	}
	b, _ := os.ReadFile(filepath.Join(copyDir, "sparse"))
	if len(b) != 64<<20 || string(b[32<<20:32<<20+4]) != "data" || !allZero(b[:32<<20]) {
		t.Errorf("the copy's content differs")
	}
}

// copyOf copies h's workspace with CopyTo into a new directory and
// returns the directory.
func copyOf(t *testing.T, h *host) string {
	t.Helper()
	dir := t.TempDir()
	dst, err := Open(dir, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := h.root.CopyTo(dst); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hugeSparseTar is a tar, in the format WriteTar writes, of one file
// "huge" of size bytes that are all a hole but for the last byte.
func hugeSparseTar(t *testing.T, size int64) []byte {
	t.Helper()
	h := newHost(t)
	f, err := os.Create(filepath.Join(h.dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte{1}, size-1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Skipf("cannot make a sparse file of %d bytes in %s to tar: %v", size, h.dir, err)
	}
	var buf bytes.Buffer
	if err := h.root.WriteTar(&buf, "."); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestExtractTarDeclaredSize: what an entry declares is checked against
// the workspace's size before its content is read: a few KiB of tar
// holding one sparse file of 100 GiB of holes, or a header claiming a
// TiB of content it does not have, is refused with EFBIG naming the
// entry, its size and the limit, and leaves nothing of it behind.
func TestExtractTarDeclaredSize(t *testing.T) {
	const huge = 100 << 30
	sparse := hugeSparseTar(t, huge)
	var claim bytes.Buffer
	tw := tar.NewWriter(&claim)
	if err := tw.WriteHeader(&tar.Header{Name: "claims", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	tw.Flush() // flushes nothing of the missing content; the stream ends here
	for _, c := range []struct {
		name  string
		tar   []byte
		entry string
		size  int64
	}{{"sparse", sparse, "huge", huge}, {"claim", claim.Bytes(), "claims", 1 << 40}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			h.root.SetSize(64 << 20)
			err := h.root.ExtractTar(t.Context(), bytes.NewReader(c.tar), ".")
			t.Logf("%d bytes of tar: %v", len(c.tar), err)
			if !errors.Is(err, unix.EFBIG) || !strings.Contains(err.Error(), c.entry) ||
				!strings.Contains(err.Error(), strconv.FormatInt(c.size, 10)) || !strings.Contains(err.Error(), strconv.Itoa(64<<20)) {
				t.Errorf("ExtractTar of %d bytes declaring %d = %v; want EFBIG naming %s, its size and the 64 MiB limit", len(c.tar), c.size, err, c.entry)
			}
			if des, err := os.ReadDir(h.dir); err != nil || len(des) != 0 {
				t.Errorf("the workspace holds %v after the refused entry, %v", des, err)
			}
		})
	}
	// Files that fit one by one are refused once together they would not.
	h := newHost(t)
	h.root.SetSize(1 << 20)
	var two bytes.Buffer
	tw = tar.NewWriter(&two)
	for _, n := range []string{"a", "b"} {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: 600 << 10})
		tw.Write(make([]byte, 600<<10))
	}
	tw.Close()
	if err := h.root.ExtractTar(t.Context(), &two, "."); !errors.Is(err, unix.EFBIG) || !strings.Contains(err.Error(), "b:") {
		t.Errorf("ExtractTar of two 600 KiB files into 1 MiB = %v, want EFBIG naming b", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b was written: %v", err)
	}
}

// TestExtractTarCancel: ExtractTar stops when its context is cancelled,
// before reading more of the stream, and writes nothing after.
func TestExtractTarCancel(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range []string{"first", "second"} {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 10})
		tw.Write(bytes.Repeat([]byte{'x'}, 64<<10))
	}
	tw.Close()
	h := newHost(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.root.ExtractTar(ctx, bytes.NewReader(buf.Bytes()), "."); !errors.Is(err, context.Canceled) {
		t.Errorf("ExtractTar with a cancelled context = %v, want context.Canceled", err)
	}
	if des, _ := os.ReadDir(h.dir); len(des) != 0 {
		t.Errorf("with a cancelled context the workspace holds %v", des)
	}
	// Cancelled once the first file's content has been read.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	r := &cancelAfter{r: bytes.NewReader(buf.Bytes()), n: 512 + 64<<10, cancel: cancel}
	if err := h.root.ExtractTar(ctx, r, "."); !errors.Is(err, context.Canceled) {
		t.Errorf("ExtractTar cancelled midway = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "second")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second was written after the cancel: %v", err)
	}
}

// cancelAfter reads r and calls cancel once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(b []byte) (int, error) {
	k, err := c.r.Read(b[:min(len(b), max(c.n, 1))])
	if c.n -= k; c.n <= 0 {
		c.cancel()
	}
	return k, err
}
