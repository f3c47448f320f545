//go:build !linux

package sandbox

import (
	"fmt"
	"syscall"
)

func errnoName(e syscall.Errno) string { return fmt.Sprintf("errno %d", int(e)) }
