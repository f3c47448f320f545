//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

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
	iov.SetLen(BlockBytes)
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
