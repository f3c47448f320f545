// Package exampletest holds what the examples' tests share: finding the
// processes a test's sandboxes left, and skipping where the host cannot
// run an example.
package exampletest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fumehood/sandbox"
)

// OwnPrograms returns the pids of the processes named name (their comm)
// that descend from this process: what the test's own sandboxes run, and
// nothing of other programs' sandboxes on the host.
func OwnPrograms(name string) []int {
	var pids []int
	for pid, p := range Descendants() {
		if p.Comm == name {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Proc is a process as /proc/PID/stat shows it.
type Proc struct {
	Comm  string
	Alive bool // not a zombie: a zombie has ended, and is only not yet reaped
}

// Descendants returns the processes beneath this one, by pid.
func Descendants() map[int]Proc {
	parent := map[int]int{}
	procs := map[int]Proc{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The command is in parentheses and may hold anything; the
		// state and the parent's pid follow the last ')'.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		var state string
		var ppid int
		if _, err := fmt.Sscan(s[end+1:], &state, &ppid); err != nil {
			continue
		}
		parent[pid], procs[pid] = ppid, Proc{Comm: s[open+1 : end], Alive: state != "Z"}
	}
	self := os.Getpid()
	for pid := range procs {
		mine := false
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				mine = true
				break
			}
		}
		if !mine {
			delete(procs, pid)
		}
	}
	return procs
}

// RequirePython skips the test where this host cannot run a sandbox, or
// has no python3 for the sandbox to run (it sees the host's /usr).
func RequirePython(t *testing.T) {
	t.Helper()
	report, err := sandbox.Probe()
	if err != nil {
		t.Fatalf("sandbox.Probe: %v", err)
	}
	if !report.CanRun() {
		t.Skipf("this host cannot run sandboxes:\n%s", report)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("the example runs python3 in the sandbox, and the host has none: %v", err)
	}
}
