package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/workspace"
)

// byteCounter counts what is written to it and keeps none of it.
type byteCounter struct{ n int64 }

func (c *byteCounter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	return len(b), nil
}

// callerCost samples this process's open descriptors and live heap while
// one host-side operation runs; done returns the most of each above
// where they were when it began.
func callerCost() (done func() (fds int, heap int64)) {
	heapNow := func() int64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	runtime.GC()
	// The sampler's own look at /proc/self/fd is one more descriptor.
	fds0, heap0 := countDir("/proc/self/fd")+1, heapNow()
	var maxFDs, maxHeap atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if n := int64(countDir("/proc/self/fd")); n > maxFDs.Load() {
				maxFDs.Store(n)
			}
			if h := heapNow(); h > maxHeap.Load() {
				maxHeap.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Microsecond):
			}
		}
	}()
	return func() (int, int64) {
		close(stop)
		<-stopped
		return max(int(maxFDs.Load())-fds0, 0), max(maxHeap.Load()-heap0, 0)
	}
}

// TestWorkspaceHostOpsBounded: what a program leaves in its workspace
// (many hard links to one file, sparse files, chains of directories
// thousands deep) costs the caller's WriteTar and RemoveAll a bounded
// number of bytes, descriptors and heap, and a name that is the
// workspace or above it is refused, the workspace intact.
func TestWorkspaceHostOpsBounded(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	// Room for 33,000 directories (a tmpfs inode per 4 KiB).
	s := newTest(t, Options{Workspace: SessionWorkspace{Size: 256 << 20}})
	const links, sparse, deep, chain = 2000, 200, 3000, 30000
	res, err := s.Run(context.Background(), Command("/usr/bin/python3", "-c", fmt.Sprintf(`
import os
os.makedirs("links")
with open("links/big", "wb") as f: f.write(b"x" * (4 << 20))
for i in range(%d): os.link("links/big", "links/l%%d" %% i)
os.makedirs("sparse")
for i in range(%d):
    with open("sparse/s%%d" %% i, "wb") as f:
        f.truncate(64 << 20); f.seek(1 << 20); f.write(b"d" * 4096)
os.mkdir("deep"); os.chdir("deep")
for i in range(%d): os.mkdir("n" * 255); os.chdir("n" * 255)
os.chdir("/workspace"); os.mkdir("chain"); os.chdir("chain")
for i in range(%d): os.mkdir("d"); os.chdir("d")
`, links, sparse, deep, chain)))
	if err != nil || !res.Success() {
		t.Fatalf("making the trees: %v %v\n%s", err, res.Outcome, res.Stderr)
	}
	// The caller's CPU for both tars, against the program's for making
	// the trees: the tars are the size of the data, not of the files.
	cpu0 := callerCPU(t)
	var w byteCounter
	err = s.WriteTar(&w, "links")
	t.Logf("tar of a 4 MiB file with %d links: %d bytes", links, w.n)
	if err != nil || w.n > 4<<20+links*2048+64<<10 {
		t.Errorf("tar of a 4 MiB file with %d links: %d bytes, %v; want one copy and a header a link", links, w.n, err)
	}
	w = byteCounter{}
	err = s.WriteTar(&w, "sparse")
	t.Logf("tar of %d sparse 64 MiB files of 4 KiB data: %d bytes", sparse, w.n)
	if err != nil || w.n > sparse*(4096+4*512)+64<<10 {
		t.Errorf("tar of %d sparse 64 MiB files of 4 KiB data: %d bytes, %v", sparse, w.n, err)
	}
	cpu := callerCPU(t) - cpu0
	t.Logf("the caller's CPU for both tars: %v; the program's for making the trees: %v", cpu, res.CPUTime)
	if cpu > res.CPUTime+time.Second {
		t.Errorf("the caller spent %v of CPU on tars of trees the program made in %v", cpu, res.CPUTime)
	}
	w = byteCounter{}
	done := callerCost()
	err = s.WriteTar(&w, "deep")
	fds, heap := done()
	t.Logf("tar of %d directories of 255-byte names: %d bytes, %d fds, %d heap bytes: %v", deep, w.n, fds, heap, err)
	if !errors.Is(err, syscall.ENAMETOOLONG) || w.n > 1<<20 || fds > workspace.MaxDescriptors || heap > 64<<20 {
		t.Errorf("tar of a chain past PATH_MAX: %v after %d bytes, %d fds, %d heap bytes; want ENAMETOOLONG early", err, w.n, fds, heap)
	}
	for _, name := range []string{"..", "a/../..", "/workspace/.."} {
		if err := s.RemoveAll(name); !errors.Is(err, ErrOutsideWorkspace) || !strings.Contains(err.Error(), "remove") {
			t.Errorf("RemoveAll(%q) = %v, want ErrOutsideWorkspace naming the operation", name, err)
		}
	}
	for _, name := range []string{"..", "a/../..", "/workspace/..", ".", "", "/workspace", "links/..", "/workspace/chain/.."} {
		if err := s.WriteFile(name, []byte("x"), 0o644); !errors.Is(err, ErrOutsideWorkspace) {
			t.Errorf("WriteFile(%q) = %v, want ErrOutsideWorkspace", name, err)
		}
	}
	if out := turn(t, s, "ls links | wc -l; ls -d sparse deep chain"); out != fmt.Sprintf("%d\nchain\ndeep\nsparse\n", links+1) {
		t.Errorf("after the refused calls the workspace holds:\n%s", out)
	}
	for _, name := range []string{"chain", "deep"} {
		done := callerCost()
		err := s.RemoveAll(name)
		fds, heap := done()
		t.Logf("RemoveAll(%s): %d fds, %d heap bytes", name, fds, heap)
		if err != nil || fds > workspace.MaxDescriptors || heap > 64<<20 {
			t.Errorf("RemoveAll(%s) = %v with %d fds and %d heap bytes at most", name, err, fds, heap)
		}
	}
	if out := turn(t, s, "ls"); out != "links\nsparse\n" {
		t.Errorf("after RemoveAll the workspace holds:\n%s", out)
	}
}

// TestSnapshotLayersCap: a full workspace stays full through many
// snapshots; no layer adds room above Options.WorkspaceSize.
func TestSnapshotLayersCap(t *testing.T) {
	layouts(t, func(t *testing.T, newSession func(Options) *Sandbox) {
		const size = 256 << 10
		s := newSession(Options{Workspace: SessionWorkspace{Size: size}})
		turn(t, s, "head -c 262144 /dev/zero > fill 2>/dev/null; true")
		fits := 0
		var script bytes.Buffer
		for i := range 12 {
			if _, err := s.Snapshot(); err != nil {
				t.Fatalf("snapshot %d: %v", i, err)
			}
			script.Reset()
			fmt.Fprintf(&script, "echo x > f%d 2>/dev/null && test -s f%d", i, i)
			res, err := s.Run(context.Background(), Command("sh", "-c", script.String()))
			if err != nil {
				t.Fatal(err)
			}
			if res.Success() {
				fits++
			}
		}
		t.Logf("a full %d-byte workspace, 12 snapshots: %d one-byte files fit", size, fits)
		if fits > 0 {
			t.Errorf("after filling the workspace, %d snapshots each gave room for a file (a page each above the cap)", fits)
		}
	})
}

// TestExtractTarBounded: through the public API, a tar of a few KiB
// declaring a sparse file of 100 GiB (the format WriteTar writes) is
// refused, naming the file and wrapping syscall.EFBIG, and the program
// sees nothing of it; a cancelled context stops ExtractTar before it
// writes anything.
func TestExtractTarBounded(t *testing.T) {
	requireSandbox(t)
	const huge = 100 << 30
	dir := sharedTempDir(t)
	f, err := os.Create(filepath.Join(dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte{1}, huge-1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Skipf("cannot make a sparse file of 100 GiB in %s to tar: %v", dir, err)
	}
	src := newTest(t, Options{Workspace: HostWorkspace{Dir: dir}})
	var tarball bytes.Buffer
	if err := src.WriteTar(&tarball, "."); err != nil {
		t.Fatal(err)
	}
	s := newTest(t, Options{})
	err = s.ExtractTar(t.Context(), bytes.NewReader(tarball.Bytes()), "in")
	t.Logf("ExtractTar of %d bytes declaring %d: %v", tarball.Len(), int64(huge), err)
	if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "huge") || !strings.Contains(err.Error(), fmt.Sprint(int64(huge))) {
		t.Errorf("ExtractTar of a tar declaring 100 GiB = %v, want EFBIG naming huge and its size", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var small bytes.Buffer
	if err := src.WriteFile("small", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := src.RemoveAll("huge"); err != nil {
		t.Fatal(err)
	}
	if err := src.WriteTar(&small, "."); err != nil {
		t.Fatal(err)
	}
	if err := s.ExtractTar(ctx, &small, "in"); !errors.Is(err, context.Canceled) {
		t.Errorf("ExtractTar with a cancelled context = %v, want context.Canceled", err)
	}
	if out := turn(t, s, "ls -A; du -sk . | cut -f1"); out != "0\n" {
		t.Errorf("the workspace after the refused tars, from inside:\n%s", out)
	}
}
