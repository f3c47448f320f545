//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

// v2 is a run's cgroup in the unified hierarchy.
type v2 struct {
	m    *cgroup2.Manager
	path string
	fd   int
}

// hostLeaf is where newV2 moves the processes of a parent cgroup that must
// give up holding processes so that it can enable controllers for its
// children (cgroup v2's no-internal-processes rule).
const hostLeaf = "sandbox-host"

func newV2(parent, name string, l Limits) (Group, error) {
	if parent == "" {
		paths, err := ownPaths()
		own, ok := paths[""]
		if err != nil || !ok {
			return nil, fmt.Errorf("%w: no v2 line in /proc/self/cgroup: %v", ErrNoCgroup, err)
		}
		// A process moved to the host leaf still makes its runs' cgroups
		// beside it, beneath the cgroup it came from.
		parent = strings.TrimSuffix(own, "/"+hostLeaf)
		if parent == "" {
			parent = "/"
		}
	}
	dir := filepath.Join(Root, parent)
	if unix.Access(dir, unix.W_OK) != nil {
		return nil, fmt.Errorf("%w: %s is not writable by uid %d (delegate it: systemd Delegate=yes, or name a writable parent)",
			ErrNoCgroup, dir, os.Getuid())
	}
	res := resourcesV2(l)
	if err := enableControllers(dir, res.EnabledControllers()); err != nil {
		return nil, err
	}
	group := filepath.Join(parent, name)
	m, err := cgroup2.NewManager(Root, group, res)
	if err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", group, err)
	}
	path := filepath.Join(Root, group)
	// One OOM kill ends the whole run, not just its largest process.
	if err := os.WriteFile(filepath.Join(path, "memory.oom.group"), []byte("1"), 0); err != nil && l.Memory > 0 {
		m.Delete()
		return nil, fmt.Errorf("cgroup %s: memory.oom.group: %w", path, err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Delete()
		return nil, fmt.Errorf("open cgroup %s: %w", path, err)
	}
	return &v2{m: m, path: path, fd: fd}, nil
}

// enableControllers makes dir offer controllers to its children. A cgroup
// that holds processes cannot: its processes (the caller's, when dir is the
// caller's own cgroup) move to a leaf beneath it first.
func enableControllers(dir string, controllers []string) error {
	want := ""
	for _, c := range controllers {
		want += " +" + c
	}
	want = strings.TrimSpace(want)
	if want == "" || hasControllers(dir, controllers) {
		return nil
	}
	// Move the processes out first, whatever is enabled: a cgroup with
	// processes may still enable the threaded controllers (cpu, pids), but
	// that makes it a thread root, where memory can never be enabled.
	err := moveProcsToLeaf(dir)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(want), 0)
	}
	if err != nil {
		return fmt.Errorf("%w: enable %s in %s: %w", ErrNoCgroup, want, dir, err)
	}
	return nil
}

func hasControllers(dir string, controllers []string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return false
	}
	have := strings.Fields(string(b))
	for _, c := range controllers {
		found := false
		for _, h := range have {
			found = found || h == c
		}
		if !found {
			return false
		}
	}
	return true
}

// moveProcsToLeaf moves the processes of dir, if it has any and is not the
// root (which may hold processes), into its host leaf.
func moveProcsToLeaf(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 || filepath.Clean(dir) == Root {
		return err
	}
	leaf := filepath.Join(dir, hostLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	// Processes may come and go while we move them; a few rounds settle it.
	for range 5 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return err
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			// A process that exited meanwhile is no longer there (ESRCH).
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("move pid %s to %s: %w", pid, leaf, err)
			}
		}
	}
	return nil
}

func resourcesV2(l Limits) *cgroup2.Resources {
	res := &cgroup2.Resources{}
	if l.Memory > 0 {
		zero := int64(0)
		res.Memory = &cgroup2.Memory{Max: &l.Memory, Swap: &zero}
	}
	if l.CPUQuota > 0 {
		period := l.CPUPeriod
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&l.CPUQuota, &period)}
	}
	if l.Pids > 0 {
		res.Pids = &cgroup2.Pids{Max: l.Pids}
	}
	if l.hasIO() {
		res.IO = &cgroup2.IO{}
		for _, d := range l.IODevices {
			for _, e := range []struct {
				t    cgroup2.IOType
				rate int64
			}{{cgroup2.ReadBPS, l.IOReadBPS}, {cgroup2.WriteBPS, l.IOWriteBPS}} {
				if e.rate > 0 {
					res.IO.Max = append(res.IO.Max, cgroup2.Entry{Type: e.t, Major: d.Major, Minor: d.Minor, Rate: uint64(e.rate)})
				}
			}
		}
	}
	return res
}

func (g *v2) Path() string      { return g.path }
func (g *v2) CloneFD() int      { return g.fd }
func (g *v2) Add(pid int) error { return g.m.AddProc(uint64(pid)) }
func (g *v2) Kill() error       { return g.m.Kill() }

func (g *v2) Usage() (Usage, error) {
	u := Usage{
		CPU:        time.Duration(readKeyed(filepath.Join(g.path, "cpu.stat"), "usage_usec")) * time.Microsecond,
		MemoryPeak: readInt(filepath.Join(g.path, "memory.peak")),
		OOMKills:   readKeyed(filepath.Join(g.path, "memory.events"), "oom_kill"),
		PidsMax:    readKeyed(filepath.Join(g.path, "pids.events"), "max"),
	}
	return u, nil
}

func (g *v2) Delete() error {
	unix.Close(g.fd)
	return removeDirs(g.path)
}
