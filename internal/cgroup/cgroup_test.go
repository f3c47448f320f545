//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestGroupLifecycle(t *testing.T) {
	name := fmt.Sprintf("sbxtest-%d", time.Now().UnixNano())
	g, err := New("", name, Limits{Memory: 64 << 20, CPUQuota: 50000, CPUPeriod: 100000, Pids: 16})
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no writable cgroup here (%v): %v", Detect(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := g.Path()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("cgroup dir: %v", err)
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.1; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	if fd := g.CloneFD(); fd >= 0 {
		t.Logf("v2: clone into cgroup fd %d", fd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("add: %v", err)
	}
	cmd.Wait()
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v usage: %+v", Detect(), u)
	if err := g.Delete(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup dir left: %v", err)
	}
}
