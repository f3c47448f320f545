//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// The init of every sandbox: the recipe (recipe_linux.go) compiled before
// the clone into a forkplan.Plan that the cloned child runs with raw
// system calls, without a runtime and without an exec of its own. The
// caller's binary never starts for it: the plan costs nothing but its
// system calls.
//
// What cannot be known ahead, the plan decides from facts of the host
// (which system directories are symlinks, what /etc provides), of a
// Rootfs (its entries, its /etc), and from a model of the tree it builds;
// beneath what the model cannot see into (a host tree, the workspace),
// the child finds its way with each step's errno (create).

// The child's fds once the plan has placed them.
const (
	planConnFd      = 3 // the socket to the launcher; close-on-exec
	planSyncFd      = 4 // the launcher's go-ahead, once the id maps are written
	planWorkspaceFd = 5 // the session's workspace mount, when there is one
	planShimFd      = 6 // the exec shim (execShim), when there is one
	planProxyFd     = 7 // the proxy channel of a NetworkAllow run (egress_linux.go)
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
		for _, name := range hostSystemDirs {
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
		var u unix.Utsname
		if f.err = unix.Uname(&u); f.err != nil {
			return
		}
		f.waitKillable = kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 19)
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
// changed (entries added, removed or replaced change a directory's mtime),
// which costs a stat of each instead of a look at every path.
func currentHostEtc() ([]etcEntry, error) {
	stamp := etcDirsStamp()
	c := &hostEtcCache
	c.Lock()
	defer c.Unlock()
	if c.ok && slices.Equal(c.stamp, stamp) {
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
	c.stamp, c.entries, c.ok = stamp, entries, true
	return entries, nil
}

// etcDirsStamp is the mtime and inode of each directory hostEtc lists
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

// kernelAtLeast compares a kernel release ("6.1.0-18-amd64") with major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// planFds are the launcher's fds the child starts from.
type planFds struct {
	stdio      [3]int
	conn, sync int
	workspace  int // -1 without a session workspace
	proxy      int // -1 without an egress proxy
	shim       int // the exec shim's sealed memfd; -1 on an architecture without one
}

// nodeKind is what the model knows of a path beneath the new root.
type nodeKind int

const (
	nodeDir    nodeKind = iota + 1 // a directory the plan made, in its own tmpfs
	nodeFile                       // a file the plan made
	nodeOpaque                     // a mount of something else (a host tree, proc): its insides are unknown
	nodeLink                       // a symlink the plan made
)

// planner compiles one config.
type planner struct {
	p     *forkplan.Plan
	cfg   *wire.Config
	facts *hostFacts
	etc   []etcEntry          // the hostEtc paths the host has
	tree  map[string]nodeKind // by absolute path inside the sandbox
	links map[string]string   // the targets of the symlinks the plan made
	root  forkplan.Slot       // the new root's mount
	block *programBlock       // a prepared init's: where its program lands
	err   *wire.SetupError    // the first thing found that makes the config fail
	shim  bool                // the exec shim is at planShimFd

	// With a Rootfs: its top-level entries, as the host's system
	// directories are otherwise.
	rootfs []rootfsEntry
}

// fail records se, unless an earlier failure is recorded: a config fails
// on the first thing wrong with it, as the child would.
func (b *planner) fail(se *wire.SetupError) {
	if b.err == nil {
		b.err = se
	}
}

// planInit compiles cfg into the steps of its init, or returns why the
// sandbox cannot be built, as the child would have failed. A prepared
// init's plan (cfg.Prepare) waits for its program in block, which it
// returns.
func planInit(cfg *wire.Config, fds planFds) (*forkplan.Plan, *programBlock, *wire.SetupError) {
	facts := readHostFacts()
	if facts.err != nil {
		return nil, nil, &wire.SetupError{Stage: "mount", Op: "read the host's system directories", Text: facts.err.Error(), Errno: sysutil.ErrnoOf(facts.err)}
	}
	b := &planner{p: forkplan.New(planConnFd), cfg: cfg, facts: facts, tree: map[string]nodeKind{"/": nodeDir}, links: map[string]string{}}
	// Whether a bind makes a directory or a file is decided here; the
	// child opens the sources as the sandbox user, and fails if it
	// cannot.
	bindDirs := make([]bool, len(cfg.Binds))
	for i, bd := range cfg.Binds {
		st, err := os.Stat(bd.Source)
		if err != nil {
			return nil, nil, sourceError(fmt.Sprintf("open source (Options.Binds[%d])", i), bd.Source, err)
		}
		bindDirs[i] = st.IsDir()
	}
	if cfg.Workspace != "" {
		st, err := os.Stat(cfg.Workspace)
		if err == nil && !st.IsDir() {
			err = &os.PathError{Op: "stat", Path: cfg.Workspace, Err: unix.ENOTDIR}
		}
		if err != nil {
			return nil, nil, sourceError("open source (Options.Workspace)", cfg.Workspace, err)
		}
	}
	if cfg.Rootfs != "" {
		if se := b.readRootfs(); se != nil {
			return nil, nil, se
		}
	} else {
		etc, err := currentHostEtc()
		if err != nil {
			return nil, nil, &wire.SetupError{Stage: "mount", Op: "read the host's /etc", Text: err.Error(), Errno: sysutil.ErrnoOf(err)}
		}
		b.etc = etc
	}
	if cfg.Prepare {
		b.block = newProgramBlock()
	}
	b.placeFds(fds)
	b.identity()
	b.buildRoot(bindDirs)
	b.process()
	b.exec()
	if b.err != nil {
		return nil, nil, b.err
	}
	return b.p, b.block, nil
}

// sourceError is the failure to open a source the options name, as the
// child reports the same failure.
func sourceError(op, p string, err error) *wire.SetupError {
	return &wire.SetupError{Stage: "mount", Op: op, Path: p, Errno: sysutil.ErrnoOf(err), Text: err.Error()}
}

func (b *planner) call(w forkplan.Where, trap uintptr, args ...forkplan.Arg) *forkplan.Step {
	return b.p.Call(w, trap, args...)
}

func (b *planner) slot() forkplan.Slot { return b.p.Slot(0) }

func (b *planner) close(s forkplan.Slot) {
	b.call(forkplan.Where{Stage: "process", Op: "close"}, unix.SYS_CLOSE, forkplan.In(s))
}

// placeFds moves the child's inherited fds into the planned layout and
// closes every other fd it inherited from the launcher.
func (b *planner) placeFds(fds planFds) {
	type move struct {
		from, to int
		cloexec  bool
	}
	moves := []move{{fds.stdio[0], 0, false}, {fds.stdio[1], 1, false}, {fds.stdio[2], 2, false},
		{fds.conn, planConnFd, true}, {fds.sync, planSyncFd, true}}
	if fds.workspace >= 0 {
		moves = append(moves, move{fds.workspace, planWorkspaceFd, true})
	}
	if b.shim = fds.shim >= 0; b.shim {
		moves = append(moves, move{fds.shim, planShimFd, true})
	}
	if fds.proxy >= 0 {
		moves = append(moves, move{fds.proxy, planProxyFd, true})
	}
	// First above every source and target, so that no move overwrites a
	// source still to be moved.
	above := planProxyFd + 1
	for _, m := range moves {
		above = max(above, m.from+1)
	}
	w := forkplan.Where{Stage: "process", Op: "place fds"}
	tmp := make([]forkplan.Slot, len(moves))
	for i, m := range moves {
		tmp[i] = b.slot()
		b.call(w, unix.SYS_FCNTL, forkplan.Val(m.from), forkplan.Val(unix.F_DUPFD_CLOEXEC), forkplan.Val(above)).Save(tmp[i])
	}
	for i, m := range moves {
		flags := 0
		if m.cloexec {
			flags = unix.O_CLOEXEC
		}
		b.call(w, unix.SYS_DUP3, forkplan.In(tmp[i]), forkplan.Val(m.to), forkplan.Val(flags))
	}
	// Everything else: a prepared init's workspace mount arrives later,
	// at planWorkspaceFd, which must be free then.
	rest := planWorkspaceFd
	for _, m := range moves { // in the order of their targets
		if m.to < rest {
			continue
		}
		if m.to > rest {
			b.call(w, unix.SYS_CLOSE_RANGE, forkplan.Val(rest), forkplan.Val(m.to-1), forkplan.Val(0))
		}
		rest = m.to + 1
	}
	b.call(w, unix.SYS_CLOSE_RANGE, forkplan.Val(rest), forkplan.Val(^uint(0)), forkplan.Val(0))
}

// identity waits for the launcher's id maps, becomes the sandbox user and
// keeps only initCaps.
func (b *planner) identity() {
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "process", Op: op} }
	b.call(w("prctl PR_SET_PDEATHSIG"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	// Out, one byte: the child runs; the launcher learns its pid and
	// writes its maps. In, one byte: the maps are written (and on cgroup
	// v1, the child is in its cgroup). EOF: the launcher is gone.
	b.call(w("tell the launcher"), unix.SYS_WRITE, forkplan.Val(planSyncFd), forkplan.Buf([]byte{1}), forkplan.Val(1)).Want(1)
	b.call(w("wait for the launcher"), unix.SYS_READ, forkplan.Val(planSyncFd), forkplan.Buf(make([]byte, 1)), forkplan.Val(1)).Want(1)
	if b.block == nil { // a prepared init's program comes on it
		b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planSyncFd))
	}
	if b.cfg.ResetOOMScore {
		// While the child still has the launcher's ids, which own its
		// /proc/self; and in a child of its own memory (startPlanned),
		// since a write here is every sharer's.
		const p = "/proc/self/oom_score_adj"
		fd := b.slot()
		b.call(forkplan.Where{Stage: "process", Op: "write", Path: p}, unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(p),
			forkplan.Val(unix.O_WRONLY|unix.O_CLOEXEC)).Save(fd)
		b.call(forkplan.Where{Stage: "process", Op: "write", Path: p}, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf([]byte("0")), forkplan.Val(1))
		b.close(fd)
	}
	if b.facts.root {
		b.call(w("setgroups"), unix.SYS_SETGROUPS, forkplan.Val(0), forkplan.Val(0))
	}
	b.call(w("setresgid"), unix.SYS_SETRESGID, forkplan.Val(wire.SandboxGID), forkplan.Val(wire.SandboxGID), forkplan.Val(wire.SandboxGID))
	b.call(w("setresuid"), unix.SYS_SETRESUID, forkplan.Val(wire.SandboxUID), forkplan.Val(wire.SandboxUID), forkplan.Val(wire.SandboxUID))
	// A change of ids clears the parent-death signal: set it again, then
	// check that the launcher did not die before (its end of the socket
	// would read as EOF instead of EAGAIN).
	b.call(w("prctl PR_SET_PDEATHSIG"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	b.call(w("check the launcher lives"), unix.SYS_RECVFROM, forkplan.Val(planConnFd), forkplan.Buf(make([]byte, 1)), forkplan.Val(1),
		forkplan.Val(unix.MSG_DONTWAIT|unix.MSG_PEEK), forkplan.Val(0), forkplan.Val(0)).Want(1).PassOn(uintptr(unix.EAGAIN))
	var mask uint32
	for _, c := range initCaps {
		mask |= 1 << c
	}
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := &[2]unix.CapUserData{{Effective: mask, Permitted: mask, Inheritable: 0}}
	b.call(forkplan.Where{Stage: "capabilities", Op: "capset"}, unix.SYS_CAPSET, forkplan.Ptr(hdr), forkplan.Ptr(data))
	b.call(w("setsid"), unix.SYS_SETSID)
	// Dumpable is the address space's: a child sharing the launcher's
	// would make the launcher non-dumpable, and nothing would be gained,
	// since its memory is the launcher's, which the same users can reach.
	// The program's exec sets it anew either way.
	if !forkplan.SharesMemory {
		b.call(w("prctl PR_SET_DUMPABLE"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_DUMPABLE), forkplan.Val(0))
	}
}

// open adds an O_PATH open of a host path.
func (b *planner) open(p, op string, flags int) forkplan.Slot {
	s := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: op, Path: p}, unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(p),
		forkplan.Val(unix.O_PATH|unix.O_CLOEXEC|flags)).Save(s)
	return s
}

func (b *planner) buildRoot(bindDirs []bool) {
	cfg := b.cfg
	// Open every source first: the staging mount hides part of the host
	// tree.
	type source struct {
		name string
		dir  bool
		fd   forkplan.Slot
	}
	top := b.topEntries()
	rootfs := forkplan.Slot(-1)
	if cfg.Rootfs != "" {
		rootfs = b.open(cfg.Rootfs, "open source (Options.Rootfs)", unix.O_DIRECTORY)
	}
	var entries []source
	for _, e := range top {
		switch {
		case e.link != "":
		case rootfs >= 0:
			entries = append(entries, source{e.name, e.dir, b.openInRootfs(rootfs, e.name, unix.O_PATH|unix.O_NOFOLLOW)})
		default:
			entries = append(entries, source{e.name, e.dir, b.open("/"+e.name, "open source", unix.O_NOFOLLOW)})
		}
	}
	devs := make([]forkplan.Slot, len(devices))
	for i, d := range devices {
		devs[i] = b.open("/dev/"+d, "open source", 0)
	}
	binds := make([]forkplan.Slot, len(cfg.Binds))
	for i, bd := range cfg.Binds {
		binds[i] = b.open(bd.Source, fmt.Sprintf("open source (Options.Binds[%d])", i), 0)
	}
	workspace := forkplan.Slot(-1)
	if cfg.Workspace != "" {
		workspace = b.open(cfg.Workspace, "open source (Options.Workspace)", 0)
	}
	etcSrc := make([]forkplan.Slot, len(b.etc))
	for i, e := range b.etc {
		etcSrc[i] = -1
		switch {
		case e.kind == etcLink:
		case rootfs >= 0:
			etcSrc[i] = b.openInRootfs(rootfs, e.path, unix.O_PATH|unix.O_NOFOLLOW)
		default:
			etcSrc[i] = b.open(e.path, "open source", unix.O_NOFOLLOW)
		}
	}

	b.call(forkplan.Where{Stage: "mount", Op: "make / private"}, unix.SYS_MOUNT, forkplan.Str(""), forkplan.Str("/"), forkplan.Str(""),
		forkplan.Val(unix.MS_REC|unix.MS_PRIVATE), forkplan.Str(""))
	b.root = b.newFS("tmpfs", rwAttrs, "mode=0755", "size=4m", "nr_inodes=4096")
	b.call(forkplan.Where{Stage: "mount", Op: "attach new root", Path: stagingDir}, unix.SYS_MOVE_MOUNT, forkplan.In(b.root), forkplan.Str(""),
		forkplan.Val(unix.AT_FDCWD), forkplan.Str(stagingDir), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH))
	for _, e := range top {
		if e.link != "" {
			b.call(forkplan.Where{Stage: "mount", Op: "symlink", Path: "/" + e.name}, unix.SYS_SYMLINKAT, forkplan.Str(e.link),
				forkplan.In(b.root), forkplan.Str(e.name))
			b.tree["/"+e.name], b.links["/"+e.name] = nodeLink, e.link
		}
	}
	for _, e := range entries {
		b.bind(e.fd, e.dir, "/"+e.name, roAttrs)
	}
	b.buildEtc(etcSrc)
	b.buildProc(devs[0])
	b.buildDev(devs)
	b.mountNew("/tmp", "tmpfs", rwAttrs, "mode=1777", fmt.Sprintf("size=%d", cfg.TmpSize), fmt.Sprintf("nr_inodes=%d", tmpfsInodes(cfg.TmpSize)))
	b.tree["/tmp"] = nodeDir
	switch {
	case workspace >= 0:
		b.bind(workspace, true, wire.DefaultDir, rwAttrs)
	case cfg.WorkspaceMount && cfg.Prepare:
		// Given with the program (awaitProgram).
		if _, ok := b.tree[wire.DefaultDir]; !ok {
			b.create(wire.DefaultDir, false)
		}
		b.tree[wire.DefaultDir] = nodeOpaque
	case cfg.WorkspaceMount:
		t := b.target(wire.DefaultDir, false)
		b.call(forkplan.Where{Stage: "mount", Op: "attach", Path: wire.DefaultDir}, unix.SYS_MOVE_MOUNT, forkplan.Val(planWorkspaceFd), forkplan.Str(""),
			forkplan.In(t), forkplan.Str(""), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH))
		b.call(forkplan.Where{Stage: "mount", Op: "close"}, unix.SYS_CLOSE, forkplan.Val(planWorkspaceFd))
		b.close(t)
		b.tree[wire.DefaultDir] = nodeOpaque
	default:
		b.mountNew(wire.DefaultDir, "tmpfs", rwAttrs, "mode=0755", fmt.Sprintf("size=%d", cfg.WorkspaceSize),
			fmt.Sprintf("nr_inodes=%d", tmpfsInodes(cfg.WorkspaceSize)),
			fmt.Sprintf("uid=%d", wire.SandboxUID), fmt.Sprintf("gid=%d", wire.SandboxGID))
		b.tree[wire.DefaultDir] = nodeDir
	}
	for i, bd := range cfg.Binds {
		attrs := uint64(roAttrs)
		if bd.Writable {
			attrs = rwAttrs
		}
		b.bind(binds[i], bindDirs[i], bd.Target, attrs)
	}
	b.setAttrs(b.root, roAttrs, false, forkplan.Where{Stage: "mount", Op: "make root read-only"})
	// Sources are closed before the pivot: nothing of the host tree may
	// stay reachable through an fd.
	for _, s := range slices.Concat([]forkplan.Slot{workspace, rootfs}, devs, binds, etcSrc) {
		if s >= 0 {
			b.close(s)
		}
	}
	for _, e := range entries {
		b.close(e.fd)
	}
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "pivot_root", Op: op} }
	b.call(w("chdir new root"), unix.SYS_FCHDIR, forkplan.In(b.root))
	b.call(w("pivot_root"), unix.SYS_PIVOT_ROOT, forkplan.Str("."), forkplan.Str("."))
	b.call(w("detach old root"), unix.SYS_UMOUNT2, forkplan.Str("."), forkplan.Val(unix.MNT_DETACH))
	b.call(w("chdir /"), unix.SYS_CHDIR, forkplan.Str("/"))
	b.close(b.root)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// newFS adds the steps of a detached mount of a new fstype filesystem.
func (b *planner) newFS(fstype string, attrs int, opts ...string) forkplan.Slot {
	fs, m := b.slot(), b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "fsopen " + fstype}, unix.SYS_FSOPEN, forkplan.Str(fstype), forkplan.Val(unix.FSOPEN_CLOEXEC)).Save(fs)
	for _, o := range opts {
		w := forkplan.Where{Stage: "mount", Op: "fsconfig " + fstype + " " + o}
		if k, v, hasValue := strings.Cut(o, "="); hasValue {
			b.call(w, unix.SYS_FSCONFIG, forkplan.In(fs), forkplan.Val(unix.FSCONFIG_SET_STRING), forkplan.Str(k), forkplan.Str(v), forkplan.Val(0))
		} else {
			b.call(w, unix.SYS_FSCONFIG, forkplan.In(fs), forkplan.Val(unix.FSCONFIG_SET_FLAG), forkplan.Str(k), forkplan.Val(0), forkplan.Val(0))
		}
	}
	b.call(forkplan.Where{Stage: "mount", Op: "fsconfig create " + fstype}, unix.SYS_FSCONFIG, forkplan.In(fs),
		forkplan.Val(unix.FSCONFIG_CMD_CREATE), forkplan.Val(0), forkplan.Val(0), forkplan.Val(0))
	b.call(forkplan.Where{Stage: "mount", Op: "fsmount " + fstype}, unix.SYS_FSMOUNT, forkplan.In(fs), forkplan.Val(unix.FSMOUNT_CLOEXEC),
		forkplan.Val(attrs)).Save(m)
	b.close(fs)
	return m
}

func (b *planner) setAttrs(fd forkplan.Slot, attrs uint64, recursive bool, w forkplan.Where) {
	flags := unix.AT_EMPTY_PATH
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	b.call(w, unix.SYS_MOUNT_SETATTR, forkplan.In(fd), forkplan.Str(""), forkplan.Val(flags),
		forkplan.Ptr(&unix.MountAttr{Attr_set: attrs}), forkplan.Val(unsafe.Sizeof(unix.MountAttr{})))
}

// cloneTree adds the steps of a detached recursive copy of the mount at src.
func (b *planner) cloneTree(src forkplan.Slot, attrs uint64, what string) forkplan.Slot {
	m := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "bind", Path: what}, unix.SYS_OPEN_TREE, forkplan.In(src), forkplan.Str(""),
		forkplan.Val(unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)).Save(m)
	if attrs != 0 {
		b.setAttrs(m, attrs, true, forkplan.Where{Stage: "mount", Op: "set flags of bind", Path: what})
	}
	return m
}

// attach moves the detached mount m onto target t and closes m; with
// keep, m stays open to build beneath it.
func (b *planner) attach(m, t forkplan.Slot, what string, keep bool) {
	b.call(forkplan.Where{Stage: "mount", Op: "attach", Path: what}, unix.SYS_MOVE_MOUNT, forkplan.In(m), forkplan.Str(""),
		forkplan.In(t), forkplan.Str(""), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH))
	if !keep {
		b.close(m)
	}
}

// target adds the steps that create p beneath the new root (a directory,
// or an empty file), with its missing parents, and open it. Where the
// model knows the parent (a directory the plan made), it creates what is
// missing; beneath what it does not know (a host tree, the workspace, a
// symlink, a Rootfs's entry), the child creates each missing element as
// it goes (create).
func (b *planner) target(p string, file bool) forkplan.Slot {
	p = b.resolve(path.Clean("/" + p))
	if _, ok := b.tree[p]; !ok {
		b.create(p, file)
	}
	t := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: p}, unix.SYS_OPENAT2, forkplan.In(b.root), forkplan.Str(p),
		forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
		forkplan.Val(unix.SizeofOpenHow)).Save(t)
	return t
}

// maxLinks bounds the symlinks resolve follows for one path, as the
// kernel's own limit does for a lookup.
const maxLinks = 40

// resolve follows the symlinks the plan made on the way to p, inside the
// new root: a target reached through one (a Rootfs's top-level link, say,
// dangling or not) is made where the link leads, as a program inside
// would find it. Links in trees the model does not know the insides of
// are followed by the child, which fails on a dangling one.
func (b *planner) resolve(p string) string {
	for range maxLinks {
		link, rest := "", ""
		for q := p; q != "/"; q = path.Dir(q) {
			if kind := b.tree[q]; kind == nodeLink {
				link, rest = q, strings.TrimPrefix(p, q)
			} else if kind == nodeOpaque {
				link = ""
			}
		}
		if link == "" {
			return p
		}
		next := b.links[link]
		if !path.IsAbs(next) {
			next = path.Join(path.Dir(link), next)
		}
		p = path.Clean("/" + next + rest)
	}
	return p
}

// create adds the steps that create p, whose parent is made first if the
// model has it not. Beneath a node the model does not know the insides
// of, the child resolves the parent inside the new root and creates p in
// it unless it exists: in a read-only tree that fails (EROFS) unless p is
// there, and a symlink in the way is followed, inside the root.
func (b *planner) create(p string, file bool) {
	dir := path.Dir(p)
	kind, known := b.tree[dir]
	if !known {
		b.create(dir, false)
		kind = b.tree[dir]
	}
	rel := strings.TrimPrefix(p, "/")
	w := forkplan.Where{Stage: "mount", Op: "create target", Path: p}
	if kind != nodeDir {
		parent := b.slot()
		b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: p}, unix.SYS_OPENAT2, forkplan.In(b.root), forkplan.Str(dir),
			forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
			forkplan.Val(unix.SizeofOpenHow)).Save(parent)
		if file {
			// mknod makes a regular file without privilege, and without
			// an fd to close.
			b.call(w, unix.SYS_MKNODAT, forkplan.In(parent), forkplan.Str(path.Base(p)), forkplan.Val(unix.S_IFREG|0o644), forkplan.Val(0)).
				PassOn(uintptr(unix.EEXIST))
		} else {
			b.call(w, unix.SYS_MKDIRAT, forkplan.In(parent), forkplan.Str(path.Base(p)), forkplan.Val(0o755)).PassOn(uintptr(unix.EEXIST))
		}
		b.close(parent)
		b.tree[p] = nodeOpaque
		return
	}
	if file {
		fd := b.slot()
		b.call(w, unix.SYS_OPENAT, forkplan.In(b.root), forkplan.Str(rel),
			forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
		b.close(fd)
		b.tree[p] = nodeFile
		return
	}
	b.call(w, unix.SYS_MKDIRAT, forkplan.In(b.root), forkplan.Str(rel), forkplan.Val(0o755))
	b.tree[p] = nodeDir
}

// bind adds the steps of a bind of the source at src onto target.
func (b *planner) bind(src forkplan.Slot, srcIsDir bool, target string, attrs uint64) {
	t := b.target(target, !srcIsDir)
	m := b.cloneTree(src, attrs, target)
	b.attach(m, t, target, false)
	b.close(t)
	b.tree[b.resolve(path.Clean("/"+target))] = nodeOpaque
}

// mountNew adds the steps of a new filesystem attached at target.
func (b *planner) mountNew(target, fstype string, attrs int, opts ...string) {
	t := b.target(target, false)
	m := b.newFS(fstype, attrs, opts...)
	b.attach(m, t, target, false)
	b.close(t)
}

func (b *planner) buildEtc(srcs []forkplan.Slot) {
	t := b.target("/etc", false)
	for _, f := range etcFiles(b.cfg) {
		b.writeFile(t, "/etc/"+f.name, []byte(f.content))
	}
	b.close(t)
	for i, e := range b.etc {
		if e.kind != etcLink {
			b.bind(srcs[i], e.kind == etcDir, e.path, roAttrs)
			continue
		}
		dir := b.target(path.Dir(e.path), false)
		b.call(forkplan.Where{Stage: "mount", Op: "symlink", Path: e.path}, unix.SYS_SYMLINKAT, forkplan.Str(e.link),
			forkplan.In(dir), forkplan.Str(path.Base(e.path)))
		b.close(dir)
		b.tree[e.path], b.links[e.path] = nodeLink, e.link
	}
	b.extendTrust()
}

// writeFile adds the steps that write a new file p, named by its last
// element in the directory dir.
func (b *planner) writeFile(dir forkplan.Slot, p string, content []byte) {
	fd := b.slot()
	w := forkplan.Where{Stage: "mount", Op: "write", Path: p}
	b.call(w, unix.SYS_OPENAT, forkplan.In(dir), forkplan.Str(path.Base(p)),
		forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
	b.call(w, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf(content), forkplan.Val(len(content))).Want(uintptr(len(content)))
	b.close(fd)
	b.tree[p] = nodeFile
}

// extendTrust adds Options.TrustedCAs to the trust bundles, as read now
// from the host or the Rootfs: each present in the new root is covered by a copy
// with Options.TrustedCAs appended, and without any they become
// newTrustBundle. A bundle the host has but the root does not is skipped
// with its steps.
func (b *planner) extendTrust() {
	extra := b.cfg.TrustedCAs
	if len(extra) == 0 {
		return
	}
	seen := map[string]bool{}
	n := 0
	for _, p := range trustBundles {
		id, bundle, err := b.readBundle(p)
		if err != nil {
			b.fail(&wire.SetupError{Stage: "mount", Op: "read CA bundle (Options.TrustedCAs)", Path: p, Errno: sysutil.ErrnoOf(err), Text: err.Error()})
			return
		}
		if bundle == nil || seen[id] {
			continue
		}
		seen[id] = true
		t := b.slot()
		open := b.call(forkplan.Where{Stage: "mount", Op: "resolve CA bundle (Options.TrustedCAs)", Path: p}, unix.SYS_OPENAT2, forkplan.In(b.root),
			forkplan.Str(p), forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
			forkplan.Val(unix.SizeofOpenHow)).Save(t)
		before := b.p.Len()
		name := trustName(n)
		n++
		fd := b.slot()
		w := forkplan.Where{Stage: "mount", Op: "write CA bundle (Options.TrustedCAs)", Path: p}
		merged := mergeTrust(bundle, extra)
		b.call(w, unix.SYS_OPENAT, forkplan.In(b.root), forkplan.Str(name),
			forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
		b.call(w, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf(merged), forkplan.Val(len(merged))).Want(uintptr(len(merged)))
		b.close(fd)
		src := b.slot()
		b.call(forkplan.Where{Stage: "mount", Op: "open CA bundle (Options.TrustedCAs)", Path: p}, unix.SYS_OPENAT, forkplan.In(b.root),
			forkplan.Str(name), forkplan.Val(unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)).Save(src)
		m := b.cloneTree(src, roAttrs, p)
		b.attach(m, t, p, false)
		b.close(src)
		b.call(forkplan.Where{Stage: "mount", Op: "unlink", Path: "/" + name}, unix.SYS_UNLINKAT, forkplan.In(b.root), forkplan.Str(name), forkplan.Val(0))
		b.close(t)
		open.SkipOn(uintptr(unix.ENOENT), b.p.Len()-before)
	}
	if n > 0 {
		return
	}
	dir := b.target(path.Dir(newTrustBundle), false)
	b.writeFile(dir, newTrustBundle, extra)
	b.close(dir)
}

// readBundle reads the trust bundle p as the new root will show it, and
// names the file it is (bundles are often links to one another): from
// the host, or from a Rootfs, whose bundles outside /etc the sandbox does
// not take. A bundle that is not there, or is not a regular file, reads
// as nil.
func (b *planner) readBundle(p string) (id string, data []byte, err error) {
	if b.cfg.Rootfs == "" {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", nil, nil
		}
		if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
			return "", nil, nil
		}
		data, err := readBounded(real, maxTrustBundle)
		return real, data, err
	}
	if !strings.HasPrefix(p, "/etc/") {
		return "", nil, nil
	}
	dir, err := os.Open(b.cfg.Rootfs)
	if err != nil {
		return "", nil, err
	}
	defer dir.Close()
	fd, err := sysutil.OpenInRoot(int(dir.Fd()), p, unix.O_RDONLY|unix.O_NOCTTY)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", nil, err
	}
	data, err = sysutil.ReadLimited(f, maxTrustBundle)
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), data, err
}

// readBounded reads the host file p, up to limit bytes.
func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sysutil.ReadLimited(f, limit)
}

func (b *planner) buildProc(devNull forkplan.Slot) {
	t := b.target("/proc", false)
	proc := b.newFS("proc", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	b.attach(proc, t, "/proc", true)
	b.close(t)
	b.tree["/proc"] = nodeOpaque
	const attrs = roAttrs | unix.MOUNT_ATTR_NOEXEC
	hide := func(name string, mount func(fd forkplan.Slot, what string) forkplan.Slot) {
		what := "/proc/" + name
		fd := b.slot()
		// A path this kernel does not have is skipped with its steps.
		open := b.call(forkplan.Where{Stage: "mount", Op: "resolve", Path: what}, unix.SYS_OPENAT2, forkplan.In(proc), forkplan.Str(name),
			forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
			forkplan.Val(unix.SizeofOpenHow)).Save(fd)
		before := b.p.Len()
		m := mount(fd, what)
		b.attach(m, fd, what, false)
		b.close(fd)
		open.SkipOn(uintptr(unix.ENOENT), b.p.Len()-before)
	}
	for _, name := range procMaskedFiles {
		hide(name, func(_ forkplan.Slot, what string) forkplan.Slot { return b.cloneTree(devNull, attrs, what) })
	}
	for _, name := range procMaskedDirs {
		hide(name, func(forkplan.Slot, string) forkplan.Slot { return b.newFS("tmpfs", attrs, "size=0", "mode=0555") })
	}
	for _, name := range procReadOnly {
		hide(name, func(fd forkplan.Slot, what string) forkplan.Slot { return b.cloneTree(fd, attrs, what) })
	}
	b.close(proc)
}

func (b *planner) buildDev(devs []forkplan.Slot) {
	t := b.target("/dev", false)
	dev := b.newFS("tmpfs", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, "mode=0755", "size=64k", "nr_inodes=64")
	b.attach(dev, t, "/dev", true)
	b.close(t)
	in := func(name string, file bool) forkplan.Slot {
		w := forkplan.Where{Stage: "mount", Op: "create target", Path: "/dev/" + name}
		if file {
			fd := b.slot()
			b.call(w, unix.SYS_OPENAT, forkplan.In(dev), forkplan.Str(name),
				forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
			b.close(fd)
		} else {
			b.call(w, unix.SYS_MKDIRAT, forkplan.In(dev), forkplan.Str(name), forkplan.Val(0o755))
		}
		t := b.slot()
		b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: "/dev/" + name}, unix.SYS_OPENAT, forkplan.In(dev), forkplan.Str(name),
			forkplan.Val(unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW)).Save(t)
		return t
	}
	for i, name := range devices {
		t := in(name, true)
		// Device nodes need a mount without nodev.
		m := b.cloneTree(devs[i], unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, "/dev/"+name)
		b.attach(m, t, "/dev/"+name, false)
		b.close(t)
	}
	for _, fs := range devFilesystems(b.cfg) {
		t := in(fs.name, false)
		m := b.newFS(fs.fstype, fs.attrs, fs.opts...)
		b.attach(m, t, "/dev/"+fs.name, false)
		b.close(t)
	}
	for _, name := range sortedKeys(devLinks) {
		b.call(forkplan.Where{Stage: "mount", Op: "symlink", Path: "/dev/" + name}, unix.SYS_SYMLINKAT, forkplan.Str(devLinks[name]),
			forkplan.In(dev), forkplan.Str(name))
	}
	b.setAttrs(dev, unix.MOUNT_ATTR_RDONLY, false, forkplan.Where{Stage: "mount", Op: "make read-only", Path: "/dev"})
	b.close(dev)
	b.tree["/dev"] = nodeOpaque
}

// process adds what the init does between the pivot and the program:
// hostname, loopback, rlimits, the working directory, dropping every
// privilege, and the filter.
func (b *planner) process() {
	cfg := b.cfg
	b.call(forkplan.Where{Stage: "hostname", Op: "sethostname", Path: cfg.Hostname}, unix.SYS_SETHOSTNAME,
		forkplan.Buf([]byte(cfg.Hostname)), forkplan.Val(len(cfg.Hostname)))
	if !cfg.HostNetwork {
		w := forkplan.Where{Stage: "network", Op: "bring lo up"}
		fd := b.slot()
		b.call(forkplan.Where{Stage: "network", Op: "socket"}, unix.SYS_SOCKET, forkplan.Val(unix.AF_INET),
			forkplan.Val(unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), forkplan.Val(0)).Save(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			b.fail(&wire.SetupError{Stage: "network", Op: "bring lo up", Text: err.Error()})
			return
		}
		// The flags a new namespace's lo can change are all clear: up is
		// the only one to set.
		ifr.SetUint16(unix.IFF_UP)
		b.call(w, unix.SYS_IOCTL, forkplan.In(fd), forkplan.Val(unix.SIOCSIFFLAGS), forkplan.Ptr(ifr))
		b.close(fd)
	}
	if cfg.ProxyPort != 0 {
		b.proxyListener()
	}
	for _, l := range rlimitsOf(cfg) {
		b.call(forkplan.Where{Stage: "rlimit", Op: l.name, Path: strconv.FormatUint(l.value, 10)}, unix.SYS_PRLIMIT64, forkplan.Val(0),
			forkplan.Val(l.resource), forkplan.Ptr(&unix.Rlimit{Cur: l.value, Max: l.value}), forkplan.Val(0))
	}
	for _, sig := range ignoredSignals {
		b.call(forkplan.Where{Stage: "process", Op: "ignore " + unix.SignalName(sig)}, unix.SYS_RT_SIGACTION, forkplan.Val(sig),
			forkplan.Ptr(&kernelSigaction{sigIgn}), forkplan.Val(0), forkplan.Val(8))
	}
	// The bounding and ambient sets go before a prepared init waits for
	// its program, off the run's path: neither is needed to attach the
	// workspace, which the effective set still allows.
	w := func(op, path string) forkplan.Where { return forkplan.Where{Stage: "capabilities", Op: op, Path: path} }
	for c := 0; c <= b.facts.lastCap; c++ {
		b.call(w("drop bounding set", strconv.Itoa(c)), unix.SYS_PRCTL, forkplan.Val(unix.PR_CAPBSET_DROP), forkplan.Val(c))
	}
	b.call(w("clear ambient set", ""), unix.SYS_PRCTL, forkplan.Val(unix.PR_CAP_AMBIENT), forkplan.Val(unix.PR_CAP_AMBIENT_CLEAR_ALL), forkplan.Val(0),
		forkplan.Val(0), forkplan.Val(0))
	dir := forkplan.Str(cfg.Dir)
	if b.block != nil {
		b.awaitProgram()
		s := b.slot()
		b.p.Load(s, b.block.header(hdrDir))
		dir = forkplan.In(s)
	}
	b.call(forkplan.Where{Stage: "chdir", Op: "chdir (Cmd.Dir)", Path: cfg.Dir}, unix.SYS_CHDIR, dir)
	// A directory outside the root (reached through an inherited fd) reads
	// back as "(unreachable)/...".
	cwd := make([]byte, unix.PathMax)
	check := forkplan.Where{Stage: "chdir", Op: "check Cmd.Dir inside the root", Path: cfg.Dir}
	b.call(check, unix.SYS_GETCWD, forkplan.Buf(cwd), forkplan.Val(len(cwd)))
	b.p.Check(check, &cwd[0], '/', uintptr(unix.EXDEV))
	b.terminal()
	b.call(w("capset", ""), unix.SYS_CAPSET, forkplan.Ptr(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}),
		forkplan.Ptr(&[2]unix.CapUserData{}))
	b.call(w("prctl PR_SET_NO_NEW_PRIVS", ""), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_NO_NEW_PRIVS), forkplan.Val(1), forkplan.Val(0),
		forkplan.Val(0), forkplan.Val(0))
	b.call(forkplan.Where{Stage: "process", Op: "prctl PR_SET_PDEATHSIG"}, unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	b.call(forkplan.Where{Stage: "process", Op: "close_range"}, unix.SYS_CLOSE_RANGE, forkplan.Val(3), forkplan.Val(^uint(0)),
		forkplan.Val(unix.CLOSE_RANGE_CLOEXEC))
	b.filter()
}

// terminal adds the program's terminal: a pty of the sandbox's devpts
// as the program's 0, 1, 2 and controlling terminal, its master sent to
// the launcher.
func (b *planner) terminal() {
	ws := b.cfg.Terminal
	if ws == nil {
		return
	}
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "terminal", Op: op, Path: ptmxPath} }
	m, p := b.slot(), b.slot()
	b.call(w("open"), unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(ptmxPath),
		forkplan.Val(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)).Save(m)
	b.call(w("ioctl TIOCSPTLCK"), unix.SYS_IOCTL, forkplan.In(m), forkplan.Val(unix.TIOCSPTLCK), forkplan.Ptr(new(int32)))
	b.call(w("ioctl TIOCSWINSZ"), unix.SYS_IOCTL, forkplan.In(m), forkplan.Val(unix.TIOCSWINSZ),
		forkplan.Ptr(&unix.Winsize{Row: ws.Rows, Col: ws.Cols}))
	b.call(w("ioctl TIOCGPTPEER"), unix.SYS_IOCTL, forkplan.In(m), forkplan.Val(unix.TIOCGPTPEER),
		forkplan.Val(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)).Save(p)
	b.call(w("ioctl TIOCSCTTY"), unix.SYS_IOCTL, forkplan.In(p), forkplan.Val(unix.TIOCSCTTY), forkplan.Val(0))
	for fd := range 3 {
		b.call(w("dup3"), unix.SYS_DUP3, forkplan.In(p), forkplan.Val(fd), forkplan.Val(0))
	}
	b.close(p)
	// One marked byte carrying the master, as readVerdict takes it.
	oob := unix.UnixRights(-1)
	b.p.Store(m, (*int32)(unsafe.Pointer(&oob[unix.CmsgLen(0)])))
	mark := []byte{wire.TerminalMark}
	msg := &unix.Msghdr{Iov: &unix.Iovec{Base: &mark[0], Len: 1}, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	b.call(w("send master"), unix.SYS_SENDMSG, forkplan.Val(planConnFd), forkplan.Ptr(msg), forkplan.Val(unix.MSG_NOSIGNAL)).Want(1)
	b.close(m)
}

// filter adds the filter's load, last before the exec, and the hand-over
// of its listener.
func (b *planner) filter() {
	cfg := b.cfg
	if cfg.Seccomp == nil || !cfg.SeccompListen {
		// No listener to mark the end of setup: the exec mark does.
		b.call(forkplan.Where{Stage: "start", Op: "send exec mark"}, unix.SYS_SENDTO, forkplan.Val(planConnFd), forkplan.Buf([]byte{execMark}),
			forkplan.Val(1), forkplan.Val(unix.MSG_NOSIGNAL), forkplan.Val(0), forkplan.Val(0)).Want(1)
	}
	if cfg.Seccomp == nil {
		return
	}
	w := forkplan.Where{Stage: "seccomp", Op: "load filter"}
	raw, err := seccomp.Decode(cfg.Seccomp)
	if err == nil && len(raw) == 0 {
		err = errors.New("an empty filter")
	}
	if err != nil {
		b.fail(&wire.SetupError{Stage: "seccomp", Op: "decode filter", Text: err.Error()})
		return
	}
	prog := &unix.SockFprog{Len: uint16(len(raw)), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	flags := 0
	if cfg.SeccompListen {
		flags |= unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
		if b.facts.waitKillable {
			flags |= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
		}
	}
	lfd := b.slot()
	// prog points to raw, and msg below to the rest: keeping the outer
	// value keeps it all.
	b.call(w, unix.SYS_SECCOMP, forkplan.Val(unix.SECCOMP_SET_MODE_FILTER), forkplan.Val(flags), forkplan.Ptr(prog)).Save(lfd)
	if !cfg.SeccompListen {
		return
	}
	// One marked byte carrying the fd, as readVerdict takes it.
	oob := unix.UnixRights(-1)
	b.p.Store(lfd, (*int32)(unsafe.Pointer(&oob[unix.CmsgLen(0)])))
	mark := []byte{listenerMark}
	iov := &unix.Iovec{Base: &mark[0], Len: 1}
	msg := &unix.Msghdr{Iov: iov, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	b.call(forkplan.Where{Stage: "seccomp", Op: "send listener"}, unix.SYS_SENDMSG, forkplan.Val(planConnFd), forkplan.Ptr(msg),
		forkplan.Val(unix.MSG_NOSIGNAL)).Want(1)
	b.close(lfd)
}

// exec adds the program's execve, through the exec shim where there is
// one (execShim), tried at each place PATH gives: a missing file goes on
// to the next, one that cannot be executed is remembered (EACCES), and the
// last step fails with ENOENT or that.
func (b *planner) exec() {
	cfg := b.cfg
	if b.shim {
		b.execShim()
		return
	}
	seen := b.p.Slot(uintptr(unix.ENOENT))
	try := func(path string, c, argv, envv forkplan.Arg) {
		b.call(forkplan.Where{Stage: "exec", Op: "execve", Path: path}, unix.SYS_EXECVE, c, argv, envv).
			PassOn(uintptr(unix.ENOENT), uintptr(unix.ENOTDIR)).NoteOn(uintptr(unix.EACCES), seen)
	}
	if b.block == nil {
		argv, envv := forkplan.Strs(cfg.Args), forkplan.Strs(cfg.Env)
		for _, c := range programCandidates(cfg.Path, cfg.Env) {
			try(c, forkplan.Str(c), argv, envv)
		}
	} else {
		// The program is not known yet: its places, argv and envp are
		// loaded from the block it came in. The launcher names the
		// program in what fails here.
		load := func(i int) forkplan.Arg {
			s := b.slot()
			b.p.Load(s, b.block.header(i))
			return forkplan.In(s)
		}
		argv, envv := load(hdrArgv), load(hdrEnv)
		for i := range blockCandidates {
			try("", load(hdrCandidates+i), argv, envv)
		}
	}
	b.p.Fail(forkplan.Where{Stage: "exec", Op: "look up program", Path: cfg.Path}, seen)
}

// awaitProgram adds what a prepared init does once its sandbox is built:
// it tells the launcher, and waits for its program on the sync socket.
// The stdio that comes with it lands on 0-2, which are closed for it, and
// the workspace mount on planWorkspaceFd, the lowest fd free after them
// (3 and 4 are the launcher's sockets): received fds take the lowest free
// numbers, in order. The steps after it are a cold init's.
func (b *planner) awaitProgram() {
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "pool", Op: op} }
	b.call(w("report prepared"), unix.SYS_WRITE, forkplan.Val(planConnFd), forkplan.Buf([]byte{wire.PreparedMark}), forkplan.Val(1)).Want(1)
	for fd := range 3 {
		b.call(w("close stdio"), unix.SYS_CLOSE, forkplan.Val(fd))
	}
	nfds := 3
	if b.cfg.WorkspaceMount {
		nfds++
	}
	oob := make([]byte, unix.CmsgSpace(nfds*4))
	iov := &unix.Iovec{Base: &b.block.bytes()[0]}
	iov.SetLen(blockBytes)
	msg := &unix.Msghdr{Iov: iov, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	// The message keeps the block and oob alive in the plan. It comes
	// whole or not at all: the launcher gone, recvmsg reads 0 bytes and
	// no fds, which the check of fd 2 below fails on.
	b.call(w("read program"), unix.SYS_RECVMSG, forkplan.Val(planSyncFd), forkplan.Ptr(msg), forkplan.Val(0))
	b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planSyncFd))
	// Each is there, and not close-on-exec.
	b.call(w("take stdio"), unix.SYS_FCNTL, forkplan.Val(2), forkplan.Val(unix.F_GETFD)).Want(0)
	if !b.cfg.WorkspaceMount {
		return
	}
	b.call(w("take workspace mount"), unix.SYS_FCNTL, forkplan.Val(planWorkspaceFd), forkplan.Val(unix.F_GETFD)).Want(0)
	t := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: wire.DefaultDir}, unix.SYS_OPENAT2, forkplan.Val(unix.AT_FDCWD), forkplan.Str(wire.DefaultDir),
		forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
		forkplan.Val(unix.SizeofOpenHow)).Save(t)
	b.attach(b.p.Slot(planWorkspaceFd), t, wire.DefaultDir, false)
	b.close(t)
}

// startPlanned clones the init of cfg with the namespaces in flags, writes
// its id maps, puts it in grp, and lets it go; for a prepared init, it
// returns the way to give it its program. A config that cannot be built
// fails here, before anything is started.
func startPlanned(cfg *wire.Config, stdio [3]*os.File, conn *os.File, extra initFiles, grp cgroup.Group, flags uintptr) (*os.Process, *forkplan.Plan, *plannedProgram, *wire.SetupError) {
	// The sync socket: the child says on it that it runs, and waits on it
	// for its id maps, and a prepared one then for its program, which
	// comes as one message.
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, &wire.SetupError{Stage: "start", Op: "socketpair", Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	syncP, syncC := os.NewFile(uintptr(sp[0]), "sync-parent"), os.NewFile(uintptr(sp[1]), "sync-child")
	keepSync := false
	defer func() {
		if !keepSync {
			syncP.Close()
		}
	}()
	fds := planFds{conn: int(conn.Fd()), sync: int(syncC.Fd()), workspace: -1, proxy: -1, shim: -1}
	shim, err := shimFile()
	if err != nil {
		syncC.Close()
		return nil, nil, nil, &wire.SetupError{Stage: "start", Op: "make exec shim", Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	if shim != nil {
		fds.shim = int(shim.Fd())
	}
	for i, f := range stdio {
		fds.stdio[i] = int(f.Fd())
	}
	if extra.workspace != nil {
		fds.workspace = int(extra.workspace.Fd())
	}
	if extra.proxyChan != nil {
		fds.proxy = int(extra.proxyChan.Fd())
	}
	plan, block, se := planInit(cfg, fds)
	if se != nil {
		syncC.Close()
		return nil, nil, nil, se
	}
	var pidTo int32
	// A child that resets the oom_score_adj it inherited gets memory of
	// its own: the kernel applies a write of it to every process sharing
	// the writer's memory, which would reset the launcher's too.
	clone := forkplan.Clone{Flags: uint64(flags), CgroupFD: -1, Shared: !cfg.ResetOOMScore, PidTo: &pidTo}
	if grp != nil {
		clone.CgroupFD = grp.CloneFD()
	}
	// A shared child's Start returns once it has exec'd, so it is served
	// from here meanwhile, and the result waits in started.
	type result struct {
		pid int
		err error
	}
	started := make(chan result, 1)
	go func() {
		pid, err := plan.Start(clone)
		// The child has its copies of the fds by now, or there is no
		// child: without our end of sync, its reader sees EOF then.
		syncC.Close()
		runtime.KeepAlive(stdio)
		runtime.KeepAlive(conn)
		runtime.KeepAlive(extra)
		runtime.KeepAlive(shim)
		started <- result{pid, err}
	}()
	// The child's first byte: it runs, with its copies of the fds, so
	// ours of its end go now too (a shared child's Start has not returned
	// yet), before the run can end. EOF instead: the clone failed, or the
	// child failed before, and its failure record is on conn.
	runs := readByte(syncP)
	if runs {
		syncC.Close() // *os.File: the goroutine's second Close is harmless
	}
	if !runs {
		res := <-started
		if res.err != nil {
			return nil, nil, nil, &wire.SetupError{Stage: "clone", Op: "start init", Errno: sysutil.ErrnoOf(res.err), Text: res.err.Error()}
		}
		proc, se := findProcess(res.pid)
		return proc, plan, nil, se
	}
	pid := int(atomic.LoadInt32(&pidTo))
	proc, se := findProcess(pid)
	if se != nil {
		unix.Kill(pid, unix.SIGKILL)
		return nil, nil, nil, se
	}
	abort := func(se *wire.SetupError) (*os.Process, *forkplan.Plan, *plannedProgram, *wire.SetupError) {
		proc.Kill()
		proc.Wait()
		return nil, nil, nil, se
	}
	if err := writeIDMaps(pid, cfg.HostUID, cfg.HostGID, readHostFacts().root); err != nil {
		return abort(&wire.SetupError{Stage: "clone", Op: "write id maps", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
	}
	if grp != nil && clone.CgroupFD < 0 {
		if err := grp.Add(pid); err != nil {
			return abort(&wire.SetupError{Stage: "cgroup", Op: "add init", Path: grp.Path(), Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
	}
	if _, err := syncP.Write([]byte{1}); err != nil {
		return abort(&wire.SetupError{Stage: "clone", Op: "start init", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
	}
	if block == nil {
		return proc, plan, nil, nil
	}
	keepSync = true
	return proc, plan, &plannedProgram{sock: syncP, block: block}, nil
}

// readByte reads one byte from f, and says whether there was one.
func readByte(f *os.File) bool {
	_, err := io.ReadFull(f, make([]byte, 1))
	return err == nil
}

// findProcess is the child with pid, which this process has not yet
// waited for.
func findProcess(pid int) (*os.Process, *wire.SetupError) {
	proc, err := os.FindProcess(pid)
	if err != nil { // not on Linux: the pid is only looked up
		return nil, &wire.SetupError{Stage: "clone", Op: "find init", Text: err.Error()}
	}
	return proc, nil
}

// writeIDMaps maps the sandbox user and group of the user namespace of pid
// to hostUID and hostGID. A root launcher allows setgroups, so that the
// init can drop root's groups; any other must deny it to map its gid.
func writeIDMaps(pid, hostUID, hostGID int, root bool) error {
	setgroups := "deny"
	if root {
		setgroups = "allow"
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, f := range []struct{ name, content string }{
		{"uid_map", fmt.Sprintf("%d %d 1\n", wire.SandboxUID, hostUID)},
		{"setgroups", setgroups},
		{"gid_map", fmt.Sprintf("%d %d 1\n", wire.SandboxGID, hostGID)},
	} {
		if err := os.WriteFile(dir+f.name, []byte(f.content), 0); err != nil {
			return err
		}
	}
	return nil
}

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64, as
// rt_sigaction takes it: handler, flags, restorer and mask, a word each.
// sigIgn is SIG_IGN.
type kernelSigaction [4]uintptr

const sigIgn = 1
