package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuGroup is a cgroup of this process's own, which it and every process
// it starts run in: its CPU counter takes in what processes of the tree
// that left it used (bubblewrap's pid 1, re-parented when bwrap exits
// before it, and its namespaces' teardown in that exit), which getrusage
// never sees. The runs' own cgroups lie beneath it, where the spawner
// makes them.
type cpuGroup struct {
	dir   string // the cgroup's directory
	usage func() (time.Duration, bool)
}

// theCPUGroup is the table's cgroup; nil where it could not make one,
// and the tree's CPU is then counted from getrusage and /proc.
var theCPUGroup *cpuGroup

// enterCPUGroup makes the table's cgroup beneath this process's own, on
// cgroup v1's cpuacct hierarchy or on v2, and moves this process into it,
// before the spawner starts. It says how the tree's CPU is counted.
func enterCPUGroup() string {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "tree cpu: getrusage and /proc (" + err.Error() + ")"
	}
	var dir string
	var usage func(dir string) (time.Duration, bool)
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpuacct" {
				dir, usage = filepath.Join("/sys/fs/cgroup", parts[1], parts[2]), cpuacctUsage
			}
		}
		if dir == "" && parts[0] == "0" && parts[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				dir, usage = filepath.Join("/sys/fs/cgroup", parts[2]), v2Usage
			}
		}
	}
	if dir == "" {
		return "tree cpu: getrusage and /proc (no cpuacct or v2 cgroup)"
	}
	g := filepath.Join(dir, fmt.Sprintf("bench-table-%d", os.Getpid()))
	if err := os.Mkdir(g, 0o755); err != nil {
		return "tree cpu: getrusage and /proc (" + err.Error() + ")"
	}
	if err := os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Remove(g)
		return "tree cpu: getrusage and /proc (" + err.Error() + ")"
	}
	theCPUGroup = &cpuGroup{dir: g, usage: func() (time.Duration, bool) { return usage(g) }}
	return "tree cpu: the cgroup " + g
}

// leaveCPUGroup moves the processes in the table's cgroup, this one and
// what it started (the spawner, which lives as long as this process),
// back to the parent cgroup, and removes the table's.
func leaveCPUGroup() {
	g := theCPUGroup
	if g == nil {
		return
	}
	parent := filepath.Join(filepath.Dir(g.dir), "cgroup.procs")
	for range 50 {
		b, _ := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(b)) {
			os.WriteFile(parent, []byte(pid), 0)
		}
		if err := os.Remove(g.dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "table: could not remove its cgroup %s\n", g.dir)
}

func cpuacctUsage(dir string) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err == nil
}

func v2Usage(dir string) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	return parseV2Usage(b)
}

// parseV2Usage reads usage_usec out of a v2 cpu.stat.
func parseV2Usage(b []byte) (time.Duration, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}
