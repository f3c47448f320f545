package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, which Linux
// fixes at 100 for user space whatever the kernel's own HZ).
const clockTick = 10 * time.Millisecond

// treeCPU returns the user+system CPU time used so far by this process and
// its descendants: its own, its reaped children's, and that of its live
// children (the spawner, the sessions' keepers) with the children they
// reaped, the sandboxes' processes. It misses kernel threads (a namespace's
// deferred teardown) and processes that left the tree before being reaped
// (bubblewrap's pid 1 can outlive bwrap and be re-parented).
func treeCPU() time.Duration {
	total := rusage(unix.RUSAGE_SELF) + rusage(unix.RUSAGE_CHILDREN)
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, pid := range strings.Fields(string(b)) {
			total += childCPU(pid)
		}
	}
	return total
}

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is a live process's utime+stime+cutime+cstime from its stat.
func childCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields from
	// after it, where field 3 (state) is index 0 and utime, field 14, is 11.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	var ticks int64
	for _, s := range f[min(11, len(f)):min(15, len(f))] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}
