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
	// The plan keeps prog, and prog keeps raw.
	b.call(w, unix.SYS_SECCOMP, forkplan.Val(unix.SECCOMP_SET_MODE_FILTER), forkplan.Val(flags), forkplan.Ptr(prog)).Save(lfd)
	if !cfg.SeccompListen {
		return
	}
	b.sendMarked(forkplan.Where{Stage: "seccomp", Op: "send listener"}, planConnFd, wire.ListenerMark, lfd)
	b.close(lfd)
}
