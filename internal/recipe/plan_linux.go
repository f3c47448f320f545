//go:build linux

package recipe

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// The child's fds once the plan has placed them.
const (
	planConnFd      = 3 // the socket to the launcher; close-on-exec
	planSyncFd      = 4 // the launcher's go-ahead, once the id maps are written
	planWorkspaceFd = 5 // the session's workspace mount, when there is one
	planShimFd      = 6 // the exec shim (execShim), when there is one
	planProxyFd     = 7 // the proxy channel of an *Egress run (proxyListener)
	planTargetFd    = 8 // a pidfd of the live sandbox's init, for an entry (CompileEntry)
)

// The size of a sandbox's plan with the default options, with some
// room: made room for at once, a plan is not copied as it grows.
const (
	planSteps = 640
	planSlots = 256
)

// Fds are the launcher's fds the child starts from, which it places
// at the fds above.
type Fds struct {
	Stdio      [3]int
	Conn, Sync int
	Workspace  int // -1 without a session workspace
	Proxy      int // -1 without an egress proxy
	Shim       int // the exec shim's sealed memfd; -1 on an architecture without one
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
	join  []string // the cgroup files the init joins its cgroup through
	facts *hostFacts
	etc   []etcEntry          // the HostEtc paths the host has
	tree  map[string]nodeKind // by absolute path inside the sandbox
	links map[string]string   // the targets of the symlinks the plan made
	root  forkplan.Slot       // the new root's mount
	block *ProgramBlock       // a prepared init's: where its program lands
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

// Compile compiles cfg into the steps of its init, or returns why the
// sandbox cannot be built, as the child would have failed. The init
// starts from the launcher's fds, and joins its cgroup itself through
// join, the cgroup's JoinFiles, when there are any. A prepared init's
// plan (cfg.Prepare) waits for its program in block, which it returns.
func Compile(cfg *wire.Config, fds Fds, join []string) (*forkplan.Plan, *ProgramBlock, *wire.SetupError) {
	facts := readHostFacts()
	if facts.err != nil {
		return nil, nil, &wire.SetupError{Stage: "mount", Op: "read the host's system directories", Text: facts.err.Error(), Errno: sysutil.ErrnoOf(facts.err)}
	}
	b := &planner{p: forkplan.New(planConnFd), cfg: cfg, facts: facts, join: join, tree: map[string]nodeKind{"/": nodeDir}, links: map[string]string{}}
	b.p.Grow(planSteps, planSlots)
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

func (b *planner) call(w forkplan.Where, trap uintptr, args ...forkplan.Arg) forkplan.Step {
	return b.p.Call(w, trap, args...)
}

func (b *planner) slot() forkplan.Slot { return b.p.Slot(0) }

func (b *planner) close(s forkplan.Slot) {
	b.call(forkplan.Where{Stage: "process", Op: "close"}, unix.SYS_CLOSE, forkplan.In(s))
}

// sendMarked adds the send of one byte, mark, carrying the fd in slot fd
// as SCM_RIGHTS, on the socket at to: the way the init hands an fd over
// (internal/wire's marks).
func (b *planner) sendMarked(w forkplan.Where, to int, mark byte, fd forkplan.Slot) {
	oob := unix.UnixRights(-1)
	b.p.Store(fd, (*int32)(unsafe.Pointer(&oob[unix.CmsgLen(0)])))
	buf := []byte{mark}
	msg := &unix.Msghdr{Iov: &unix.Iovec{Base: &buf[0], Len: 1}, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	b.call(w, unix.SYS_SENDMSG, forkplan.Val(to), forkplan.Ptr(msg), forkplan.Val(unix.MSG_NOSIGNAL)).Want(1)
}

// fdMove is one inherited fd placed at the fd to, with close-on-exec or
// without.
type fdMove struct {
	from, to int
	cloexec  bool
}

// placeFds moves the child's inherited fds into the planned layout, with
// more in their places too, and closes every other fd it inherited from
// the launcher.
func (b *planner) placeFds(fds Fds, more ...fdMove) {
	type move = fdMove
	moves := []move{{fds.Stdio[0], 0, false}, {fds.Stdio[1], 1, false}, {fds.Stdio[2], 2, false},
		{fds.Conn, planConnFd, true}, {fds.Sync, planSyncFd, true}}
	if fds.Workspace >= 0 {
		moves = append(moves, move{fds.Workspace, planWorkspaceFd, true})
	}
	if b.shim = fds.Shim >= 0; b.shim {
		moves = append(moves, move{fds.Shim, planShimFd, true})
	}
	if fds.Proxy >= 0 {
		moves = append(moves, move{fds.Proxy, planProxyFd, true})
	}
	moves = append(moves, more...)
	// First above every source and target, so that no move overwrites a
	// source still to be moved.
	above := planTargetFd + 1
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
