//go:build linux

// Package ours is the comparison's adapter for the library's own driver,
// internal/cgroup.
package ours

import (
	"github.com/fumehood/sandbox/bench/cgroupdrivers/driver"
	"github.com/fumehood/sandbox/internal/cgroup"
)

// Driver is internal/cgroup.
type Driver struct{}

// Name names the driver.
func (Driver) Name() string { return "internal/cgroup" }

// New makes the cgroup beneath this process's own.
func (Driver) New(name string, l driver.Limits) (driver.Group, error) {
	g, err := cgroup.New("", name, cgroup.Limits{Memory: l.Memory, CPUQuota: l.CPUQuota, CPUPeriod: l.CPUPeriod, Pids: l.Pids})
	if err != nil {
		return nil, err
	}
	return group{g}, nil
}

type group struct{ g cgroup.Group }

// CloneFD is the descriptor the driver keeps open for the group's life.
func (g group) CloneFD() (int, error) { return g.g.CloneFD(), nil }
func (g group) Release()              {}
func (g group) Add(pid int) error     { return g.g.Add(pid) }
func (g group) Delete() error         { return g.g.Delete() }

func (g group) Usage() (driver.Usage, error) {
	u, err := g.g.Usage()
	return driver.Usage{CPU: u.CPU, MemoryPeak: u.MemoryPeak, OOMKills: u.OOMKills, PidsMax: u.PidsMax}, err
}
