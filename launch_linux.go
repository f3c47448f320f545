//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// handle is one sandbox as its starter sees it: in the process that cloned
// its init, or in the caller on the other side of the spawner.
//
// The init protocol. The launcher compiles the sandbox's plan, clones the
// init, which runs it (planned_linux.go), and talks to it over two socket
// pairs: conn, whose child end is the init's planConnFd, and sync, its
// planSyncFd.
//
//	launcher                             init (pid 1 of the new namespaces)
//	plan + clone (forkplan)           →  places its fds, arms its parent-death signal
//	                                  ←  sync: one byte, "I run"
//	id maps (+ cgroup.procs on v1)
//	sync: one byte, "go on"           →  (EOF instead: exit) becomes the sandbox user,
//	                                     builds the sandbox
//	                                  ←  a prepared init (cfg.Prepare): conn: wire.PreparedMark,
//	                                     then waits on sync for its program
//	                                     (planned_program_linux.go)
//	                                  ←  with a terminal (cfg.Terminal): wire.TerminalMark
//	                                     + SCM_RIGHTS(the pty's master)
//	                                  ←  setup done: the filter's listener, listenerMark
//	                                     + SCM_RIGHTS(its fd), or without one execMark,
//	                                     just before the filter
//	                                  ←  on failure: a forkplan failure record, exit 125
//	                                  ←  on success: nothing more; conn is close-on-exec,
//	                                     so the program's execve closes it (EOF)
//	                                     (EOF or a reset before a mark: the init died
//	                                     during setup)
//	wait4 → wire.Exit
type handle struct {
	ready chan *wire.SetupError // receives one value: nil once the program runs
	done  chan wire.Exit        // receives one value when the init has been reaped
	kill  func()                // kills the init, and so every process of the sandbox
	lost  error                 // set before done when the spawner died under the run

	// term is the master of the run's pty (cfg.Terminal), set before a
	// nil ready value is sent; whoever receives that value owns it.
	term *os.File

	// reported is closed by the spawner once it has told the caller of
	// done; the teardown of a run it serves waits for it (see launch).
	reported chan struct{}

	// For a prepared init (cfg.Prepare) only: prepared receives one value,
	// nil once the sandbox is built; then the init waits for one value on
	// program, or for program to be closed, which destroys it.
	prepared chan *wire.SetupError
	program  chan programFiles

	// For a prepared planned init only: where its program lands, and the
	// program encoded for it when it was taken from the pool.
	block *programBlock
	msg   []byte
}

// programFiles is the program a prepared init is to run, and its files:
// stdio, then the workspace mount when its Spec has WorkspaceMount.
type programFiles struct {
	p     wire.Program
	files []*os.File
}

func newHandle(kill func()) *handle {
	return &handle{ready: make(chan *wire.SetupError, 1), done: make(chan wire.Exit, 1), kill: kill, reported: make(chan struct{})}
}

// launch clones and starts the init of one sandbox with the given stdio
// and, for a run with an egress proxy, the init's end of the proxy channel
// (its fd 4; see egress_linux.go). It returns once the init is running;
// ready and done report the rest. What the run leaves for after done (its
// cgroup's removal) is counted in teardown until finished.
func launch(cfg *wire.Config, stdio [3]*os.File, extra initFiles, inProcess bool, teardown *tracker, warn func(string)) (*handle, *wire.SetupError) {
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
	fail := func(se *wire.SetupError) (*handle, *wire.SetupError) {
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
	proc, plan, pp, se := startPlanned(cfg, stdio, child, extra, grp, cloneFlagsFor(cfg.HostNetwork))
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
	h := newHandle(func() {
		if grp != nil {
			grp.Kill()
		}
		proc.Kill()
	})
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
		var given *wire.Program // a prepared planned init's program
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
			var l *seccomp.Listener
			l, h.term, se = readVerdict(parent, plan)
			if l != nil {
				var kill func()
				if cfg.SeccompKill {
					kill = h.kill
				}
				sv = supervise(l, cfg.Seccomp, kill)
			}
			nameProgram(se, given)
		}
		h.ready <- se
		parent.Close()
		ps, _ := proc.Wait() // the status is in ps whatever the error
		exit := exitOf(ps)
		if sv != nil {
			sv.stop(&exit)
		}
		if grp != nil {
			usageOf(grp, &exit)
		}
		exit.Limits = limits
		// In the spawner, off the run's return path: the cgroup is
		// empty, and nothing the caller is told depends on its removal.
		// An InProcess caller is often a one-shot tool that exits as
		// soon as Run returns, so there it goes first.
		if inProcess {
			removeGroup(grp, warn)
		}
		h.done <- exit
		// The spawner tells the caller first: on a small machine,
		// unmounting the tree and removing the cgroup take a CPU the
		// reply would otherwise wait for.
		if served && !inProcess {
			<-h.reported
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

// holdMountNS opens the mount namespace of a planned init, or returns nil
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

// initFiles are the files an init gets besides stdio and its config
// socket (fd 3), in this order from fd 4: the proxy channel, when
// cfg.ProxyPort is set, and the workspace mount, when cfg.WorkspaceMount is.
type initFiles struct {
	proxyChan, workspace *os.File
}

func (f initFiles) list() []*os.File {
	var l []*os.File
	for _, x := range []*os.File{f.proxyChan, f.workspace} {
		if x != nil {
			l = append(l, x)
		}
	}
	return l
}

// check holds the files to what cfg says the init will find.
func (f initFiles) check(cfg *wire.Config) *wire.SetupError {
	// A prepared init is given its workspace mount with its program.
	wantWorkspace := cfg.WorkspaceMount && !cfg.Prepare
	if (cfg.ProxyPort != 0) != (f.proxyChan != nil) || wantWorkspace != (f.workspace != nil) || cfg.Prepare && cfg.ProxyPort != 0 {
		return &wire.SetupError{Stage: "start", Op: "init files", Text: "the proxy channel and the workspace mount must come with their config, and only then"}
	}
	return nil
}

// initFilesFrom takes the files of a start request after stdio, as cfg
// says they come.
func initFilesFrom(cfg *wire.Config, files []*os.File) (initFiles, bool) {
	var f initFiles
	for _, slot := range []struct {
		want bool
		dst  **os.File
	}{{cfg.ProxyPort != 0, &f.proxyChan}, {cfg.WorkspaceMount, &f.workspace}} {
		if !slot.want {
			continue
		}
		if len(files) == 0 {
			return f, false
		}
		*slot.dst, files = files[0], files[1:]
	}
	return f, len(files) == 0
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

// initDiedOp marks the SetupError of an init that died during setup
// before it could report: Run tells why from its exit.
const initDiedOp = "init died during setup"

// readVerdict waits for the init: EOF alone means the program runs. The
// master of the run's pty, then a filter's listener, come first, each as
// one marked byte carrying the fd. A failure is a failure record of the
// step of plan that failed, after the mark that ends the setup (the
// listener's, or execMark). An init that
// dies during setup without a word (the OOM killer at a tiny memory limit,
// a write of its report failing for want of memory) shows as a reset
// connection, or as EOF before a mark: that is a SetupError with Op
// initDiedOp, which the caller explains with the init's exit.
func readVerdict(conn *os.File, plan *forkplan.Plan) (*seccomp.Listener, *os.File, *wire.SetupError) {
	var (
		marked   bool // the init sent the mark that ends its setup
		reply    []byte
		listener *seccomp.Listener
		term     *os.File
		buf      = make([]byte, 4096)
		oob      = make([]byte, unix.CmsgSpace(4))
	)
	fail := func(se *wire.SetupError) (*seccomp.Listener, *os.File, *wire.SetupError) {
		if listener != nil {
			listener.Close()
		}
		if term != nil {
			term.Close()
		}
		return nil, nil, se
	}
	for {
		n, oobn, _, _, err := unix.Recvmsg(int(conn.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECONNRESET && len(reply) == 0 {
			return fail(&wire.SetupError{Stage: "start", Op: initDiedOp, Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
		if err != nil {
			return fail(&wire.SetupError{Stage: "start", Op: "read init status", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
		data := buf[:n]
		for _, f := range sysutil.ReceivedFiles(oob[:oobn]) {
			if term == nil && listener == nil && len(reply) == 0 && len(data) > 0 && data[0] == wire.TerminalMark {
				data, term = data[1:], f
				continue
			}
			if listener != nil || len(reply) > 0 || len(data) == 0 || data[0] != listenerMark {
				f.Close()
				continue
			}
			data, marked = data[1:], true
			// A copy, so the listener's file is made non-blocking
			// and lands in the runtime's poller.
			fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			f.Close()
			if err == nil {
				listener, err = seccomp.NewListener(fd)
			}
			if err != nil {
				return fail(&wire.SetupError{Stage: "seccomp", Op: "take listener", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
			}
		}
		if n == 0 {
			break
		}
		if !marked && len(data) > 0 && data[0] == execMark {
			data, marked = data[1:], true
		}
		reply = append(reply, data...)
	}
	if !marked && len(reply) == 0 {
		return fail(&wire.SetupError{Stage: "start", Op: initDiedOp, Text: "the init ended before its setup was done"})
	}
	if len(reply) == 0 {
		return listener, term, nil
	}
	f, err := plan.ParseFailure(reply)
	if err != nil {
		return fail(&wire.SetupError{Stage: "start", Op: "read init status", Text: err.Error()})
	}
	return fail(&wire.SetupError{Stage: f.Where.Stage, Op: f.Where.Op, Path: f.Where.Path, Errno: int(f.Errno)})
}

func exitOf(ps *os.ProcessState) wire.Exit {
	var e wire.Exit
	if ps == nil {
		return e
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		e.Status = uint32(ws)
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		e.UserNS = ru.Utime.Nano()
		e.SysNS = ru.Stime.Nano()
		e.MaxRSSKiB = ru.Maxrss
	}
	return e
}
