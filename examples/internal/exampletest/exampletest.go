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
	parent := map[int]int{}
	comm := map[int]string{}
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
		parent[pid], comm[pid] = ppid, s[open+1:end]
	}
	self := os.Getpid()
	var pids []int
	for pid, c := range comm {
		if c != name {
			continue
		}
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
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
