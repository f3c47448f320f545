//go:build linux

// Package containerd is the comparison's adapter for
// github.com/containerd/cgroups/v3: cgroup1 on v1 and hybrid hosts, cgroup2
// on the unified hierarchy.
package containerd

import (
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/fumehood/sandbox/bench/cgroupdrivers/driver"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Driver is containerd/cgroups/v3.
type Driver struct{}

// Name names the driver.
func (Driver) Name() string { return "containerd/cgroups/v3" }

// hierarchy is cgroup1.Default's subsystems narrowed to the four a run
// uses, found once: Default reads /proc/self/mountinfo and stats every
// hierarchy, and without narrowing New makes a directory in all of them
// (devices, freezer, cpuset, blkio, ...).
var hierarchy = sync.OnceValues(func() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, err
	}
	var s []cgroup1.Subsystem
	for _, sub := range all {
		if slices.Contains(driver.V1Controllers, string(sub.Name())) {
			s = append(s, sub)
		}
	}
	return s, nil
})

// New makes the cgroup beneath this process's own.
func (Driver) New(name string, l driver.Limits) (driver.Group, error) {
	if driver.V2() {
		return newV2(name, l)
	}
	return newV1(name, l)
}

func newV1(name string, l driver.Limits) (driver.Group, error) {
	swap, quota, period := l.Memory, l.CPUQuota, l.CPUPeriod
	r := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &l.Memory, Swap: &swap}, // memsw = memory: no swap
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
		Pids:   &specs.LinuxPids{Limit: &l.Pids},
	}
	dirs := map[cgroup1.Name]string{}
	for _, c := range driver.V1Controllers {
		p, err := driver.Parent(c)
		if err != nil {
			return nil, err
		}
		dirs[cgroup1.Name(c)] = filepath.Join(p, name)
	}
	path := func(n cgroup1.Name) (string, error) { return dirs[n], nil }
	cg, err := cgroup1.New(path, r, cgroup1.WithHierarchy(hierarchy))
	if err != nil {
		return nil, err
	}
	pids, _ := driver.Dir("pids", name)
	return &v1Group{cg: cg, pidsDir: pids}, nil
}

type v1Group struct {
	cg      cgroup1.Cgroup
	pidsDir string
}

func (g *v1Group) CloneFD() (int, error) { return -1, nil }
func (g *v1Group) Release()              {}
func (g *v1Group) Add(pid int) error     { return g.cg.AddProc(uint64(pid)) }
func (g *v1Group) Delete() error         { return g.cg.Delete() }

// Usage is Stat over the four subsystems (each in a goroutine of its own:
// that is how cgroup1 reads them), and pids.events, which it does not read.
func (g *v1Group) Usage() (driver.Usage, error) {
	m, err := g.cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return driver.Usage{}, err
	}
	u := driver.Usage{CPU: time.Duration(m.GetCPU().GetUsage().GetTotal()), PidsMax: driver.PidsMax(g.pidsDir)}
	u.MemoryPeak = int64(m.GetMemory().GetUsage().GetMax())
	u.OOMKills = m.GetMemoryOomControl().GetOomKill()
	return u, nil
}

func newV2(name string, l driver.Limits) (driver.Group, error) {
	parent, err := driver.Parent("")
	if err != nil {
		return nil, err
	}
	zero, period := int64(0), l.CPUPeriod
	r := &cgroup2.Resources{
		Memory: &cgroup2.Memory{Max: &l.Memory, Swap: &zero},
		CPU:    &cgroup2.CPU{Max: cgroup2.NewCPUMax(&l.CPUQuota, &period)},
		Pids:   &cgroup2.Pids{Max: l.Pids},
	}
	group := filepath.Join(parent, name)
	m, err := cgroup2.NewManager(driver.Root, group, r)
	if err != nil {
		return nil, err
	}
	return &v2Group{m: m, dir: filepath.Join(driver.Root, group), fd: -1}, nil
}

type v2Group struct {
	m   *cgroup2.Manager
	dir string
	fd  int
}

// CloneFD opens the directory: the API gives neither a descriptor nor the
// path (the caller knows the path it asked for).
func (g *v2Group) CloneFD() (int, error) {
	fd, err := driver.OpenDir(g.dir)
	g.fd = fd
	return fd, err
}

func (g *v2Group) Release() {
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
}

func (g *v2Group) Add(pid int) error { return g.m.AddProc(uint64(pid)) }
func (g *v2Group) Delete() error     { return g.m.Delete() }

// Usage is StatFiltered over pids, CPU, memory and memory events, and
// pids.events, which it does not read.
func (g *v2Group) Usage() (driver.Usage, error) {
	m, err := g.m.StatFiltered(cgroup2.StatPids | cgroup2.StatCPU | cgroup2.StatMemory | cgroup2.StatMemoryEvents)
	if err != nil {
		return driver.Usage{}, err
	}
	return driver.Usage{
		CPU:        time.Duration(m.GetCPU().GetUsageUsec()) * time.Microsecond,
		MemoryPeak: int64(m.GetMemory().GetMaxUsage()),
		OOMKills:   m.GetMemoryEvents().GetOomKill(),
		PidsMax:    driver.PidsMax(g.dir),
	}, nil
}
