//go:build linux

package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUsageOOMKills: both drivers read the count of OOM kills from the
// kernel's own files, as the kernel writes them: v2's memory.events
// (where oom_group_kill must not be taken for it) and v1's
// memory.oom_control.
func TestUsageOOMKills(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory.events", "low 0\nhigh 0\nmax 41\noom 4\noom_kill 3\noom_group_kill 1\n")
	write("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	u2, err := (&v2{path: dir, fd: -1}).Usage()
	if err != nil || u2.OOMKills != 3 {
		t.Errorf("v2 Usage: %+v, %v; want OOMKills 3", u2, err)
	}
	u1, err := (&v1{memory: dir, cpuacct: dir, pids: dir}).Usage()
	if err != nil || u1.OOMKills != 2 {
		t.Errorf("v1 Usage: %+v, %v; want OOMKills 2", u1, err)
	}
}
