package sysutil

import (
	"errors"
	"syscall"
)

// ErrnoOf finds the system call error in err's chain, or 0.
func ErrnoOf(err error) int {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return int(errno)
	}
	return 0
}
