//go:build linux

// Package opencontainers is the comparison's adapter for
// github.com/opencontainers/cgroups: its fs (v1) and fs2 (v2) managers,
// which write the cgroup file system directly. Its manager package, which
// picks between them and systemd, is not used: the library never asks
// systemd for a cgroup.
package opencontainers

import (
	"time"

	"github.com/fumehood/sandbox/bench/cgroupdrivers/driver"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"
)

// Driver is opencontainers/cgroups.
type Driver struct{}

// Name names the driver.
func (Driver) Name() string { return "opencontainers/cgroups" }

// manager is what fs.Manager and fs2.Manager share that a run needs.
type manager interface {
	Apply(pid int) error
	Set(r *cgroups.Resources) error
	AddPid(sub string, pid int) error
	Stats(opts *cgroups.StatsOptions) (*cgroups.Stats, error)
	OOMKillCount() (uint64, error)
	Path(subsys string) string
	Destroy() error
}

// New makes the cgroup beneath this process's own: Apply(-1) creates it
// (runc's way when the process is placed by CLONE_INTO_CGROUP or later),
// Set writes the limits.
func (Driver) New(name string, l driver.Limits) (driver.Group, error) {
	pids := l.Pids
	r := &cgroups.Resources{
		Memory:      l.Memory,
		MemorySwap:  l.Memory, // memory+swap = memory: no swap (fs2 converts it to memory.swap.max 0)
		CpuQuota:    l.CPUQuota,
		CpuPeriod:   l.CPUPeriod,
		PidsLimit:   &pids,
		SkipDevices: true,
	}
	c := &cgroups.Cgroup{Resources: r}
	var (
		m   manager
		err error
		v2  = driver.V2()
	)
	if v2 {
		dir, err := driver.Dir("", name)
		if err != nil {
			return nil, err
		}
		m, err = fs2.NewManager(c, dir)
		if err != nil {
			return nil, err
		}
	} else {
		paths := map[string]string{}
		for _, ctl := range driver.V1Controllers {
			if paths[ctl], err = driver.Dir(ctl, name); err != nil {
				return nil, err
			}
		}
		m, err = fs.NewManager(c, paths)
		if err != nil {
			return nil, err
		}
	}
	if err := m.Apply(-1); err != nil {
		m.Destroy()
		return nil, err
	}
	if err := m.Set(r); err != nil {
		m.Destroy()
		return nil, err
	}
	return &group{m: m, v2: v2, fd: -1}, nil
}

type group struct {
	m  manager
	v2 bool
	fd int
}

// CloneFD opens the v2 directory: the API gives its path, not a descriptor.
func (g *group) CloneFD() (int, error) {
	if !g.v2 {
		return -1, nil
	}
	fd, err := driver.OpenDir(g.m.Path(""))
	g.fd = fd
	return fd, err
}

func (g *group) Release() {
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
}

func (g *group) Add(pid int) error { return g.m.AddPid("", pid) }
func (g *group) Delete() error     { return g.m.Destroy() }

// Usage reads the CPU, memory and pids stats (not io, hugetlb, rdma, misc),
// the OOM kill count, and pids.events, which the library does not read.
func (g *group) Usage() (driver.Usage, error) {
	s, err := g.m.Stats(&cgroups.StatsOptions{Controllers: cgroups.CPU | cgroups.Memory | cgroups.Pids})
	if err != nil {
		return driver.Usage{}, err
	}
	ooms, err := g.m.OOMKillCount()
	if err != nil {
		return driver.Usage{}, err
	}
	pidsDir := g.m.Path("pids")
	return driver.Usage{
		CPU:        time.Duration(s.CpuStats.CpuUsage.TotalUsage),
		MemoryPeak: int64(s.MemoryStats.Usage.MaxUsage),
		OOMKills:   ooms,
		PidsMax:    driver.PidsMax(pidsDir),
	}, nil
}
