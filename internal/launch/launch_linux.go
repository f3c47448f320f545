//go:build linux

package launch

import (
	"fmt"
	"os"
	"strings"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// Handle is one sandbox as its starter sees it: in the process that
// cloned its init (the spawner, or an InProcess caller), or in the caller
// on the other side of the spawner, whose replies it delivers into one
// (NewHandle). The messages between the launcher and the init are
// internal/wire's, with its sequence diagram.
type Handle struct {
	Ready chan *wire.SetupError // receives one value: nil once the program runs
	Done  chan wire.Exit        // receives one value when the init has been reaped
	Kill  func()                // kills the init, and so every process of the sandbox
	Lost  error                 // set before Done when the spawner died under the run

	// Signal delivers a signal to the program (the init, in its place),
	// or takes its default action where the kernel would drop it (see
	// signaler); os.ErrProcessDone once the init has been reaped. Nil
	// until set, where no one can signal the run.
	Signal func(unix.Signal) error

	// Term is the master of the run's pty (Spec.Terminal), set before a
	// nil Ready value is sent; whoever receives that value owns it.
	Term *os.File

	// Events receives, with Spec.SeccompEvents, each refusal and exec
	// the run's supervisor saw, as it happens (see supervise), every one
	// before Done's value; nil otherwise. In the caller's Handle of a run
	// the spawner serves, OnEvents hears them instead, as the spawner's
	// Events replies arrive, each before Done's value; it is called from
	// the reader of every run's replies, and must not block.
	Events   chan wire.Event
	OnEvents func([]wire.Event)

	// Reported is closed by the spawner once it has told the caller of
	// Done; the teardown of a run it serves waits for it (see Launch).
	Reported chan struct{}

	// ID is the run's id at the spawner, in the caller's Handle of a run
	// the spawner serves.
	ID uint64

	// Pid is the process the launcher started, in its own PID namespace,
	// and InnerPid the same in the sandbox's: 1 for an init, which the
	// program becomes; an entrant's own for Enter.
	Pid, InnerPid int

	// live is set for a live sandbox's init (Program.Hold): what Enter
	// needs of it. A prepared init has it in holdable until it is given
	// its program.
	live, holdable *liveInit

	// For a prepared init (Config.Prepare) only: prepared receives one
	// value, nil once the sandbox is built; then the init waits for one
	// value on program, or for program to be closed, which destroys it.
	prepared chan *wire.SetupError
	program  chan programFiles

	// Where a prepared init's program lands, and the program encoded for
	// it when the pool took it (Take).
	block *recipe.ProgramBlock
	msg   []byte
}

// programFiles is the program a prepared init is to run, and its files:
// stdio, then the workspace mount when its Spec has WorkspaceMount.
type programFiles struct {
	p     wire.Program
	files []*os.File
}

// NewHandle is the Handle of a sandbox that kill kills, with its channels
// made.
func NewHandle(kill func()) *Handle {
	return &Handle{Ready: make(chan *wire.SetupError, 1), Done: make(chan wire.Exit, 1), Kill: kill, Reported: make(chan struct{})}
}

// Launch clones and starts the init of one sandbox with the given stdio
// and extra files. It returns once the init is running; Ready and Done
// report the rest. What the run leaves for after Done (its cgroup's
// removal) is counted in teardown until finished. inProcess says the
// launcher is the caller itself (InProcess), which removes the cgroup
// before it reports Done; warn hears what went wrong off the run's path.
func Launch(cfg *wire.Config, stdio [3]*os.File, extra Files, inProcess bool, teardown *sysutil.Tracker, warn func(string)) (*Handle, *wire.SetupError) {
	if se := extra.check(cfg); se != nil {
		return nil, se
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &wire.SetupError{Stage: "start", Op: "socketpair", Errno: sysutil.ErrnoOf(err)}
	}
	parent, child := os.NewFile(uintptr(fds[0]), "init-parent"), os.NewFile(uintptr(fds[1]), "init-child")
	cfg.ResetOOMScore = inheritsNegativeOOMScore()
	grp, limits, se := applyLimits(cfg)
	if se != nil {
		parent.Close()
		child.Close()
		return nil, se
	}
	fail := func(se *wire.SetupError) (*Handle, *wire.SetupError) {
		parent.Close()
		child.Close()
		if grp != nil {
			grp.Delete()
		}
		return nil, se
	}
	// The child runs the plan without a runtime of its own: no start of
	// the caller's binary, and, sharing the caller's memory where it can
	// (forkplan.SharesMemory), no copy of its page tables, however large
	// the caller.
	proc, plan, pp, se := startInit(cfg, stdio, child, extra, grp, recipe.CloneFlags(cfg.HostNetwork))
	if se != nil {
		return fail(se)
	}
	child.Close()
	// The caller returns at once in process: nothing to hold it for.
	var mntNS *os.File
	if !inProcess {
		mntNS = holdMountNS(proc.Pid)
	}
	// Killing pid 1 makes the kernel kill every other process in its PID
	// namespace, daemons included; cgroup.kill (v2) gets them all at once.
	h := NewHandle(func() {
		if grp != nil {
			grp.Kill()
		}
		proc.Kill()
	})
	h.Pid, h.InnerPid = proc.Pid, 1
	// Opened while the init cannot yet have been reaped, so that it names
	// the init alone; a prepared init may be given a Hold program later.
	if cfg.Hold || cfg.Prepare {
		pidfd, err := unix.PidfdOpen(proc.Pid, 0)
		if err != nil {
			proc.Kill()
			proc.Wait()
			return fail(&wire.SetupError{Stage: "start", Op: "pidfd_open (the sandbox's init)", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
		h.holdable = &liveInit{pidfd: pidfd, pid: proc.Pid, grp: grp, hostNetwork: cfg.HostNetwork, limits: limits}
		if grp != nil {
			var now wire.Exit
			usageOf(grp, &now)
			h.holdable.oomTold, h.holdable.oomAlive = now.OOMKills, now.OOMKills
		}
		if cfg.Hold {
			h.makeLive()
		}
	}
	if cfg.SeccompEvents {
		h.Events = make(chan wire.Event, eventsBuffer)
	}
	sg := &signaler{init: proc, kill: h.Kill}
	h.Signal = sg.signal
	if cfg.Prepare {
		h.prepared, h.program = make(chan *wire.SetupError, 1), make(chan programFiles)
		if pp != nil {
			h.block = pp.block
		}
	}
	teardown.Add(1)
	go func() {
		defer teardown.Done()
		var se *wire.SetupError
		var given *wire.Program // a prepared init's program
		served := !cfg.Prepare  // a start the spawner reports, not a prepared sandbox destroyed unused
		if se == nil && cfg.Prepare {
			se = awaitPrepared(parent, plan)
			h.prepared <- se
			var p *wire.Program
			if se == nil {
				p, se = giveProgram(h, proc, pp.send(h))
				given = p
			}
			served = p != nil
			pp.sock.Close()
		}
		var sv *supervisor
		if se == nil {
			_, h.Term, se = readVerdict(parent, plan, func(l *seccomp.Listener) {
				var kill func()
				if cfg.SeccompKill {
					kill = h.Kill
				}
				sv = supervise(l, cfg.Seccomp, kill, h.Events)
			})
			recipe.NameProgram(se, given)
		}
		plan.Release()
		h.Ready <- se
		parent.Close()
		ps, _ := proc.Wait() // the status is in ps whatever the error
		if h.holdable != nil {
			h.holdable.close()
		}
		exit := exitOf(ps)
		if ws := unix.WaitStatus(exit.Status); ws.Signaled() && ws.Signal() == unix.SIGKILL {
			exit.DefaultSignal = int(sg.taken.Load())
		}
		if sv != nil {
			sv.stop(&exit)
		}
		if grp != nil {
			usageOf(grp, &exit)
			if h.live != nil {
				// Those from when it was last seen alive, which its
				// own is among if the OOM killer took it; the earlier
				// ones were its calls'.
				exit.OOMKills = h.live.killsSinceAlive(exit.OOMKills)
			}
		}
		exit.Limits = limits
		// In the spawner, off the run's return path: the cgroup is
		// empty, and nothing the caller is told depends on its removal.
		// An InProcess caller is often a one-shot tool that exits as
		// soon as Run returns, so there it goes first.
		if inProcess {
			removeGroup(grp, warn)
		}
		h.Done <- exit
		// The spawner tells the caller first: on a small machine,
		// unmounting the tree and removing the cgroup take a CPU the
		// reply would otherwise wait for.
		if served && !inProcess {
			<-h.Reported
		}
		if mntNS != nil {
			mntNS.Close()
		}
		if !inProcess {
			removeGroup(grp, warn)
		}
	}()
	return h, nil
}

// holdMountNS opens the mount namespace of an init, or returns nil
// if it cannot. Held until the run is reported, it makes the last exit in
// the sandbox drop a reference instead of unmounting the whole tree on the
// way to the reply (a third of a millisecond here); the close does it
// afterwards. Nothing is reached through it: it is closed unused.
func holdMountNS(pid int) *os.File {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return nil
	}
	return f
}

// removeGroup removes a run's emptied cgroup, if it had one, and tells
// warn if it could not.
func removeGroup(grp cgroup.Group, warn func(string)) {
	if grp == nil {
		return
	}
	if err := grp.Delete(); err != nil {
		warn(fmt.Sprintf("remove the run's cgroup %s: %v", grp.Path(), err))
	}
}

// inheritsNegativeOOMScore reports whether this process, and so the init
// it clones, has a negative oom_score_adj (a supervisor's -1000, say).
func inheritsNegativeOOMScore() bool {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return true // let the init check for itself
	}
	return strings.HasPrefix(string(b), "-")
}
