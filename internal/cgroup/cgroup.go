//go:build linux

// Package cgroup gives each sandbox run a cgroup with memory, CPU and pids
// limits, on cgroup v2 and on v1 or hybrid hosts, by writing the cgroup
// file system directly. A run's cgroup is a handful of mkdirs and writes;
// a general cgroup library would cost every re-exec of the caller's binary
// its package inits and size for nothing this package needs. The Group
// interface keeps the library's API free of how it is done.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Root is where the cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// ErrNoCgroup is returned when no cgroup this process may write exists to
// create a run's cgroup beneath.
var ErrNoCgroup = errors.New("no writable cgroup")

// Limits are what one run may use. A zero field is not limited.
type Limits struct {
	Memory    int64  // bytes of memory; swap is turned off with it
	CPUQuota  int64  // microseconds of CPU time per CPUPeriod
	CPUPeriod uint64 // microseconds
	Pids      int64  // processes and threads

	// IO caps bytes per second read from and written to each of
	// IODevices; zero is no cap.
	IOReadBPS, IOWriteBPS int64
	IODevices             []Device
}

// hasIO reports whether l limits io.
func (l Limits) hasIO() bool { return len(l.IODevices) > 0 && (l.IOReadBPS > 0 || l.IOWriteBPS > 0) }

// Usage is what a run used, read when it has ended.
type Usage struct {
	CPU        time.Duration // user + system CPU time of every process of the run
	MemoryPeak int64         // bytes; 0 if the kernel does not report it
	OOMKills   uint64        // processes the OOM killer killed
	PidsMax    uint64        // forks that failed at the pids limit
}

// Group is one run's cgroup.
type Group interface {
	// Path is the cgroup's directory (on v1, its memory controller's).
	Path() string
	// CloneFD is a directory fd for CLONE_INTO_CGROUP, or -1 where the
	// process must be placed with Add after it starts (v1).
	CloneFD() int
	// JoinFiles are the files a process writes "0" into to move its own
	// thread into the cgroup (v1's tasks files), or nil where it is
	// placed at its clone (CloneFD) or with Add. A move by pid takes a
	// global lock whose RCU grace period made each v1 placement cost
	// 10 to 20 ms when the lock had been idle; a single-threaded process
	// that moves itself does not take it.
	JoinFiles() []string
	// Add moves a process into the cgroup.
	Add(pid int) error
	// Kill kills every process in the cgroup (v2's cgroup.kill); a no-op
	// where the hierarchy has no such file.
	Kill() error
	// OOMKillsOne makes an OOM kill take only the process the kernel
	// chooses (the one with the highest oom_score) instead of every
	// process in the cgroup, as a live sandbox needs, whose init must
	// outlive the programs it holds. v2 kills the whole group from its
	// start (memory.oom.group); v1 always kills one: a no-op there.
	OOMKillsOne() error
	// Usage reads what the run used.
	Usage() (Usage, error)
	// Delete removes the cgroup; it must be empty.
	Delete() error
}

// Version is the cgroup layout of the host.
type Version int

const (
	None Version = iota // no cgroup file system
	V1                  // v1 controllers (also on hybrid hosts, where v2 has none)
	V2                  // the unified hierarchy
)

func (v Version) String() string { return [...]string{"none", "v1", "v2"}[v] }

// detected caches Detect: the layout does not change under a process.
var detected struct {
	sync.Once
	v Version
}

// Detect reports the host's layout. A hybrid host whose v2 hierarchy has
// no controllers counts as V1: its limits are v1's.
func Detect() Version {
	detected.Do(func() {
		var st unix.Statfs_t
		switch {
		case unix.Statfs(Root, &st) != nil:
			detected.v = None
		case st.Type == unix.CGROUP2_SUPER_MAGIC:
			detected.v = V2
		default:
			if _, err := os.Stat(filepath.Join(Root, "memory")); err == nil {
				detected.v = V1
			}
		}
	})
	return detected.v
}

// Writable returns the directories run cgroups beneath parent ("" = this
// process's own cgroup) are made in, one per hierarchy, and an error
// wrapping ErrNoCgroup when this process may not write one of them.
func Writable(parent string) ([]string, error) {
	dirs := parentDirs(parent, false)
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no cgroup hierarchy for this process at %s", ErrNoCgroup, Root)
	}
	for _, d := range dirs {
		if unix.Access(d, unix.W_OK) != nil {
			return dirs, fmt.Errorf("%w: %s is not writable by uid %d", ErrNoCgroup, d, os.Getuid())
		}
	}
	return dirs, nil
}

// New creates the cgroup name beneath parent with the limits l. parent is
// a cgroup path (as in /proc/self/cgroup); "" means this process's own
// cgroup. On failure nothing it made is left behind.
func New(parent, name string, l Limits) (Group, error) {
	switch Detect() {
	case V2:
		return newV2(parent, name, l)
	case V1:
		return newV1(parent, name, l)
	}
	return nil, fmt.Errorf("%w: no cgroup file system at %s", ErrNoCgroup, Root)
}

// ownPaths returns this process's cgroup paths from /proc/self/cgroup: the
// v2 path under "", each v1 path under its controllers' names. It is read
// once per process: nothing moves this process but newV2, into a leaf of
// its own cgroup, and every use trims that leaf off. The map is shared:
// callers must not change it.
var ownPaths = sync.OnceValues(func() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			paths[""] = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				paths[c] = parts[2]
			}
		}
	}
	return paths, nil
})

// orOwn returns parent, or if it is "" this process's cgroup path in the
// hierarchy of controller ("" for v2).
func orOwn(parent, controller string, own map[string]string) (string, error) {
	if parent != "" {
		return parent, nil
	}
	p, ok := own[controller]
	if !ok {
		return "", fmt.Errorf("no %q line in /proc/self/cgroup", controller)
	}
	return p, nil
}

// makeDir makes a run's cgroup directory. Where this process may not, the
// error wraps ErrNoCgroup and ends with hint, which says how to get a
// cgroup. The kernel's answer to mkdir stands in for a permission check
// before it. A directory that exists already is used, as os.MkdirAll
// would: run names hold their maker's pid, so one that exists was left by
// a dead process whose pid this one has now.
func makeDir(dir, hint string) error {
	switch err := retryEINTR(func() error { return unix.Mkdir(dir, 0o755) }); err {
	case nil, unix.EEXIST:
		return nil
	case unix.EACCES, unix.EPERM, unix.EROFS, unix.ENOENT:
		return fmt.Errorf("%w: mkdir %s as uid %d: %w (%s)", ErrNoCgroup, dir, os.Getuid(), err, hint)
	default:
		return fmt.Errorf("cgroup %s: mkdir: %w", dir, err)
	}
}

// removeDirs removes empty cgroup directories, children before parents as
// listed. A cgroup whose last process has just been reaped can stay busy
// for a moment while the kernel finishes with it; rmdir is retried for up
// to 100 ms. Nothing reads cgroup.procs first: a cgroup with processes
// fails rmdir with EBUSY, which says the same for one syscall.
func removeDirs(dirs ...string) error {
	var errs []error
	for _, d := range dirs {
		err := unix.Rmdir(d)
		for delay := 100 * time.Microsecond; err == unix.EBUSY && delay < 100*time.Millisecond; delay *= 2 {
			time.Sleep(delay)
			err = unix.Rmdir(d)
		}
		if err != nil && err != unix.ENOENT {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
