package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is the unit of /proc/PID/stat's and /proc/stat's times
// (USER_HZ, which Linux fixes at 100 for user space whatever the kernel's
// own HZ).
const clockTick = 10 * time.Millisecond

// cpuSplit is CPU time split into user and system time.
type cpuSplit struct{ user, sys time.Duration }

func (a cpuSplit) add(b cpuSplit) cpuSplit      { return cpuSplit{a.user + b.user, a.sys + b.sys} }
func (a cpuSplit) sub(b cpuSplit) cpuSplit      { return cpuSplit{a.user - b.user, a.sys - b.sys} }
func (a cpuSplit) total() time.Duration         { return a.user + a.sys }
func (a cpuSplit) div(n time.Duration) cpuSplit { return cpuSplit{a.user / n, a.sys / n} }

// treeCPU returns the user+system CPU time used so far by this process and
// its descendants: its own, its reaped children's, and that of its live
// children (the spawner, the sessions' keepers) with the children they
// reaped, the sandboxes' processes; with the table's cgroup, also those
// that left the tree before being reaped (bubblewrap's pid 1 can outlive
// bwrap and be re-parented). It misses kernel threads (a namespace's
// deferred teardown).
func treeCPU() time.Duration {
	if g := theCPUGroup; g != nil {
		if d, ok := g.usage(); ok {
			return d
		}
	}
	total := rusage(unix.RUSAGE_SELF).total() + rusage(unix.RUSAGE_CHILDREN).total()
	for _, pid := range childrenOf("self") {
		total += childCPU(pid)
	}
	return total
}

func rusage(who int) cpuSplit {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return cpuSplit{}
	}
	return cpuSplit{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// childrenOf lists the pids of a process's live children, from each of
// its threads' children file.
func childrenOf(pid string) []string {
	var out []string
	tasks, _ := filepath.Glob("/proc/" + pid + "/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}

// childCPU is a live process's utime+stime+cutime+cstime from its stat.
func childCPU(pid string) time.Duration {
	st, _ := readStat(pid)
	return st.own.total() + st.reaped.total()
}

// taskStat is what the table reads of a /proc/PID/stat.
type taskStat struct {
	own    cpuSplit // utime, stime
	reaped cpuSplit // cutime, cstime: of the children it waited for
}

func readStat(pid string) (taskStat, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return taskStat{}, false
	}
	return parseStat(b)
}

func parseStat(b []byte) (taskStat, bool) {
	// The command name, in parentheses, may hold spaces: count fields from
	// after it, where field 3 (state) is index 0 and utime,
	// stime, cutime, cstime (14 to 17) are 11 to 14.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return taskStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return taskStat{}, false
	}
	var n [15]int64
	for k := range n {
		n[k], _ = strconv.ParseInt(f[k], 10, 64)
	}
	tick := func(k int) time.Duration { return time.Duration(n[k]) * clockTick }
	return taskStat{own: cpuSplit{tick(11), tick(12)}, reaped: cpuSplit{tick(13), tick(14)}}, true
}
