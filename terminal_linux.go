//go:build linux

package sandbox

import (
	"io"
	"os"

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
