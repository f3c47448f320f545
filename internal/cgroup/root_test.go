//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// v2Mount returns where this host mounts the v2 hierarchy, and the
// cgroup of this process in it, or skips.
func v2Mount(t *testing.T) (mount, own string) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mi)) {
		f, g, ok := strings.Cut(line, " - ")
		if ok && strings.HasPrefix(g, "cgroup2 ") && strings.Fields(f)[3] == "/" {
			mount = strings.Fields(f)[4]
			break
		}
	}
	cg, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.Lines(string(cg)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			own = p
		}
	}
	if mount == "" || own == "" {
		t.Skip("no cgroup v2 hierarchy mounted here")
	}
	return mount, filepath.Join(mount, own)
}

// TestHierarchyRoot: the true root of the v2 hierarchy is the one cgroup
// that may keep its processes; a cgroup beneath it, and the root of a
// cgroup namespace (a container's /sys/fs/cgroup), are told apart from it
// and have their processes moved to a leaf first. The namespace case is
// shown on the kernel: a cgroup2 mounted inside a new cgroup namespace
// has the cgroup.type file hierarchyRoot looks for.
func TestHierarchyRoot(t *testing.T) {
	mount, own := v2Mount(t)
	if own == mount && !hierarchyRoot(mount) {
		t.Errorf("%s, this process's cgroup and the hierarchy's root, is not taken for the root", mount)
	}
	child := filepath.Join(own, fmt.Sprintf("sbxtest-root-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Skipf("cannot make a cgroup beneath %s: %v", own, err)
	}
	defer os.Remove(child)
	if hierarchyRoot(child) {
		t.Errorf("%s is taken for the hierarchy's root", child)
	}
	if os.Getuid() != 0 {
		t.Skip("mounting cgroup2 in a new cgroup namespace needs root")
	}
	// A shell cloned into child and into a new cgroup namespace there
	// mounts the hierarchy as a container runtime would: child is then
	// its "/sys/fs/cgroup".
	fd, err := unix.Open(child, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	at := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `mount --make-rprivate / && mount -t cgroup2 none "$1" && cat /proc/self/cgroup && ls "$1"`, "sh", at)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP, UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mount cgroup2 in a new cgroup namespace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "0::/\n") {
		t.Fatalf("the shell is not at the root of its cgroup namespace:\n%s", out)
	}
	if !strings.Contains(string(out), "\ncgroup.type\n") {
		t.Errorf("the root of a cgroup namespace has no cgroup.type, so it would be taken for the hierarchy's root:\n%s", out)
	}
}

func TestRetryEINTR(t *testing.T) {
	calls := 0
	err := retryEINTR(func() error {
		if calls++; calls < 3 {
			return unix.EINTR
		}
		return unix.EBUSY
	})
	if err != unix.EBUSY || calls != 3 {
		t.Errorf("retryEINTR = %v after %d calls, want EBUSY after 3", err, calls)
	}
}
