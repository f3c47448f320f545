//go:build linux

package recipe

import (
	"strconv"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// identity waits for the launcher's id maps, becomes the sandbox user and
// keeps only initCaps.
func (b *planner) identity() {
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "process", Op: op} }
	b.call(w("prctl PR_SET_PDEATHSIG"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	// Into its cgroup before it builds anything, so that all it uses is
	// counted there, and with the launcher's ids, which own the files.
	for _, f := range b.join {
		fd := b.slot()
		jw := forkplan.Where{Stage: "cgroup", Op: "join", Path: f}
		b.call(jw, unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(f), forkplan.Val(unix.O_WRONLY|unix.O_CLOEXEC)).Save(fd)
		b.call(jw, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf([]byte("0")), forkplan.Val(1)).Want(1)
		b.close(fd)
	}
	// Out, one byte: the child runs; the launcher learns its pid and
	// writes its maps. In, one byte: the maps are written. EOF: the
	// launcher is gone.
	b.handshake(w)
	if b.block == nil { // a prepared init's program comes on it
		b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planSyncFd))
	}
	if b.cfg.ResetOOMScore {
		// While the child still has the launcher's ids, which own its
		// /proc/self; and in a child of its own memory (startInit),
		// since a write here is every sharer's.
		b.resetOOMScore("process")
	}
	b.becomeSandboxUser(w)
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

// EntrantOOMScoreAdj is the oom_score_adj of every process that enters a
// live sandbox (CompileEntry), the highest there is: within the sandbox's
// cgroup the OOM killer takes any of them before its init, which keeps
// the launcher's (0, or above), and whose death would end the sandbox.
const EntrantOOMScoreAdj = 1000

// resetOOMScore sets the child's oom_score_adj to 0, from the negative one
// it inherited, which would spare it and its program the OOM killer.
func (b *planner) resetOOMScore(stage string) { b.writeOOMScore(stage, 0) }

// writeOOMScore sets the child's oom_score_adj to adj.
func (b *planner) writeOOMScore(stage string, adj int) {
	const p = "/proc/self/oom_score_adj"
	w := forkplan.Where{Stage: stage, Op: "write", Path: p}
	fd := b.slot()
	val := []byte(strconv.Itoa(adj))
	b.call(w, unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(p), forkplan.Val(unix.O_WRONLY|unix.O_CLOEXEC)).Save(fd)
	b.call(w, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf(val), forkplan.Val(uintptr(len(val))))
	b.close(fd)
}

// handshake tells the launcher, in one byte on sync, that the child runs,
// and waits for its byte back: the launcher has done what it does for the
// child from outside (id maps, cgroup). EOF instead: the launcher is gone.
func (b *planner) handshake(w func(string) forkplan.Where) {
	b.call(w("tell the launcher"), unix.SYS_WRITE, forkplan.Val(planSyncFd), forkplan.Buf([]byte{1}), forkplan.Val(1)).Want(1)
	b.call(w("wait for the launcher"), unix.SYS_READ, forkplan.Val(planSyncFd), forkplan.Buf(make([]byte, 1)), forkplan.Val(1)).Want(1)
}

// becomeSandboxUser drops root's groups (where the launcher is root) and
// takes the sandbox's ids. A change of ids clears the parent-death
// signal: it is set again, then the child checks that the launcher did
// not die before (its end of the socket would read as EOF instead of
// EAGAIN).
func (b *planner) becomeSandboxUser(w func(string) forkplan.Where) {
	if b.facts.root {
		b.call(w("setgroups"), unix.SYS_SETGROUPS, forkplan.Val(0), forkplan.Val(0))
	}
	b.call(w("setresgid"), unix.SYS_SETRESGID, forkplan.Val(wire.SandboxGID), forkplan.Val(wire.SandboxGID), forkplan.Val(wire.SandboxGID))
	b.call(w("setresuid"), unix.SYS_SETRESUID, forkplan.Val(wire.SandboxUID), forkplan.Val(wire.SandboxUID), forkplan.Val(wire.SandboxUID))
	b.call(w("prctl PR_SET_PDEATHSIG"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	b.call(w("check the launcher lives"), unix.SYS_RECVFROM, forkplan.Val(planConnFd), forkplan.Buf(make([]byte, 1)), forkplan.Val(1),
		forkplan.Val(unix.MSG_DONTWAIT|unix.MSG_PEEK), forkplan.Val(0), forkplan.Val(0)).Want(1).PassOn(uintptr(unix.EAGAIN))
}
