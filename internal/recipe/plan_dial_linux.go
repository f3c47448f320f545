//go:build linux

package recipe

import (
	"unsafe"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// CompileDial compiles the steps of a dialer: a copy of the launcher that
// joins the namespaces in flags of the live sandbox whose init's pidfd is
// target (its network namespace; its mount namespace too for a Unix
// socket, whose path is the sandbox's; none where the sandbox has the
// host's network), connects a stream socket of domain to addr, and sends
// it to the launcher on conn. It gives up after timeout. It is in no PID
// namespace of the sandbox, and so never seen from inside, and it
// execs nothing: it exits once the socket is sent.
func CompileDial(conn, target int, flags uintptr, domain int, addr []byte, timeout unix.Timeval, where string) (*forkplan.Plan, *wire.SetupError) {
	if len(addr) == 0 {
		return nil, &wire.SetupError{Stage: "dial", Op: "address", Path: where, Text: "no address"}
	}
	b := &planner{p: forkplan.New(planConnFd), cfg: &wire.Config{}}
	b.placeFds(Fds{Stdio: [3]int{conn, conn, conn}, Conn: conn, Sync: conn, Workspace: -1, Proxy: -1, Shim: -1}, fdMove{target, planTargetFd, true})
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "dial", Op: op, Path: where} }
	b.call(w("prctl PR_SET_DUMPABLE"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_DUMPABLE), forkplan.Val(0))
	if flags != 0 {
		b.call(w("setns (the live sandbox's namespaces)"), unix.SYS_SETNS, forkplan.Val(planTargetFd), forkplan.Val(flags))
	}
	b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planTargetFd))
	s := b.slot()
	b.call(w("socket"), unix.SYS_SOCKET, forkplan.Val(domain), forkplan.Val(unix.SOCK_STREAM|unix.SOCK_CLOEXEC), forkplan.Val(0)).Save(s)
	b.call(w("setsockopt SO_SNDTIMEO"), unix.SYS_SETSOCKOPT, forkplan.In(s), forkplan.Val(unix.SOL_SOCKET), forkplan.Val(unix.SO_SNDTIMEO),
		forkplan.Ptr(&timeout), forkplan.Val(unsafe.Sizeof(timeout)))
	b.call(w("connect"), unix.SYS_CONNECT, forkplan.In(s), forkplan.Buf(addr), forkplan.Val(len(addr)))
	b.sendMarked(w("send the connection"), planConnFd, wire.DialMark, s)
	b.call(w("exit"), unix.SYS_EXIT_GROUP, forkplan.Val(0))
	if b.err != nil {
		return nil, b.err
	}
	return b.p, nil
}
