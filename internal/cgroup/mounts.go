//go:build linux

package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// v1Mount is where one v1 hierarchy is mounted.
type v1Mount struct {
	dir  string // the mount point, e.g. /sys/fs/cgroup/cpu,cpuacct
	root string // the hierarchy's cgroup mounted there: "/" but in a container without a cgroup namespace
}

// path is the directory of the cgroup cg (a path as in /proc/self/cgroup,
// which counts from the hierarchy's root, not the mount's).
func (m *v1Mount) path(cg string) string {
	if rel, ok := strings.CutPrefix(cg, m.root); ok && m.root != "/" && (rel == "" || rel[0] == '/') {
		cg = rel
	}
	return filepath.Join(m.dir, cg)
}

// v1Mounts maps each v1 controller runs use to its hierarchy's mount,
// read from /proc/self/mountinfo once per process: mounts do not change
// under a running sandbox library, and reading them costs more than
// making a cgroup. Co-mounted controllers (cpu,cpuacct on Debian, where
// /sys/fs/cgroup/cpu and /sys/fs/cgroup/cpuacct are symlinks to one mount)
// share one *v1Mount, so their run cgroup is one directory.
var v1Mounts = sync.OnceValues(func() (map[string]*v1Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseV1Mounts(string(b)), nil
})

// parseV1Mounts reads the v1 mounts beneath Root out of mountinfo text
// (proc(5)): "id parent maj:min root mountpoint options [optional...] -
// fstype source superoptions", the controllers being among the super
// options. A hierarchy mounted twice keeps its first mount. Mount points
// with escaped characters (\040 for a space) are not unescaped: none
// beneath Root has them.
func parseV1Mounts(mountinfo string) map[string]*v1Mount {
	mounts := map[string]*v1Mount{}
	for _, line := range strings.Split(mountinfo, "\n") {
		mount, fs, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(mount), strings.Fields(fs)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" || !strings.HasPrefix(f[4], Root+"/") {
			continue
		}
		m := &v1Mount{dir: f[4], root: f[3]}
		for _, c := range strings.Split(g[2], ",") {
			if _, seen := mounts[c]; !seen && slices.Contains(v1AllControllers, c) {
				mounts[c] = m
			}
		}
	}
	return mounts
}
