//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// v1Controllers are the v1 hierarchies a run's cgroup may be made in;
// v1AllControllers adds blkio, for io limits.
var (
	v1Controllers    = []string{"memory", "cpu", "cpuacct", "pids"}
	v1AllControllers = append(v1Controllers[:len(v1Controllers):len(v1Controllers)], "blkio")
)

// v1ControllersFor are the hierarchies a run with limits l needs: cpu
// only for a quota, which is all a run's cpu cgroup would hold (cpuacct
// counts its CPU time), and blkio only for io limits. Each directory
// costs a mkdir, a write of the init's pid and an rmdir in every run.
func v1ControllersFor(l Limits) []string {
	var cs []string
	for _, c := range v1AllControllers {
		switch {
		case c == "cpu" && l.CPUQuota <= 0:
		case c == "blkio" && !l.hasIO():
		default:
			cs = append(cs, c)
		}
	}
	return cs
}

// v1Hint says how to get a cgroup where this process may not make one.
const v1Hint = "cgroup v1 has no safe delegation: run as root, or use a cgroup v2 host"

// v1 is a run's cgroup in the v1 hierarchies: a directory named for the
// run in each, beneath the parent's directory there.
type v1 struct {
	memory, cpu, cpuacct, pids, blkio string   // each controller's directory (blkio only with io limits)
	dirs                              []string // the distinct ones, as made
}

func newV1(parent, name string, l Limits) (Group, error) {
	own, err := ownPaths()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	mounts, err := v1Mounts()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	g := &v1{}
	for _, c := range v1ControllersFor(l) {
		m := mounts[c]
		if m == nil {
			g.Delete()
			return nil, fmt.Errorf("%w: no v1 %s hierarchy mounted beneath %s", ErrNoCgroup, c, Root)
		}
		base, err := orOwn(parent, c, own)
		if err != nil {
			g.Delete()
			return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
		}
		dir := filepath.Join(m.path(base), name)
		switch c {
		case "memory":
			g.memory = dir
		case "cpu":
			g.cpu = dir
		case "cpuacct":
			g.cpuacct = dir
		case "pids":
			g.pids = dir
		case "blkio":
			g.blkio = dir
		}
		if slices.Contains(g.dirs, dir) {
			continue // co-mounted with a controller already made
		}
		if err := makeDir(dir, v1Hint); err != nil {
			g.Delete()
			return nil, err
		}
		g.dirs = append(g.dirs, dir)
	}
	if err := g.set(l); err != nil {
		g.Delete()
		return nil, err
	}
	return g, nil
}

// set writes the limits l into the run's new cgroup.
func (g *v1) set(l Limits) error {
	if l.Memory > 0 {
		v := strconv.FormatInt(l.Memory, 10)
		if err := write(g.memory, "memory.limit_in_bytes", v); err != nil {
			return err
		}
		// memsw = memory: no swap. Without swap accounting there is no
		// memsw file, and no swap to limit through it.
		if err := write(g.memory, "memory.memsw.limit_in_bytes", v); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	if l.CPUQuota > 0 {
		// The period first: the kernel checks a quota against the period
		// in force.
		if l.CPUPeriod > 0 {
			if err := write(g.cpu, "cpu.cfs_period_us", strconv.FormatUint(l.CPUPeriod, 10)); err != nil {
				return err
			}
		}
		if err := write(g.cpu, "cpu.cfs_quota_us", strconv.FormatInt(l.CPUQuota, 10)); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		if err := write(g.pids, "pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if l.hasIO() {
		// One device per write: that is what a throttle file parses.
		for _, d := range l.IODevices {
			for _, t := range []struct {
				file string
				rate int64
			}{{"blkio.throttle.read_bps_device", l.IOReadBPS}, {"blkio.throttle.write_bps_device", l.IOWriteBPS}} {
				if t.rate <= 0 {
					continue
				}
				if err := write(g.blkio, t.file, d.String()+" "+strconv.FormatInt(t.rate, 10)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (g *v1) Path() string       { return g.memory }
func (g *v1) CloneFD() int       { return -1 }
func (g *v1) Kill() error        { return nil }
func (g *v1) OOMKillsOne() error { return nil }

func (g *v1) JoinFiles() []string {
	files := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		files[i] = filepath.Join(d, "tasks")
	}
	return files
}

func (g *v1) Add(pid int) error {
	for _, d := range g.dirs {
		if err := write(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (g *v1) Usage() (Usage, error) {
	return Usage{
		CPU:        time.Duration(readInt(filepath.Join(g.cpuacct, "cpuacct.usage"))),
		MemoryPeak: readInt(filepath.Join(g.memory, "memory.max_usage_in_bytes")),
		OOMKills:   readKeyed(filepath.Join(g.memory, "memory.oom_control"), "oom_kill"),
		PidsMax:    readKeyed(filepath.Join(g.pids, "pids.events"), "max"),
	}, nil
}

func (g *v1) Delete() error { return removeDirs(g.dirs...) }
