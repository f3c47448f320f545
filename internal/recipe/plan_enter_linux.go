//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// CompileEntry compiles the steps of a process that enters a live
// sandbox, whose init's pidfd the launcher passes as target, to run cfg's
// Program there. The hostile code already inside had time to prepare for
// it, so the entrant is out of its reach until it is one of its own:
//
//   - The launcher's child (the forker) joins the sandbox's cgroup while
//     it still sees the host's files, then every namespace of the init at
//     once (setns of a pidfd), and forks: the PID namespace is a child's.
//     The forker has no pid inside, so nothing there can name it; it may
//     share the launcher's memory (forkplan's Shared), as it never enters
//     the PID namespace, and it exits once it has forked.
//   - The fork (CLONE_PARENT) is the entrant, the launcher's own child, so
//     the launcher reaps it and learns its status. It has a copy of the
//     memory, never the launcher's own: whatever reached it could change
//     only itself. It makes itself non-dumpable at once: until its exec,
//     /proc/PID/mem, fd, environ and ptrace need CAP_SYS_PTRACE over the
//     launcher's user namespace, which nothing inside has. Until then it
//     also holds capabilities the sandbox user lacks, which rules out
//     ptrace by itself.
//   - Its working directory and program are resolved from the sandbox's
//     root, which the mount namespace gives it: no path of the host, and
//     no descriptor but its stdio, the report socket and the exec shim
//     (both close-on-exec at the program's exec) is open in it.
//   - It has the sandbox's ids, no capability, no_new_privs and the
//     sandbox's filter before the exec shim's exec makes it dumpable.
//
// The launcher learns the entrant's pid from the credentials of the byte
// it sends on sync (SO_PASSCRED), and lets it go on with a byte back, once
// it is in the cgroup (wire/init.go's sequence, without id maps).
func CompileEntry(cfg *wire.Config, fds Fds, target int, join []string) (*forkplan.Plan, *wire.SetupError) {
	facts := readHostFacts()
	if facts.err != nil {
		return nil, &wire.SetupError{Stage: "enter", Op: "read the host's facts", Text: facts.err.Error()}
	}
	b := &planner{p: forkplan.New(planConnFd), cfg: cfg, facts: facts, join: join, tree: map[string]nodeKind{"/": nodeDir}, links: map[string]string{}}
	b.p.Grow(planSteps/2, planSlots/2)
	b.placeFds(fds, fdMove{target, planTargetFd, true})
	b.enter()
	b.programProcess()
	b.exec()
	if b.err != nil {
		return nil, b.err
	}
	return b.p, nil
}

// enter adds the steps from the launcher's copy to the sandbox user in
// every namespace of the live sandbox, in its cgroup.
func (b *planner) enter() {
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "enter", Op: op} }
	for _, f := range b.join {
		fd := b.slot()
		jw := forkplan.Where{Stage: "cgroup", Op: "join", Path: f}
		b.call(jw, unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(f), forkplan.Val(unix.O_WRONLY|unix.O_CLOEXEC)).Save(fd)
		b.call(jw, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf([]byte("0")), forkplan.Val(1)).Want(1)
		b.close(fd)
	}
	b.call(w("setns (the live sandbox's namespaces)"), unix.SYS_SETNS, forkplan.Val(planTargetFd), forkplan.Val(CloneFlags(b.cfg.HostNetwork)))
	b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planTargetFd))
	pid := b.p.Slot(^uintptr(0))
	b.call(w("fork into the PID namespace"), unix.SYS_CLONE, forkplan.Val(unix.CLONE_PARENT), forkplan.Val(0), forkplan.Val(0),
		forkplan.Val(0), forkplan.Val(0)).Save(pid)
	b.p.ExitUnlessZero(pid)
	// The entrant: a child of the launcher, in the sandbox's PID
	// namespace, with memory of its own. Out, one byte (with its pid in
	// the credentials); in, one byte: it is in its cgroup. EOF: the
	// launcher is gone.
	//
	// First its oom_score_adj, above the init's whatever it inherited,
	// so that the OOM killer takes it, and what it starts, before the
	// init, whose death would end the sandbox. Raising one needs no
	// privilege, only write access to /proc/self/oom_score_adj, which
	// is its user's while it is dumpable and root's after (a launcher
	// that is not root could not write it then). Its memory is its own:
	// a write applies to every process sharing the writer's.
	b.writeOOMScore("enter", EntrantOOMScoreAdj)
	b.call(w("prctl PR_SET_DUMPABLE"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_DUMPABLE), forkplan.Val(0))
	b.call(w("prctl PR_SET_PDEATHSIG"), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	b.handshake(w)
	b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planSyncFd))
	b.becomeSandboxUser(w)
	b.call(w("setsid"), unix.SYS_SETSID)
}
