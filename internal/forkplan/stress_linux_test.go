package forkplan

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Starts while the collector runs without pause and other goroutines
// allocate and write: every child must run its plan on intact memory and
// exec, and a signal that the runtime catches, sent to a child while it
// waits in its plan, must meet the default action (ignore), not a Go
// handler running on the cloning thread's state.
func TestStartsUnderGC(t *testing.T) {
	if _, err := os.Stat("/bin/true"); err != nil {
		t.Skip("no /bin/true on this host")
	}
	starts := 150
	if testing.Short() {
		starts = 30
	}
	stop := make(chan struct{})
	var busy sync.WaitGroup
	busy.Add(3)
	go func() { // the collector, all the time
		defer busy.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	for g := 0; g < 2; g++ {
		go func() { // garbage, written as it is made
			defer busy.Done()
			var keep [64][]byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b := make([]byte, 1<<(i%14))
				for j := range b {
					b[j] = byte(i)
				}
				keep[i%len(keep)] = b
			}
		}()
	}
	defer func() { close(stop); busy.Wait() }()
	inModes(t, func(t *testing.T, shared bool) {
		var failed atomic.Int32
		var workers sync.WaitGroup
		for w := 0; w < 2; w++ {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for i := w; i < starts && failed.Load() < 3; i += 2 {
					if err := startServed(shared, i); err != nil {
						failed.Add(1)
						t.Errorf("start %d: %v", i, err)
					}
				}
			}()
		}
		workers.Wait()
	})
}

// startServed starts a plan that says it runs, waits for a byte, writes a
// pattern made for start i, and execs /bin/true; meanwhile it sends the
// child signals the runtime catches. Nothing refers to the plan after
// Start returns.
func startServed(shared bool, i int) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fds[0])
	r, w, err := os.Pipe()
	if err != nil {
		unix.Close(fds[1])
		return err
	}
	defer r.Close()
	want := bytes.Repeat([]byte(fmt.Sprintf("<%d>", i)), 40)
	var pidTo int32
	started := make(chan error, 1)
	var pid int
	go func() {
		p := New(int(w.Fd()))
		p.Call(Where{Op: "ready"}, unix.SYS_WRITE, Val(fds[1]), Buf([]byte("r")), Val(1)).Want(1)
		p.Call(Where{Op: "wait"}, unix.SYS_READ, Val(fds[1]), Buf(make([]byte, 1)), Val(1)).Want(1)
		p.Call(Where{Op: "write"}, unix.SYS_WRITE, Val(w.Fd()), Buf(bytes.Clone(want)), Val(len(want))).Want(uintptr(len(want)))
		p.Call(Where{Op: "execve", Path: "/bin/true"}, unix.SYS_EXECVE, Str("/bin/true"), Strs([]string{"true"}), Strs([]string{"A=" + string(want)}))
		var err error
		pid, err = p.Start(Clone{CgroupFD: -1, Shared: shared, PidTo: &pidTo})
		// The child has its copies: a child gone before it said it runs
		// then reads as EOF.
		unix.Close(fds[1])
		w.Close()
		started <- err
	}()
	b := make([]byte, 1)
	if n, rerr := unix.Read(fds[0], b); n != 1 {
		err := <-started
		var ws syscall.WaitStatus
		if err == nil {
			syscall.Wait4(pid, &ws, 0, nil)
		}
		rec, _ := io.ReadAll(r)
		return fmt.Errorf("the child never said it runs (read: %d, %v; Start: %v; the child ended %v, wrote %q)", n, rerr, err, ws, rec)
	}
	child := int(atomic.LoadInt32(&pidTo))
	for _, sig := range []unix.Signal{unix.SIGURG, unix.SIGWINCH, unix.SIGCHLD, unix.SIGURG} {
		if err := unix.Kill(child, sig); err != nil {
			return fmt.Errorf("kill %d %v: %v", child, sig, err)
		}
	}
	if _, err := unix.Write(fds[0], b); err != nil {
		return err
	}
	if err := <-started; err != nil {
		return fmt.Errorf("Start: %v", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		return fmt.Errorf("wait4: %v", err)
	}
	got := make([]byte, 2*len(want))
	n, _ := r.Read(got)
	if !ws.Exited() || ws.ExitStatus() != 0 || !bytes.Equal(got[:n], want) {
		return fmt.Errorf("the child ended %v having written %q, want exit 0 after %q", ws, got[:n], want)
	}
	return nil
}
