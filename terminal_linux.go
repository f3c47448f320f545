//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/sysutil"
	"golang.org/x/sys/unix"
)

// The caller's side of stdio: Run copies everything, and hands the program
// nothing of its own. A descriptor the program held that shared an open
// file description with one of the caller's (a dup of a terminal, say)
// would let it change the caller's file status flags (O_NONBLOCK), and of
// a terminal its termios, line discipline, flow control, exclusive mode
// and window size, all of which outlive the run.

// setWinsize sets the window size of the pty whose master is f; the
// kernel sends SIGWINCH to the pty's foreground process group.
func setWinsize(f *os.File, rows, cols uint16) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		return err
	}
	return serr
}

// pollableMaster makes the master of a run's pty, received from its init
// and held by no one else, non-blocking, so that its reads and writes go
// through the runtime's poller and a Close ends them.
func pollableMaster(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pty-master"), nil
}

// copyFileIn copies the caller's file src to dst until src ends or stop
// is readable (its write end closed), then closes dst. It reads src
// through the caller's own descriptor without changing its flags (it
// may be blocking, as a terminal on fd 0 usually is): it polls for input
// first, so that once stop fires nothing more of the caller's input is
// taken (a goroutine blocked in a read would take the caller's next line).
func copyFileIn(dst io.WriteCloser, src *os.File, stop int) {
	defer dst.Close()
	defer unix.Close(stop)
	rc, err := src.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		var n int
		done := false
		if err := rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, -1); err != nil {
				done = err != unix.EINTR
				return
			}
			if pfd[1].Revents != 0 {
				done = true
				return
			}
			if pfd[0].Revents == 0 {
				return
			}
			var rerr error
			n, rerr = unix.Read(int(fd), buf)
			switch {
			case rerr == unix.EAGAIN || rerr == unix.EINTR:
				n = 0
			case rerr != nil || n == 0:
				done = true
			}
		}); err != nil || done {
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

// termInput is what Run writes a Terminal's input through: the pty's
// master, and the emulation of one default action the kernel does not
// take. The program is pid 1 of its PID namespace, and the kernel ignores
// any signal it sends a namespace's init that the init does not handle:
// the SIGINT of the terminal's interrupt character (Ctrl-C) would leave
// a "sleep 100" running, where on the host's terminal it ends it. When
// that character goes in, with ISIG on, while the foreground job of the
// terminal is led by the sandbox's init, which neither catches nor
// ignores SIGINT, the run is killed instead and reported as ended by
// SIGINT (interrupted).
type termInput struct {
	master      *os.File
	kill        func()
	interrupted atomic.Bool
}

func (w *termInput) Write(p []byte) (int, error) {
	// Judged before the write: once the signal is in, a program that
	// handled it may be on its way out, its handlers reset.
	if w.ignoresInterrupt(p) {
		w.interrupted.Store(true)
		w.kill()
	}
	return w.master.Write(p)
}

// ignoresInterrupt says whether p holds the interrupt character of the
// terminal, which the kernel would turn into a SIGINT its foreground job
// ignores for being its sandbox's init without a handler.
func (w *termInput) ignoresInterrupt(p []byte) bool {
	rc, err := w.master.SyscallConn()
	if err != nil {
		return false
	}
	var (
		tio  *unix.Termios
		pgrp int
		ierr error
	)
	// On a pty's master, both requests read the peer's (the program's)
	// side: its termios, and its foreground process group, as a pid of
	// this process's namespace.
	err = rc.Control(func(fd uintptr) {
		if tio, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS); ierr == nil {
			pgrp, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
		}
	})
	// A master closed at the run's end runs nothing: no termios to read.
	if err != nil || ierr != nil || tio.Lflag&unix.ISIG == 0 || tio.Cc[unix.VINTR] == 0 || !bytes.Contains(p, tio.Cc[unix.VINTR:unix.VINTR+1]) {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pgrp) + "/status")
	if err != nil {
		return false
	}
	return sysutil.NSInitWithDefault(string(status), int(unix.SIGINT))
}
