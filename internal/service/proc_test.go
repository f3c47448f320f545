package service

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What a server leaves on the host, seen from outside: its processes and
// the run cgroups they made.

// newToken returns an argument of sleep that marks a process: sleep adds
// it to its time, and no other process on the host has it in its argv.
func newToken() string { return fmt.Sprintf("0.%09d", rand.N(1_000_000_000)) }

// withToken lists the host's processes with token as an argument.
func withToken(token string) []int {
	var pids []int
	for _, pid := range allPids() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if slices.Contains(strings.Split(string(b), "\x00"), token) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitToken waits until a process with token exists, and returns them.
func waitToken(t *testing.T, token string) []int {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if pids := withToken(token); len(pids) > 0 {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process with %s in its argv appeared", token)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allPids() []int {
	des, _ := os.ReadDir("/proc")
	var pids []int
	for _, de := range des {
		if pid, err := strconv.Atoi(de.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// proc is a process as /proc/PID/stat shows it: its parent and start
// time, which tell it from a later process with the same pid.
type proc struct {
	pid, ppid int
	start     string
}

func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	// The fields after the command, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return proc{pid: pid, ppid: ppid, start: f[19]}, true
}

// tree returns the process pid and all its descendants.
func tree(pid int) []proc {
	root, ok := readProc(pid)
	if !ok {
		return nil
	}
	all := []proc{root}
	var procs []proc
	for _, p := range allPids() {
		if pr, ok := readProc(p); ok {
			procs = append(procs, pr)
		}
	}
	for i := 0; i < len(all); i++ {
		for _, pr := range procs {
			if pr.ppid == all[i].pid {
				all = append(all, pr)
			}
		}
	}
	return all
}

// alive lists the processes of procs that still run.
func alive(procs []proc) []proc {
	var left []proc
	for _, p := range procs {
		if now, ok := readProc(p.pid); ok && now.start == p.start {
			left = append(left, p)
		}
	}
	return left
}

// runCgroups lists the run cgroups the processes procs made: the library
// names each "sandbox-<maker's pid>-<n>", in every hierarchy it uses
// beneath /sys/fs/cgroup.
func runCgroups(procs []proc) []string {
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		for _, p := range procs {
			if strings.HasPrefix(d.Name(), fmt.Sprintf("sandbox-%d-", p.pid)) {
				found = append(found, path)
			}
		}
		return nil
	})
	return found
}

// assertGone waits until none of procs runs and no run cgroup made by them
// is left, and fails the test if that does not happen.
func assertGone(t *testing.T, procs []proc) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		left, cgroups := alive(procs), runCgroups(procs)
		if len(left) == 0 && len(cgroups) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: processes %+v, cgroups %q", left, cgroups)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
