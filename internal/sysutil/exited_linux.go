//go:build linux

package sysutil

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pfExiting is the kernel's PF_EXITING task flag, set as a process begins
// its exit.
const pfExiting = 0x4

// Exited says whether the process of pidfd, pid on the host, has exited or
// has begun to. Its pidfd reads ready only once it has exited; the init of
// a PID namespace exits last there, after the kernel killed and reaped
// every other process in it, and meanwhile shows PF_EXITING among the
// flags of its /proc/PID/stat.
func Exited(pidfd, pid int) bool {
	if pidfdReady(pidfd) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pidfdReady(pidfd)
	}
	// The flags are the sixth field after the command's closing
	// parenthesis. Were pid another's by now, the pidfd's process has
	// been reaped, and has exited as said.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 7 {
		return pidfdReady(pidfd)
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0 || pidfdReady(pidfd)
}

// pidfdReady says whether pidfd reads ready: its process has exited.
func pidfdReady(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err != nil || n > 0
		}
	}
}
