//go:build linux

package recipe

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/fumehood/sandbox/internal/sysutil"
	"golang.org/x/sys/unix"
)

// hostFacts is what a plan takes from the host; read once per process.
type hostFacts struct {
	entries      []entry // the host's system directories (fd unused)
	lastCap      int
	waitKillable bool // SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19)
	root         bool
	err          error
}

var (
	hostFactsOnce sync.Once
	theHostFacts  hostFacts
)

func readHostFacts() *hostFacts {
	hostFactsOnce.Do(func() {
		f := &theHostFacts
		f.root = os.Geteuid() == 0
		for _, name := range HostSystemDirs {
			st, err := os.Lstat("/" + name)
			if err != nil {
				continue
			}
			e := entry{name: name}
			if st.Mode()&os.ModeSymlink != 0 {
				if e.link, err = os.Readlink("/" + name); err != nil {
					f.err = err
					return
				}
			} else if !st.IsDir() {
				f.err = fmt.Errorf("/%s is neither a directory nor a symlink", name)
				return
			}
			f.entries = append(f.entries, e)
		}
		if f.lastCap, f.err = lastCap(); f.err != nil {
			return
		}
		f.waitKillable = sysutil.KernelAtLeast(5, 19)
	})
	return &theHostFacts
}

// hostEtcCache holds what /etc takes from the host, with the directories
// it was listed from as they were then.
var hostEtcCache struct {
	sync.Mutex
	stamp   []int64
	entries []etcEntry
	ok      bool
}

// currentHostEtc lists what /etc takes from the host now, for each run's
// plan: a package installed or removed since the last
// plan (tzdata, a JDK) would otherwise leave a plan opening what is gone.
// The list is kept while none of the directories it comes from has
// changed (entries added, removed or replaced change a directory's mtime)
// and none of the files it copies has, which costs a stat of each instead
// of a look at every path.
func currentHostEtc() ([]etcEntry, error) {
	stamp := etcDirsStamp()
	c := &hostEtcCache
	c.Lock()
	defer c.Unlock()
	if c.ok && slices.Equal(c.stamp, stamp) && copiesCurrent(c.entries) {
		return c.entries, nil
	}
	root, err := os.Open("/")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	entries, err := etcEntriesIn(int(root.Fd()), false)
	if err != nil {
		return nil, err
	}
	copyHostEtc(entries)
	c.stamp, c.entries, c.ok = stamp, entries, true
	return entries, nil
}

// etcDirsStamp is the mtime and inode of each directory HostEtc lists
// from, -1 for one missing.
func etcDirsStamp() []int64 {
	var stamp []int64
	for _, dir := range etcDirs() {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			stamp = append(stamp, -1, -1)
			continue
		}
		stamp = append(stamp, st.Mtim.Nano(), int64(st.Ino))
	}
	return stamp
}
