//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

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
	if cfg.Hold {
		b.fail(&wire.SetupError{Stage: "start", Op: "hold the live sandbox", Text: "a live sandbox's init is the exec shim, which has no code for this architecture"})
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
