//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newGroup makes a cgroup for the test, or skips where none is writable.
func newGroup(t *testing.T, l Limits) (Group, string) {
	t.Helper()
	name := fmt.Sprintf("sbxtest-%d", time.Now().UnixNano())
	g, err := New("", name, l)
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no writable cgroup here (%v): %v", Detect(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return g, name
}

// dirsOf are the directories of g: one per hierarchy.
func dirsOf(g Group) []string {
	if g, ok := g.(*v1); ok {
		return g.dirs
	}
	return []string{g.Path()}
}

// startIn starts cmd in g: cloned into it on v2, added once started on v1.
func startIn(t *testing.T, g Group, cmd *exec.Cmd) {
	t.Helper()
	if fd := g.CloneFD(); fd >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if g.CloneFD() < 0 {
		if err := g.Add(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("add: %v", err)
		}
	}
}

// waitEmpty waits until no process is left in any of g's directories.
func waitEmpty(t *testing.T, g Group) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := ""
		for _, d := range dirsOf(g) {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			left += strings.TrimSpace(string(b))
		}
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in the cgroup: %s", left)
		}
	}
}

func TestGroupLifecycle(t *testing.T) {
	l := Limits{Memory: 64 << 20, CPUQuota: 50000, CPUPeriod: 100000, Pids: 16}
	g, name := newGroup(t, l)
	defer g.Delete()

	// The limits are in the kernel's files, as the kernel reads them back.
	want := map[string]string{}
	switch g := g.(type) {
	case *v1:
		want[filepath.Join(g.memory, "memory.limit_in_bytes")] = "67108864"
		want[filepath.Join(g.cpu, "cpu.cfs_period_us")] = "100000"
		want[filepath.Join(g.cpu, "cpu.cfs_quota_us")] = "50000"
		want[filepath.Join(g.pids, "pids.max")] = "16"
		if memsw := filepath.Join(g.memory, "memory.memsw.limit_in_bytes"); exists(memsw) {
			want[memsw] = "67108864"
		}
	case *v2:
		want[filepath.Join(g.path, "memory.max")] = "67108864"
		want[filepath.Join(g.path, "cpu.max")] = "50000 100000"
		want[filepath.Join(g.path, "pids.max")] = "16"
		want[filepath.Join(g.path, "memory.oom.group")] = "1"
		if swap := filepath.Join(g.path, "memory.swap.max"); exists(swap) {
			want[swap] = "0"
		}
	}
	for file, v := range want {
		b, err := os.ReadFile(file)
		if got := strings.TrimSpace(string(b)); err != nil || got != v {
			t.Errorf("%s = %q (%v), want %q", file, got, err, v)
		}
	}

	// Work, then more processes than pids allows: the shell's forks beyond
	// 16 fail, and dash gives up at the first.
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.1; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; for j in $(seq 20); do sleep 0.3 & done; wait")
	startIn(t, g, cmd)
	self, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	placed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		limited := Detect() == V2 && parts[1] == ""
		for _, c := range strings.Split(parts[1], ",") {
			limited = limited || (Detect() == V1 && slices.Contains(v1Controllers, c))
		}
		if !limited {
			continue
		}
		placed++
		if !strings.HasSuffix(parts[2], "/"+name) {
			t.Errorf("the process is in %q, not in the run's cgroup %s", line, name)
		}
	}
	if placed == 0 {
		t.Errorf("no line of /proc/%d/cgroup is a limited hierarchy:\n%s", cmd.Process.Pid, self)
	}
	cmd.Wait()
	waitEmpty(t, g)

	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v usage: %+v", Detect(), u)
	if u.CPU <= 0 {
		t.Errorf("usage: no CPU time after a busy loop: %+v", u)
	}
	if u.PidsMax == 0 {
		t.Errorf("usage: no fork failed at the pids limit of 16 after 20 background sleeps: %+v", u)
	}
	if peak := filepath.Join(g.Path(), "memory.peak"); u.MemoryPeak <= 0 && (Detect() == V1 || exists(peak)) {
		t.Errorf("usage: no memory peak: %+v", u)
	}

	if err := g.Delete(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, d := range dirsOf(g) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup dir %s left: %v", d, err)
		}
	}
}

// A New that fails after its mkdirs names the file it failed on and
// leaves no directory behind.
func TestGroupFailureLeavesNothing(t *testing.T) {
	// 1:3 is /dev/null, a character device: no io limit takes it.
	l := Limits{Pids: 16, IOWriteBPS: 1 << 20, IODevices: []Device{{Major: 1, Minor: 3}}}
	name := fmt.Sprintf("sbxtest-%d", time.Now().UnixNano())
	g, err := New("", name, l)
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no writable cgroup with io here (%v): %v", Detect(), err)
	}
	if err == nil {
		g.Delete()
		t.Fatal("an io limit on a character device was taken")
	}
	t.Logf("New: %v", err)
	if !strings.Contains(err.Error(), "io.max") && !strings.Contains(err.Error(), "blkio.throttle.write_bps_device") {
		t.Errorf("the error names no io file: %v", err)
	}
	dirs := parentDirs("", true)
	if len(dirs) == 0 {
		t.Fatal("no parent directories")
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup dir %s left after a failed New: %v", filepath.Join(d, name), err)
		}
	}
}

func TestGroupKill(t *testing.T) {
	if Detect() != V2 {
		t.Skipf("cgroup.kill is cgroup v2's; this host is %v", Detect())
	}
	g, _ := newGroup(t, Limits{Pids: 16})
	defer g.Delete()
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30 & wait")
	startIn(t, g, cmd)
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("after Kill the shell ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("Kill left the shell running")
	}
	// Its sleeps too: the cgroup empties.
	waitEmpty(t, g)
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
}

func TestParseV1Mounts(t *testing.T) {
	mountinfo := `22 1 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw
31 22 0:28 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory
39 31 0:36 /docker/abc /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 1 0:32 / /mnt/memory rw,relatime - cgroup cgroup rw,memory
51 31 0:32 / /sys/fs/cgroup/memory2 rw,relatime - cgroup cgroup rw,memory
`
	m := parseV1Mounts(mountinfo)
	if m["cpu"] == nil || m["cpu"] != m["cpuacct"] || m["cpu"].dir != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Errorf("co-mounted cpu,cpuacct: cpu %+v, cpuacct %+v, want one mount at /sys/fs/cgroup/cpu,cpuacct", m["cpu"], m["cpuacct"])
	}
	if m["memory"] == nil || m["memory"].dir != "/sys/fs/cgroup/memory" {
		t.Errorf("memory: %+v, want its first mount beneath %s", m["memory"], Root)
	}
	if got := m["cpu"].path("/a/b"); got != "/sys/fs/cgroup/cpu,cpuacct/a/b" {
		t.Errorf("cpu path of /a/b: %s", got)
	}
	// A mounted subtree: cgroup paths count from the hierarchy's root.
	for cg, want := range map[string]string{"/docker/abc": "/sys/fs/cgroup/pids", "/docker/abc/x": "/sys/fs/cgroup/pids/x", "/docker/abcd": "/sys/fs/cgroup/pids/docker/abcd"} {
		if got := m["pids"].path(cg); got != want {
			t.Errorf("pids path of %s under a mount of /docker/abc: %s, want %s", cg, got, want)
		}
	}
	if len(m) != 4 {
		t.Errorf("mounts: %v, want cpu, cpuacct, memory, pids only", m)
	}
}

// The mounts read from mountinfo are the hierarchies at Root/<controller>.
func TestV1MountsMatchHost(t *testing.T) {
	if Detect() != V1 {
		t.Skipf("no cgroup v1 here (%v)", Detect())
	}
	mounts, err := v1Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v1AllControllers {
		real, err := filepath.EvalSymlinks(filepath.Join(Root, c))
		if err != nil {
			if mounts[c] != nil {
				t.Errorf("%s: mounted at %s per mountinfo, but %v", c, mounts[c].dir, err)
			}
			continue
		}
		if mounts[c] == nil || mounts[c].dir != real {
			t.Errorf("%s: mountinfo says %+v, %s is %s", c, mounts[c], filepath.Join(Root, c), real)
		}
	}
}

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// A v1 run without a CPU quota gets no directory in the cpu hierarchy
// (unless it is co-mounted with cpuacct, which counts the run's CPU time),
// and none in blkio without io limits; its CPU time is still counted.
func TestV1MakesOnlyTheHierarchiesItNeeds(t *testing.T) {
	if Detect() != V1 {
		t.Skipf("no cgroup v1 here (%v)", Detect())
	}
	g, name := newGroup(t, Limits{Memory: 64 << 20, Pids: 16})
	defer g.Delete()
	v := g.(*v1)
	mounts, err := v1Mounts()
	if err != nil {
		t.Fatal(err)
	}
	if v.cpu != "" || v.blkio != "" {
		t.Errorf("cpu %q, blkio %q: want neither without a quota or io limits", v.cpu, v.blkio)
	}
	for _, c := range []string{"cpu", "blkio"} {
		if mounts[c] == nil || mounts[c] == mounts["cpuacct"] || mounts[c] == mounts["memory"] || mounts[c] == mounts["pids"] {
			continue // not mounted, or co-mounted with one the run needs
		}
		found := false
		filepath.WalkDir(mounts[c].dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == name {
				found = true
			}
			return nil
		})
		if found {
			t.Errorf("a directory %s was made in the %s hierarchy", name, c)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	startIn(t, g, cmd)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if u, err := g.Usage(); err != nil || u.CPU <= 0 {
		t.Errorf("usage %+v (%v): no CPU time counted", u, err)
	}
}
