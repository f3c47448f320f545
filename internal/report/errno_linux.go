//go:build linux

package report

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

func errnoName(e syscall.Errno) string { return unix.ErrnoName(e) }

// maxErrno bounds the numbers Linux gives errnos (MAX_ERRNO).
const maxErrno = 4095

// errnos maps each errno name to its number; unix has no lookup that way.
var errnos = sync.OnceValue(func() map[string]syscall.Errno {
	m := map[string]syscall.Errno{}
	for e := syscall.Errno(1); e <= maxErrno; e++ {
		if name := unix.ErrnoName(e); name != "" {
			m[name] = e
		}
	}
	return m
})

func errnoValue(name string) syscall.Errno { return errnos()[name] }
