//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/execshim"
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// execShim adds the init's last steps where it has the exec shim: it
// execs the shim (internal/execshim), which execs the program. Until that
// exec the init is a clone of the caller's binary, and an execve resolves
// a script's interpreter line in the process that execs: the program
// exec'd from the init itself would have /proc/self/exe and /proc/1/exe
// name the caller's binary to its "#!" line. Exec'd from the shim, they
// name the shim, which refuses to be an interpreter.
//
// The shim tries the program's places as the init's own lookup does
// (exec), and reports its failure, on the init's report fd, as the plan's
// own "look up program" step: the launcher cannot tell the two apart, and
// ErrNotFound, a program that is not executable and their exit statuses
// stay as they are. The report fd stays open across the shim's exec only:
// the shim makes it close-on-exec before it execs the program.
func (b *planner) execShim() {
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "start", Op: op, Path: b.cfg.Path} }
	b.call(w("keep the report fd for the exec shim"), unix.SYS_FCNTL, forkplan.Val(planConnFd), forkplan.Val(unix.F_SETFD), forkplan.Val(0))
	argv, envv := forkplan.Arg{}, forkplan.Strs(b.cfg.Env)
	if b.block != nil {
		// The program is not known yet: the shim's argv is laid out in
		// the block with it, when it comes (ProgramBlock.encode).
		load := func(i int) forkplan.Arg {
			s := b.slot()
			b.p.Load(s, b.block.header(i))
			return forkplan.In(s)
		}
		argv, envv = load(hdrArgv), load(hdrEnv)
	}
	// The shim's exec is the next step, then the lookup's failure, which
	// the shim reports as its own.
	step := b.p.Len() + 1
	if b.block != nil {
		b.block.shimStep = step
	} else {
		// No place is empty, which would end the shim's list: a name
		// with a slash is one, and PATH's are joined to one.
		places := shimPlaces(b.cfg.Program)
		switch {
		case b.cfg.Hold:
			// Its own argv after the shim's, for a ps inside.
			argv = forkplan.Strs(append(execshim.HoldArgs(step), b.cfg.Args...))
		case len(places) == 0:
			// The shim would hold: a program with no place to be
			// in (a name, and no PATH) is not found.
			b.fail(&wire.SetupError{Stage: "exec", Op: "look up program", Path: b.cfg.Path, Errno: int(unix.ENOENT)})
			return
		default:
			argv = forkplan.Strs(execshim.Args(step, places, b.cfg.Args))
		}
	}
	b.call(w("exec the exec shim"), unix.SYS_EXECVEAT, forkplan.Val(planShimFd), forkplan.Str(""), argv, envv, forkplan.Val(unix.AT_EMPTY_PATH))
	if b.p.Len() != step {
		b.fail(&wire.SetupError{Stage: "start", Op: "plan the exec shim", Text: "the shim would report another step than its lookup"})
		return
	}
	// It reports ENOENT when no place exists, EACCES when one could not
	// be executed, or the error that ended its search.
	b.p.Fail(forkplan.Where{Stage: "exec", Op: "look up program", Path: b.cfg.Path}, b.p.Slot(uintptr(unix.ENOENT)))
}

// shimPlaces is where the exec shim is to look for p: none for a live
// sandbox's init, which makes the shim hold instead.
func shimPlaces(p wire.Program) []string {
	if p.Hold {
		return nil
	}
	return programCandidates(p.Path, p.Env)
}
