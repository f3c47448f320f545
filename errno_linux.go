//go:build linux

package sandbox

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// errnoName returns an errno's symbolic name, e.g. "EPERM".
func errnoName(e syscall.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", int(e))
}
