//go:build linux

package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// NamePrefix starts the name of every run cgroup; the name goes on with
// the pid of the process that made it: NamePrefix + "<pid>-<n>".
const NamePrefix = "sandbox-"

// RemoveStale removes the run cgroups beneath parent ("" = this process's
// own cgroup) whose maker has died: a killed spawner or caller cannot
// remove its own. It retries for up to wait while their last processes
// exit, and leaves alone what stays busy.
func RemoveStale(parent string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		busy := false
		for _, dir := range parentDirs(parent, true) {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				pid, ok := makerPid(e.Name())
				if !ok || unix.Kill(pid, 0) != unix.ESRCH {
					continue
				}
				if err := unix.Rmdir(filepath.Join(dir, e.Name())); err == unix.EBUSY {
					busy = true
				}
			}
		}
		if !busy || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// makerPid reads the maker's pid out of a run cgroup's name.
func makerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, NamePrefix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	return pid, ok && err == nil && pid > 0
}

// parentDirs are the directories run cgroups beneath parent live in: one
// on v2, one per hierarchy on v1 (with blkio's when withIO).
func parentDirs(parent string, withIO bool) []string {
	own, err := ownPaths()
	if err != nil {
		return nil
	}
	var dirs []string
	switch Detect() {
	case V2:
		if p, err := orOwn(parent, "", own); err == nil {
			dirs = append(dirs, filepath.Join(Root, strings.TrimSuffix(p, "/"+hostLeaf)))
		}
	case V1:
		controllers := v1Controllers
		if withIO {
			controllers = v1AllControllers
		}
		mounts, _ := v1Mounts()
		for _, c := range controllers {
			m := mounts[c]
			if m == nil {
				continue
			}
			// Co-mounted controllers share one directory.
			if p, err := orOwn(parent, c, own); err == nil && !slices.Contains(dirs, m.path(p)) {
				dirs = append(dirs, m.path(p))
			}
		}
	}
	return dirs
}
