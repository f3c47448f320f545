package forkplan

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inModes runs test with a child that gets a copy of the memory, and with
// one that shares it.
func inModes(t *testing.T, test func(t *testing.T, shared bool)) {
	t.Run("copy", func(t *testing.T) { test(t, false) })
	t.Run("shared", func(t *testing.T) { test(t, true) })
}

// start runs p in a child cloned with flags, shared or not, and returns its
// wait status.
func start(t *testing.T, p *Plan, flags uint64, shared bool) syscall.WaitStatus {
	t.Helper()
	pid, err := p.Start(Clone{Flags: flags, CgroupFD: -1, Shared: shared})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait4: %v", err)
	}
	return ws
}

// reportPipe returns a pipe; the child has its write end at the same fd.
func reportPipe(t *testing.T) (r *os.File, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// readAll closes the parent's write end and reads what the child wrote.
func readAll(t *testing.T, r, w *os.File) []byte {
	t.Helper()
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteAndExit(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		r, w := reportPipe(t)
		p := New(int(w.Fd()))
		p.Call(Where{Op: "write"}, unix.SYS_WRITE, Val(w.Fd()), Buf([]byte("hello")), Val(5)).Want(5)
		p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(7))
		ws := start(t, p, 0, shared)
		if got := string(readAll(t, r, w)); got != "hello" {
			t.Errorf("the child wrote %q, want hello", got)
		}
		if !ws.Exited() || ws.ExitStatus() != 7 {
			t.Errorf("the child ended %v, want exit 7", ws)
		}
	})
}

func TestFailureNamesTheStep(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		r, w := reportPipe(t)
		p := New(int(w.Fd()))
		p.Call(Where{Op: "getpid"}, unix.SYS_GETPID)
		missing := filepath.Join(t.TempDir(), "missing")
		p.Call(Where{Stage: "mount", Op: "open source", Path: missing}, unix.SYS_OPENAT, Val(unix.AT_FDCWD), Str(missing), Val(unix.O_PATH))
		p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(0))
		ws := start(t, p, 0, shared)
		rec := readAll(t, r, w)
		if !ws.Exited() || ws.ExitStatus() != 125 {
			t.Errorf("the child ended %v, want exit 125", ws)
		}
		f, err := p.ParseFailure(rec)
		if err != nil {
			t.Fatal(err)
		}
		if f.Step != 1 || f.Errno != uintptr(unix.ENOENT) || f.Where.Path != missing || f.Where.Op != "open source" {
			t.Errorf("failure = %+v, want step 1, ENOENT, open source %s", f, missing)
		}
		if _, err := p.ParseFailure(rec[:5]); err == nil {
			t.Error("a short record parsed")
		}
	})
}

func TestSlotsAndErrnoHandling(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		r, w := reportPipe(t)
		out := filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(out, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		p := New(int(w.Fd()))
		fd := p.Slot(0)
		noted := p.Slot(uintptr(unix.ENOENT))
		open := func(path string) Step {
			return p.Call(Where{Op: "open", Path: path}, unix.SYS_OPENAT, Val(unix.AT_FDCWD), Str(path), Val(unix.O_WRONLY|unix.O_APPEND))
		}
		open(out).Save(fd)
		p.Call(Where{Op: "write a"}, unix.SYS_WRITE, In(fd), Buf([]byte("a")), Val(1))
		// Skipped: the open fails with ENOENT, and the write after it is skipped.
		open(out+".missing").SkipOn(uintptr(unix.ENOENT), 1)
		p.Call(Where{Op: "write b"}, unix.SYS_WRITE, In(fd), Buf([]byte("b")), Val(1))
		// Passed: the plan goes on to the next step.
		open(out + ".missing").PassOn(uintptr(unix.ENOENT))
		p.Call(Where{Op: "write c"}, unix.SYS_WRITE, In(fd), Buf([]byte("c")), Val(1))
		// Noted: EISDIR lands in the slot, and the last step fails with it.
		open("/").NoteOn(uintptr(unix.EISDIR), noted)
		p.Fail(Where{Op: "noted"}, noted)
		ws := start(t, p, 0, shared)
		f, err := p.ParseFailure(readAll(t, r, w))
		if err != nil {
			t.Fatal(err)
		}
		if f.Where.Op != "noted" || f.Errno != uintptr(unix.EISDIR) || ws.ExitStatus() != 125 {
			t.Errorf("failure = %+v, exit %v; want the noted EISDIR", f, ws)
		}
		if b, _ := os.ReadFile(out); string(b) != "ac" {
			t.Errorf("the child wrote %q, want ac", b)
		}
	})
}

func TestWantStoreAndCheck(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		// each runs a plan whose last step must fail as want.
		each := func(name string, steps func(p *Plan), want string, errno unix.Errno) {
			t.Run(name, func(t *testing.T) {
				r, w := reportPipe(t)
				p := New(int(w.Fd()))
				steps(p)
				p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(0))
				ws := start(t, p, 0, shared)
				f, err := p.ParseFailure(readAll(t, r, w))
				if err != nil {
					t.Fatal(err)
				}
				if f.Where.Op != want || f.Errno != uintptr(errno) || ws.ExitStatus() != 125 {
					t.Errorf("failure = %+v, exit %v; want %s failing with %v", f, ws, want, errno)
				}
			})
		}
		// Outside a new PID namespace the child is not pid 1.
		each("want", func(p *Plan) {
			p.Call(Where{Op: "getpid"}, unix.SYS_GETPID)
			p.Call(Where{Op: "getpid is 1"}, unix.SYS_GETPID).Want(1)
		}, "getpid is 1", unix.EPROTO)
		cwd := make([]byte, 64)
		each("check", func(p *Plan) {
			p.Call(Where{Op: "chdir"}, unix.SYS_CHDIR, Str("/"))
			p.Call(Where{Op: "getcwd"}, unix.SYS_GETCWD, Buf(cwd), Val(len(cwd)))
			p.Check(Where{Op: "cwd is /"}, &cwd[0], '/', uintptr(unix.EXDEV))
			p.Check(Where{Op: "cwd is ."}, &cwd[0], '.', uintptr(unix.EXDEV))
		}, "cwd is .", unix.EXDEV)
		var at int32
		uid := byte(os.Getuid())
		each("store", func(p *Plan) {
			s := p.Slot(0)
			p.Call(Where{Op: "getuid"}, unix.SYS_GETUID).Save(s)
			p.Store(s, &at)
			p.Check(Where{Op: "stored"}, (*byte)(unsafe.Pointer(&at)), uid, uintptr(unix.ESRCH))
			p.Check(Where{Op: "stored, off by one"}, (*byte)(unsafe.Pointer(&at)), uid+1, uintptr(unix.ESRCH))
		}, "stored, off by one", unix.ESRCH)
		// What a Load reads is what is there when the step runs, not
		// when it was planned.
		var word uintptr
		each("load", func(p *Plan) {
			s := p.Slot(0)
			p.Load(s, &word)
			p.Fail(Where{Op: "loaded"}, s)
			word = uintptr(unix.ENOTSUP)
		}, "loaded", unix.ENOTSUP)
		// A copying child's writes land in its own copy; a shared child's
		// in this process's memory.
		switch {
		case !shared && (at != 0 || cwd[0] != 0):
			t.Errorf("the parent's memory changed (%d, %q): the child's writes must land in its own copy", at, cwd[0])
		case shared && SharesMemory && (at != int32(uid) || cwd[0] != '/'):
			t.Errorf("the parent's memory is (%d, %q), want (%d, '/'): a shared child's writes land in it", at, cwd[0], uid)
		}
	})
}

func TestExecInNewNamespaces(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		if _, err := os.Stat("/bin/sh"); err != nil {
			t.Skip("no /bin/sh on this host")
		}
		r, w := reportPipe(t)
		p := New(int(w.Fd()))
		p.Call(Where{Op: "dup stdout"}, unix.SYS_DUP3, Val(w.Fd()), Val(1), Val(0))
		p.Call(Where{Op: "execve", Path: "/bin/sh"}, unix.SYS_EXECVE, Str("/bin/sh"),
			Strs([]string{"sh", "-c", "echo $$ $X; cat /proc/self/uid_map | wc -l"}), Strs([]string{"X=y"}))
		ws := start(t, p, unix.CLONE_NEWUSER|unix.CLONE_NEWPID|unix.CLONE_NEWNS, shared)
		out := string(readAll(t, r, w))
		if !ws.Exited() || ws.ExitStatus() != 0 {
			t.Fatalf("sh ended %v, output %q", ws, out)
		}
		// pid 1 of its namespace; the new user namespace has no map yet.
		if got := strings.Fields(out); len(got) != 3 || got[0] != "1" || got[1] != "y" || got[2] != "0" {
			t.Errorf("sh printed %q, want \"1 y\\n0\"", out)
		}
	})
}

// A child that waits for its parent before going on: it says it runs, the
// parent finds its pid in PidTo and answers. With a shared child this
// happens while Start still waits, in another goroutine.
func TestServedWhileStartWaits(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[0])
		r, w := reportPipe(t)
		p := New(int(w.Fd()))
		p.Call(Where{Op: "ready"}, unix.SYS_WRITE, Val(fds[1]), Buf([]byte("r")), Val(1)).Want(1)
		p.Call(Where{Op: "wait"}, unix.SYS_READ, Val(fds[1]), Buf(make([]byte, 1)), Val(1)).Want(1)
		p.Call(Where{Op: "write"}, unix.SYS_WRITE, Val(w.Fd()), Buf([]byte("served")), Val(6)).Want(6)
		p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(0))
		var pidTo int32
		served := make(chan error, 1)
		go func() {
			b := make([]byte, 1)
			if n, err := unix.Read(fds[0], b); n != 1 {
				served <- fmt.Errorf("read of ready: %d bytes, %v", n, err)
				return
			}
			pid := atomic.LoadInt32(&pidTo)
			// The child runs, and has not been waited for: its pid is live.
			if err := unix.Kill(int(pid), 0); err != nil {
				served <- fmt.Errorf("the pid in PidTo, %d: %v", pid, err)
				return
			}
			_, err := unix.Write(fds[0], []byte{1})
			served <- err
		}()
		pid, err := p.Start(Clone{CgroupFD: -1, Shared: shared, PidTo: &pidTo})
		unix.Close(fds[1])
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		if int(pidTo) != pid {
			t.Errorf("PidTo holds %d, Start returned %d", pidTo, pid)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		if got := string(readAll(t, r, w)); got != "served" || ws.ExitStatus() != 0 {
			t.Errorf("the child wrote %q and ended %v, want served and exit 0", got, ws)
		}
	})
}

// A child that dumps core still lets Start return, though older kernels
// leave a shared child's futex word set then.
func TestStartReturnsAfterCoreSignal(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		_, w := reportPipe(t)
		p := New(int(w.Fd()))
		// A small core, in a directory of the test's own.
		dir := t.TempDir()
		p.Call(Where{Op: "chdir", Path: dir}, unix.SYS_CHDIR, Str(dir))
		p.Call(Where{Op: "prlimit RLIMIT_CORE"}, unix.SYS_PRLIMIT64, Val(0), Val(unix.RLIMIT_CORE), Ptr(&unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}), Val(0))
		self := p.Slot(0)
		p.Call(Where{Op: "getpid"}, unix.SYS_GETPID).Save(self)
		p.Call(Where{Op: "kill"}, unix.SYS_KILL, In(self), Val(unix.SIGQUIT))
		p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(0))
		ws := start(t, p, 0, shared)
		if !ws.Signaled() || ws.Signal() != unix.SIGQUIT {
			t.Errorf("the child ended %v, want killed by SIGQUIT", ws)
		}
		t.Logf("core dumped: %v", ws.CoreDump())
	})
}

// TestForkGoesOnInTheChild: after a fork step and ExitUnlessZero, the
// forking child exits 0 at once and the new one, a child of the caller
// through CLONE_PARENT, runs the rest of the plan.
func TestForkGoesOnInTheChild(t *testing.T) {
	r, w := reportPipe(t)
	p := New(int(w.Fd()))
	pid := p.Slot(^uintptr(0))
	p.Call(Where{Op: "fork"}, unix.SYS_CLONE, Val(unix.CLONE_PARENT), Val(0), Val(0), Val(0), Val(0)).Save(pid)
	p.ExitUnlessZero(pid)
	p.Call(Where{Op: "write"}, unix.SYS_WRITE, Val(w.Fd()), Buf([]byte("child")), Val(5)).Want(5)
	p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(9))
	if ws := start(t, p, 0, false); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("the forking child ended %v, want exit 0", ws)
	}
	// The grandchild is this process's child too: wait for any.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil {
		t.Fatalf("wait4 for the forked child: %v", err)
	}
	if !ws.Exited() || ws.ExitStatus() != 9 {
		t.Errorf("the forked child ended %v, want exit 9", ws)
	}
	if got := string(readAll(t, r, w)); got != "child" {
		t.Errorf("the children wrote %q, want one \"child\"", got)
	}
}
