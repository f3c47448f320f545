//go:build linux

// Package driver is what the cgroup-driver comparison asks of each driver:
// one run's cgroup, made beneath this process's own cgroup with memory (swap
// off), CPU quota and pids limits, a process placed in it, its usage read
// and the cgroup removed. Each driver is an adapter in a package of its own,
// so that a program importing one links only that driver.
package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Root is where the cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// Limits are one run's limits, as the library sets them.
type Limits struct {
	Memory    int64  // bytes; swap off
	CPUQuota  int64  // microseconds per CPUPeriod
	CPUPeriod uint64 // microseconds
	Pids      int64
}

// Bench are the limits every driver sets in the comparison: the library's
// defaults' shape (512 MiB, one CPU, 256 processes).
var Bench = Limits{Memory: 512 << 20, CPUQuota: 100000, CPUPeriod: 100000, Pids: 256}

// Usage is what a run used.
type Usage struct {
	CPU        time.Duration
	MemoryPeak int64
	OOMKills   uint64
	PidsMax    uint64 // forks refused at the pids limit
}

// Group is one run's cgroup.
type Group interface {
	// CloneFD returns a directory fd for CLONE_INTO_CGROUP (the caller
	// closes it with Release), or -1 where the process must be placed with
	// Add after it starts (v1).
	CloneFD() (int, error)
	// Release closes what CloneFD opened, once the process is placed.
	Release()
	// Add writes pid into the cgroup (every v1 hierarchy).
	Add(pid int) error
	// Usage reads what the run used.
	Usage() (Usage, error)
	// Delete removes the cgroup, which must be empty.
	Delete() error
}

// Driver makes run cgroups.
type Driver interface {
	// Name names the driver and its module version.
	Name() string
	// New makes the cgroup name beneath this process's own cgroup (in each
	// v1 hierarchy the run needs: memory, cpu, cpuacct, pids) with l.
	New(name string, l Limits) (Group, error)
}

// V2 reports whether Root is the unified hierarchy (a pure v2 host); a
// hybrid host, whose v2 hierarchy has no controllers, counts as v1.
func V2() bool {
	var st unix.Statfs_t
	return unix.Statfs(Root, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// V1Controllers are the v1 hierarchies a run's cgroup is made in.
var V1Controllers = []string{"memory", "cpu", "cpuacct", "pids"}

// HostLeaf is the leaf this process moves into on v2, so that its own
// cgroup may enable controllers for its children (v2's no internal
// processes rule). The library's driver uses the same name, so it finds
// the work done.
const HostLeaf = "sandbox-host"

// parents are this process's cgroups as they were before PrepareV2 moved
// it: each v1 controller's path by name, the v2 path under "".
var parents = sync.OnceValues(func() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			m[""] = strings.TrimSuffix(f[2], "/"+HostLeaf)
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			m[c] = f[2]
		}
	}
	return m, nil
})

// Parent returns this process's cgroup path in controller's hierarchy
// ("" for v2), relative to the hierarchy's root as /proc/self/cgroup gives
// it.
func Parent(controller string) (string, error) {
	m, err := parents()
	if err != nil {
		return "", err
	}
	p, ok := m[controller]
	if !ok {
		return "", fmt.Errorf("no %q hierarchy in /proc/self/cgroup", controller)
	}
	return p, nil
}

// Dir is the directory of the run cgroup name in controller's hierarchy
// ("" for v2), beneath this process's own cgroup.
func Dir(controller, name string) (string, error) {
	p, err := Parent(controller)
	if err != nil {
		return "", err
	}
	if controller == "" {
		return filepath.Join(Root, p, name), nil
	}
	return filepath.Join(Root, controller, p, name), nil
}

// PrepareV2 readies this process's own v2 cgroup to hold run cgroups, once
// and outside any measurement, the same way for every driver: this
// process's cgroup's processes move into HostLeaf beneath it, and it
// enables memory, cpu and pids for its children. Nothing on v1.
func PrepareV2() error {
	if !V2() {
		return nil
	}
	parent, err := Dir("", "")
	if err != nil {
		return err
	}
	leaf := filepath.Join(parent, HostLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	for range 5 {
		b, err := os.ReadFile(filepath.Join(parent, "cgroup.procs"))
		if err != nil {
			return err
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("move %s to %s: %w", pid, leaf, err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0); err != nil {
		return fmt.Errorf("enable memory, cpu, pids in %s: %w", parent, err)
	}
	return nil
}

// OpenDir opens a v2 cgroup directory for CLONE_INTO_CGROUP, for drivers
// whose API gives a path but no descriptor.
func OpenDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", dir, err)
	}
	return fd, nil
}

// PidsMax reads the "max" count of dir's pids.events, for drivers that do
// not read that file.
func PidsMax(dir string) uint64 {
	b, _ := os.ReadFile(filepath.Join(dir, "pids.events"))
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "max" {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Exercise is what each size program does with its driver: a run's cgroup
// beneath this process's own, with the comparison's limits, its clone
// descriptor, pid placed in it if pid > 0, its usage read, then removed.
func Exercise(d Driver, pid int) (Usage, error) {
	g, err := d.New(fmt.Sprintf("cgdrivers-size-%d", os.Getpid()), Bench)
	if err != nil {
		return Usage{}, err
	}
	if _, err := g.CloneFD(); err != nil {
		g.Delete()
		return Usage{}, err
	}
	g.Release()
	if pid > 0 {
		if err := g.Add(pid); err != nil {
			g.Delete()
			return Usage{}, err
		}
	}
	u, err := g.Usage()
	if err != nil {
		g.Delete()
		return Usage{}, err
	}
	return u, g.Delete()
}
