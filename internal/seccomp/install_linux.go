package seccomp

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install loads the encoded program b as a seccomp filter of every thread
// of the calling process (TSYNC). The caller must have set no_new_privs.
// With listen, the filter's user-notification fd is returned; otherwise -1.
func Install(b []byte, listen bool) (int, error) {
	raw, err := Decode(b)
	if err != nil {
		return -1, err
	}
	prog := unix.SockFprog{Len: uint16(len(raw)), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_TSYNC)
	if listen {
		// TSYNC and NEW_LISTENER together need TSYNC_ESRCH (Linux 5.7),
		// so that a failed sync is an error rather than a thread id in
		// the return value.
		flags |= unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
		// WAIT_KILLABLE_RECV (Linux 5.19): once the supervisor has taken a
		// notification, only a fatal signal interrupts the syscall. Without
		// it a signal (the Go runtime's SIGURG, a program's timer) that
		// lands while the refusal is being sent restarts the syscall after
		// the supervisor's answer was accepted, and one call is refused and
		// counted twice. Older kernels refuse the flag; they run without.
		flags |= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	if errno == unix.EINVAL && flags&unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
		flags &^= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
		r, _, errno = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	}
	if errno != 0 {
		return -1, errno
	}
	if !listen {
		return -1, nil
	}
	return int(r), nil
}

// Notification is one syscall the filter stopped for the supervisor
// (struct seccomp_notif).
type Notification struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  Data
}

// response is struct seccomp_notif_resp.
type response struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// Listener reads the notifications of one filter.
type Listener struct {
	f  *os.File
	rc syscall.RawConn
}

// NewListener takes ownership of fd, a filter's notification fd, and
// puts it in the runtime's poller so a Receive blocks only its goroutine.
func NewListener(fd int) (*Listener, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seccomp: listener: %w", err)
	}
	f := os.NewFile(uintptr(fd), "seccomp-listener")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp: listener: %w", err)
	}
	return &Listener{f: f, rc: rc}, nil
}

// Receive waits for the next notification. It fails once every process
// under the filter is gone or the listener is closed.
func (l *Listener) Receive() (Notification, error) {
	var n Notification
	var ierr error
	err := l.rc.Read(func(fd uintptr) bool {
		// The receive ioctl blocks whatever O_NONBLOCK says, and the
		// runtime calls this before it waits for readiness: ask first.
		// Retry here rather than wait for the poller, whose edge for a
		// notification still pending may already have been spent.
		for {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, err := unix.Poll(pfd, 0)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				ierr = err
				return true
			case pfd[0].Revents&unix.POLLIN == 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0:
				ierr = errHangup // no task uses the filter any more
				return true
			case pfd[0].Revents&unix.POLLIN == 0:
				return false // nothing pending: wait for the poller
			}
			n = Notification{}
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
			switch errno {
			case unix.EINTR, unix.ENOENT:
				// ENOENT: the task was interrupted or killed between poll
				// and receive; an interrupted syscall comes back as a new
				// notification.
				continue
			case 0:
				ierr = nil
			default:
				ierr = errno
			}
			return true
		}
	})
	if err == nil {
		err = ierr
	}
	return n, err
}

// Refuse answers notification id: the syscall fails with e. ENOENT means
// the task is already gone (killed while it waited), which callers ignore.
func (l *Listener) Refuse(id uint64, e syscall.Errno) error {
	return l.send(response{ID: id, Error: -int32(e)})
}

// Continue answers notification id: the syscall runs as if the filter had
// allowed it (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5). ENOENT means
// the task is already gone.
func (l *Listener) Continue(id uint64) error {
	return l.send(response{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE})
}

// send hands the kernel the answer to a notification.
func (l *Listener) send(resp response) error {
	var serr error
	err := l.rc.Control(func(fd uintptr) {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		if errno != 0 {
			serr = errno
		}
	})
	if err == nil {
		err = serr
	}
	return err
}

// Valid says whether notification id still waits for its answer: that its
// task has not died meanwhile, so that what was read of the task (its
// memory, by its pid) was read of the task that made the syscall.
func (l *Listener) Valid(id uint64) bool {
	var serr error
	err := l.rc.Control(func(fd uintptr) {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
		if errno != 0 {
			serr = errno
		}
	})
	return err == nil && serr == nil
}

// Close releases the listener; a Receive in progress returns.
func (l *Listener) Close() error { return l.f.Close() }

var errHangup = fmt.Errorf("seccomp: no process uses the filter any more")
