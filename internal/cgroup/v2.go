//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// v2 is a run's cgroup in the unified hierarchy.
type v2 struct {
	path string
	fd   int // the directory, for CLONE_INTO_CGROUP; -1 once closed
}

// hostLeaf is where newV2 moves the processes of a parent cgroup that must
// give up holding processes so that it can enable controllers for its
// children (cgroup v2's no-internal-processes rule).
const hostLeaf = "sandbox-host"

// v2Hint says how to get a cgroup where this process may not make one.
const v2Hint = "delegate it: systemd Delegate=yes, or name a writable parent"

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
	// Checked before enableControllers, which would otherwise move this
	// process's cgroup's processes for nothing.
	if unix.Access(dir, unix.W_OK) != nil {
		return nil, fmt.Errorf("%w: %s is not writable by uid %d (%s)", ErrNoCgroup, dir, os.Getuid(), v2Hint)
	}
	if err := enableControllers(dir, v2Controllers(l)); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	if err := makeDir(path, v2Hint); err != nil {
		return nil, err
	}
	g := &v2{path: path, fd: -1}
	if err := g.set(l); err != nil {
		g.Delete()
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		g.Delete()
		return nil, fmt.Errorf("open cgroup %s: %w", path, err)
	}
	g.fd = fd
	return g, nil
}

// v2Controllers are the controllers the limits l need.
func v2Controllers(l Limits) []string {
	var c []string
	if l.CPUQuota > 0 {
		c = append(c, "cpu")
	}
	if l.Memory > 0 {
		c = append(c, "memory")
	}
	if l.Pids > 0 {
		c = append(c, "pids")
	}
	if l.hasIO() {
		c = append(c, "io")
	}
	return c
}

// set writes the limits l into the run's new cgroup.
func (g *v2) set(l Limits) error {
	if l.CPUQuota > 0 {
		v := strconv.FormatInt(l.CPUQuota, 10)
		if l.CPUPeriod > 0 {
			v += " " + strconv.FormatUint(l.CPUPeriod, 10)
		}
		if err := write(g.path, "cpu.max", v); err != nil {
			return err
		}
	}
	if l.Memory > 0 {
		// No swap. A kernel without swap support has no swap file, and no
		// swap to limit through it.
		if err := write(g.path, "memory.swap.max", "0"); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		if err := write(g.path, "memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		if err := write(g.path, "pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if l.hasIO() {
		for _, d := range l.IODevices {
			v := d.String()
			if l.IOReadBPS > 0 {
				v += " rbps=" + strconv.FormatInt(l.IOReadBPS, 10)
			}
			if l.IOWriteBPS > 0 {
				v += " wbps=" + strconv.FormatInt(l.IOWriteBPS, 10)
			}
			if err := write(g.path, "io.max", v); err != nil {
				return err
			}
		}
	}
	// One OOM kill ends the whole run, not just its largest process.
	// Without a memory limit the memory controller may be off here, and
	// then there is no such file.
	if err := write(g.path, "memory.oom.group", "1"); err != nil && l.Memory > 0 {
		return err
	}
	return nil
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
		err = write(dir, "cgroup.subtree_control", want)
	}
	if err != nil {
		return fmt.Errorf("%w: enable %s in %s: %w", ErrNoCgroup, want, dir, err)
	}
	return nil
}

// hasControllers reports whether dir offers all of controllers to its
// children already.
func hasControllers(dir string, controllers []string) bool {
	have := strings.Fields(string(readFile(filepath.Join(dir, "cgroup.subtree_control"))))
	for _, c := range controllers {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// moveProcsToLeaf moves the processes of dir, if it has any and is not the
// hierarchy's root (which may hold processes), into its host leaf.
func moveProcsToLeaf(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 || hierarchyRoot(dir) {
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
			if err := write(leaf, "cgroup.procs", pid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("move pid %s to %s: %w", pid, leaf, err)
			}
		}
	}
	return nil
}

// hierarchyRoot says whether dir is the root of the whole v2 hierarchy,
// the one cgroup that may hold processes while its children have
// controllers. The root of a cgroup namespace, such as a container's
// /sys/fs/cgroup, is not: it is an ordinary cgroup, so it must be emptied
// first too. Only the true root lacks a cgroup.type file.
func hierarchyRoot(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.type"))
	return errors.Is(err, os.ErrNotExist)
}

func (g *v2) Path() string        { return g.path }
func (g *v2) CloneFD() int        { return g.fd }
func (g *v2) JoinFiles() []string { return nil }
func (g *v2) Add(pid int) error   { return write(g.path, "cgroup.procs", strconv.Itoa(pid)) }

// Kill writes cgroup.kill, which kernels before 5.14 lack: there the
// caller's kill of the sandbox's pid 1 has to do.
func (g *v2) Kill() error {
	if err := write(g.path, "cgroup.kill", "1"); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

func (g *v2) OOMKillsOne() error { return write(g.path, "memory.oom.group", "0") }

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
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
	return removeDirs(g.path)
}
