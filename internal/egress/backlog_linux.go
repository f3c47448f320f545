//go:build linux

package egress

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// takeBacklog accepts, without waiting, every connection still queued on
// l, closes each and returns how many there were. The sandbox opened them
// but the proxy never served them (its CPU budget or the run's end came
// first); counting them is what lets the report hold every connection.
// The queue is bounded by the listen backlog, so this is too.
func takeBacklog(l net.Listener) int {
	sc, ok := l.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	// A listener's descriptor is non-blocking: the loop ends with EAGAIN
	// once the queue is empty. (A listener's RawConn has no Read.)
	n := 0
	raw.Control(func(fd uintptr) {
		for {
			c, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil {
				return
			}
			unix.Close(c)
			n++
		}
	})
	return n
}
