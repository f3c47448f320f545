//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/cgroup"
)

// snapshot is what a run could leak on the host side. It holds only what
// the test's own processes have and could have made, never a host-wide
// count: other programs mount, make files and run sandboxes meanwhile.
type snapshot struct {
	fds, spawnerFds, goroutines, spawnerChildren, cgroups int
	mounts, spawnerMounts                                 string // the test's mounts in this process's and the spawner's tables (testMounts)
	temp                                                  string // names in the temp directory, the test's own (TMPDIR)
}

func countDir(dir string) int {
	des, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	return len(des)
}

// tempNames lists the names in the temp directory, which must be t's own:
// the host's holds other programs' files.
func tempNames(t *testing.T) string {
	t.Helper()
	if own := filepath.Dir(t.TempDir()); !underDir(os.TempDir(), own) {
		t.Fatalf("the snapshot's temp directory %s is not the test's own: set TMPDIR to t.TempDir() before the first snapshot", os.TempDir())
	}
	des, _ := os.ReadDir(os.TempDir())
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return strings.Join(names, " ")
}

// runCgroups lists the run cgroups ("sandbox-*") on this host.
func runCgroups(t *testing.T) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(cgroup.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "sandbox-") && d.Name() != "sandbox-host" {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// cgroupsMadeBy lists the run cgroups made by any of the processes pids
// (a run cgroup's name carries its maker's pid).
func cgroupsMadeBy(t *testing.T, pids ...int) []string {
	t.Helper()
	var found []string
	for _, c := range runCgroups(t) {
		for _, p := range pids {
			if strings.HasPrefix(filepath.Base(c), fmt.Sprintf("%s%d-", cgroup.NamePrefix, p)) {
				found = append(found, c)
			}
		}
	}
	return found
}

func takeSnapshot(t *testing.T) snapshot {
	t.Helper()
	ourSpawner.mu.Lock()
	pid := ourSpawner.c.pid
	ourSpawner.mu.Unlock()
	children := 0
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		children += len(strings.Fields(string(b)))
	}
	// Goroutines of finished runs exit shortly after Run returns.
	base := runtime.NumGoroutine()
	for i := 0; i < 50 && base > 2; i++ {
		time.Sleep(10 * time.Millisecond)
		base = runtime.NumGoroutine()
	}
	return snapshot{
		fds:             countDir("/proc/self/fd"),
		spawnerFds:      countDir(fmt.Sprintf("/proc/%d/fd", pid)),
		goroutines:      base,
		mounts:          testMounts(t, "/proc/self/mountinfo"),
		spawnerMounts:   testMounts(t, fmt.Sprintf("/proc/%d/mountinfo", pid)),
		temp:            tempNames(t),
		cgroups:         len(cgroupsMadeBy(t, os.Getpid(), pid)),
		spawnerChildren: children,
	}
}

// TestAllowRunsLeakNothing: the proxy of an *Egress run (its channel,
// listener, connections, goroutines) goes with the run.
func TestAllowRunsLeakNothing(t *testing.T) {
	requireSandbox(t)
	w := newEgressWorld(t)
	opts := w.opts(false)
	opts.Binds = []Bind{helperBind(t)}
	s := newTest(t, opts)
	ctx := context.Background()
	url := "http://api.example.com:" + port(w.http) + "/leak"
	fetch := func(i int) {
		res, err := s.Run(ctx, helperCmd("fetch", url, "http://evil.example.net/"))
		if err != nil || !res.Success() || len(res.Connections) != 2 {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
	fetch(-1) // start the spawner and the servers' connections
	t.Setenv("TMPDIR", t.TempDir())
	before := takeSnapshot(t)
	for i := range 100 {
		fetch(i)
	}
	after := takeSnapshot(t)
	if after != before {
		t.Errorf("after 100 allow runs: %+v\nbefore:              %+v", after, before)
	}
}
