//go:build linux

package recipe

import (
	"errors"
	"unsafe"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// filter adds the filter's load, last before the exec, and the hand-over
// of its listener.
func (b *planner) filter() {
	cfg := b.cfg
	if cfg.Seccomp == nil || !cfg.SeccompListen {
		// No listener to mark the end of setup: the exec mark does.
		b.call(forkplan.Where{Stage: "start", Op: "send exec mark"}, unix.SYS_SENDTO, forkplan.Val(planConnFd), forkplan.Buf([]byte{wire.ExecMark}),
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
	mark := []byte{wire.ListenerMark}
	iov := &unix.Iovec{Base: &mark[0], Len: 1}
	msg := &unix.Msghdr{Iov: iov, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	b.call(forkplan.Where{Stage: "seccomp", Op: "send listener"}, unix.SYS_SENDMSG, forkplan.Val(planConnFd), forkplan.Ptr(msg),
		forkplan.Val(unix.MSG_NOSIGNAL)).Want(1)
	b.close(lfd)
}
