//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1Controllers are the v1 hierarchies a run's cgroup is made in; blkio
// too when the run has io limits.
var (
	v1Controllers    = []cgroup1.Name{cgroup1.Memory, cgroup1.Cpu, cgroup1.Cpuacct, cgroup1.Pids}
	v1AllControllers = append(v1Controllers[:len(v1Controllers):len(v1Controllers)], cgroup1.Blkio)
)

func v1ControllersFor(l Limits) []cgroup1.Name {
	if l.hasIO() {
		return v1AllControllers
	}
	return v1Controllers
}

// v1 is a run's cgroup in the v1 hierarchies (memory, cpu, cpuacct, pids).
type v1 struct {
	cg   cgroup1.Cgroup
	dirs map[cgroup1.Name]string
}

func newV1(parent, name string, l Limits) (Group, error) {
	own, err := ownPaths()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	dirs, bases := map[cgroup1.Name]string{}, map[cgroup1.Name]string{}
	for _, c := range v1ControllersFor(l) {
		base, err := orOwn(parent, string(c), own)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
		}
		dir := filepath.Join(Root, string(c), base)
		if unix.Access(dir, unix.W_OK) != nil {
			return nil, fmt.Errorf("%w: %s is not writable by uid %d (cgroup v1 has no safe delegation: run as root, or use a cgroup v2 host)",
				ErrNoCgroup, dir, os.Getuid())
		}
		dirs[c], bases[c] = filepath.Join(dir, name), base
	}
	path := func(sub cgroup1.Name) (string, error) { return filepath.Join(bases[sub], name), nil }
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		all, err := v1Hierarchy()
		var subs []cgroup1.Subsystem
		for _, s := range all {
			if _, ok := dirs[s.Name()]; ok {
				subs = append(subs, s)
			}
		}
		return subs, err
	}
	cg, err := cgroup1.New(path, resourcesV1(l), cgroup1.WithHierarchy(hierarchy))
	if err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dirs[cgroup1.Memory], err)
	}
	return &v1{cg: cg, dirs: dirs}, nil
}

// v1Subsystems caches the host's v1 hierarchies: reading them parses
// /proc/self/mountinfo, which would otherwise happen on every run.
var v1Subsystems struct {
	sync.Once
	subs []cgroup1.Subsystem
	err  error
}

// v1Hierarchy is the host's v1 hierarchies that runs may use.
func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	v1Subsystems.Do(func() {
		all, err := cgroup1.Default()
		for _, s := range all {
			for _, c := range v1AllControllers {
				if s.Name() == c {
					v1Subsystems.subs = append(v1Subsystems.subs, s)
				}
			}
		}
		v1Subsystems.err = err
	})
	return v1Subsystems.subs, v1Subsystems.err
}

func resourcesV1(l Limits) *specs.LinuxResources {
	res := &specs.LinuxResources{}
	if l.Memory > 0 {
		mem := &specs.LinuxMemory{Limit: &l.Memory}
		// memsw = memory: no swap. Without swap accounting there is no
		// memsw file, and no swap to limit through it.
		if _, err := os.Stat(filepath.Join(Root, "memory", "memory.memsw.limit_in_bytes")); err == nil {
			mem.Swap = &l.Memory
		}
		res.Memory = mem
	}
	if l.CPUQuota > 0 {
		period := l.CPUPeriod
		res.CPU = &specs.LinuxCPU{Quota: &l.CPUQuota, Period: &period}
	}
	if l.Pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: &l.Pids}
	}
	if l.hasIO() {
		res.BlockIO = &specs.LinuxBlockIO{}
		for _, d := range l.IODevices {
			if l.IOReadBPS > 0 {
				res.BlockIO.ThrottleReadBpsDevice = append(res.BlockIO.ThrottleReadBpsDevice,
					specs.LinuxThrottleDevice{Rate: uint64(l.IOReadBPS), LinuxBlockIODevice: specs.LinuxBlockIODevice{Major: d.Major, Minor: d.Minor}})
			}
			if l.IOWriteBPS > 0 {
				res.BlockIO.ThrottleWriteBpsDevice = append(res.BlockIO.ThrottleWriteBpsDevice,
					specs.LinuxThrottleDevice{Rate: uint64(l.IOWriteBPS), LinuxBlockIODevice: specs.LinuxBlockIODevice{Major: d.Major, Minor: d.Minor}})
			}
		}
	}
	return res
}

func (g *v1) Path() string      { return g.dirs[cgroup1.Memory] }
func (g *v1) CloneFD() int      { return -1 }
func (g *v1) Add(pid int) error { return g.cg.AddProc(uint64(pid)) }
func (g *v1) Kill() error       { return nil }

func (g *v1) Usage() (Usage, error) {
	mem, pids := g.dirs[cgroup1.Memory], g.dirs[cgroup1.Pids]
	return Usage{
		CPU:        time.Duration(readInt(filepath.Join(g.dirs[cgroup1.Cpuacct], "cpuacct.usage"))),
		MemoryPeak: readInt(filepath.Join(mem, "memory.max_usage_in_bytes")),
		OOMKills:   readKeyed(filepath.Join(mem, "memory.oom_control"), "oom_kill"),
		PidsMax:    readKeyed(filepath.Join(pids, "pids.events"), "max"),
	}, nil
}

func (g *v1) Delete() error {
	dirs := make([]string, 0, len(g.dirs))
	for _, d := range g.dirs {
		dirs = append(dirs, d)
	}
	return removeDirs(dirs...)
}
