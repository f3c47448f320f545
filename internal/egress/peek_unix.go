//go:build unix

package egress

import "golang.org/x/sys/unix"

// readable reports whether a read on the socket fd would not block: data,
// the end of the stream, or an error is waiting. It consumes nothing.
func readable(fd uintptr) bool {
	var one [1]byte
	_, _, err := unix.Recvfrom(int(fd), one[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err != unix.EAGAIN
}
