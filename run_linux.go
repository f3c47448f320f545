//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// runStarted, when set, hears of every Run whose program started, by the
// owner name of its Sandbox, and whether it took a prepared sandbox.
// Nothing in the package sets it: the tests do, to check that a pooled
// Sandbox serves from its pool and that a refused Run started nothing.
var runStarted func(owner string, pooled bool)

// startRun builds cmd's sandbox and starts its program for p, and returns
// once the program runs or its start failed; p's Wait has the rest, which
// a goroutine of the run's own collects whether or not anyone waits. An
// error is one from before anything of the run was started.
func (s *Sandbox) startRun(ctx context.Context, cmd *Cmd, p *Process) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: run %q: %w", cmd.Path, err)
	}
	r := &liveRun{ctx: ctx, s: s, cmd: cmd, cfg: s.cfg.config(cmd, s.filter, s.root())}
	r.cfg.Hold = cmd.hold
	secrets, err := s.secrets.forRun(r.cfg, cmd, s.live != nil, s.cfg.MaxLifetime)
	if err != nil {
		return err
	}
	// A call of a live Sandbox enters its running sandbox (liveSandbox).
	r.enter = s.live != nil && !cmd.hold
	pool := s.cfg.Pool
	if r.enter {
		pool = 0
	}
	if cmd.Terminal != nil {
		rows, cols := cmd.Terminal.size()
		r.cfg.Terminal = &wire.Winsize{Rows: rows, Cols: cols}
		// A prepared sandbox's program has its stdio already; the
		// pty is made with the program, cold.
		pool = 0
	}
	if r.st, err = newStdio(cmd, orDefault(s.cfg.Limits.Output, DefaultOutputLimit)); err != nil {
		return err
	}
	// Until the run is handed to its goroutine, what it holds is let go
	// here.
	handed := false
	defer func() {
		if !handed {
			r.cleanUp()
		}
	}()

	var (
		wsMount *os.File
		release func()
		target  *liveSandbox
	)
	switch {
	case r.enter:
		target, release, err = s.live.beginCall(ctx, s)
	case cmd.hold:
		// Started by a call, which holds the session already.
		wsMount, release, err = s.sessionMount()
	default:
		wsMount, release, r.changes, err = s.forRun()
	}
	if err != nil {
		return err
	}
	r.release = release
	extra := launch.Files{Workspace: wsMount}
	r.cfg.WorkspaceMount = wsMount != nil

	if s.egress != nil && !r.enter {
		if r.px, err = newRunProxy(s.egress, s.cfg.EgressResolver, proxyCPUs(&s.cfg)); err != nil {
			wsMount.Close()
			return err
		}
		extra.ProxyChan = r.px.child
		secrets.serve(r.px.proxy)
		if p.audit != nil {
			r.px.proxy.OnRecord = p.audit.connection
		}
	}

	r.begin = time.Now()
	if s.cfg.InProcess {
		var se *wire.SetupError
		if r.h, se = launch.Launch(r.cfg, r.st.child, extra, true, &s.ws.teardown, func(text string) { s.log.Warn("sandbox: " + text) }); se != nil {
			s.root().nameImageRoot(se)
			err = setupError(se, r.cfg)
		}
	} else if r.enter {
		// The spawner that holds the running sandbox; if it died, the
		// sandbox died with it, and the call fails.
		if r.h, err = target.sp.start(ctx, r.cfg, r.st.child, extra, s.ws.owner, 0, target.id, p.audit.onEvents()); err != nil {
			err = target.explain(err)
		}
	} else {
		// A spawner found dead before the request went out is replaced
		// once; one that dies under a run fails that run.
		for attempt := 0; attempt < 2; attempt++ {
			var sp *spawnerClient
			if sp, err = theSpawner(s.log); err == nil {
				s.ws.spawned.Store(true)
				r.h, err = sp.start(ctx, r.cfg, r.st.child, extra, s.ws.owner, pool, 0, p.audit.onEvents())
			}
			if !errors.Is(err, errSpawnerGone) {
				break
			}
			s.log.Warn("sandbox: the spawner died before it read the run; starting it on a new one", "error", err)
		}
	}
	r.st.closeChild()
	if r.px != nil {
		r.px.closeChild()
	}
	// The init has its own copy of the workspace mount now; it stays
	// mounted there, and ours would only hold it up.
	wsMount.Close()
	if err != nil {
		return err
	}
	if cmd.hold {
		// A live sandbox's init holds its workspace for its whole
		// life; its calls hold the session each while they run.
		r.release()
		r.release = nil
	}
	r.st.copy()
	p.signal, p.kill = r.h.Signal, r.h.Kill

	// ctx ends the run at any point: kill, then collect what there is.
	r.ctxDone = ctx.Done()
	for ready := r.h.Ready; ready != nil; {
		select {
		case r.se = <-ready:
			ready = nil
			r.started()
		case <-r.ctxDone:
			r.cancel()
		}
	}
	p.pid, p.runID, p.hostPid = r.h.InnerPid, r.h.ID, r.h.Pid
	if r.enter {
		// Started: the process lives on whatever the session does, and
		// a reshape or Close ends it with the live sandbox.
		r.release()
		r.release = nil
		p.holdIdle = func() func() { return target.holdIdle(s) }
	}
	p.startFailed = r.se != nil || r.proxyErr != nil || r.termErr != nil || r.ctxErr != nil
	handed = true
	go func() {
		res, err := r.finish(p)
		if err != nil && r.enter {
			err = target.explain(err)
		}
		// Before the run lets go of its session, which Close waits for.
		p.audit.end(res, err, r.audited)
		r.cleanUp()
		p.end(res, err)
	}()
	return nil
}

// liveRun is one run of a Sandbox from its start to its Result, as the
// caller sees it.
type liveRun struct {
	ctx     context.Context
	ctxDone <-chan struct{} // ctx.Done() until it fired, then nil
	ctxErr  error           // why ctx ended the run
	s       *Sandbox
	cmd     *Cmd
	cfg     *wire.Config
	st      *stdio
	px      *runProxy
	release func()                 // the run's hold on its session
	changes func() ([]Change, int) // with SessionWorkspace.TrackChanges: lists the run's changes, before release
	enter   bool                   // a call entering the Sandbox's live sandbox
	h       *launch.Handle
	begin   time.Time

	se                *wire.SetupError // the start's failure, when it failed
	proxyErr, termErr error
	audited           runFacts // what the run's audit reports of its end besides the Result
}

// cancel kills the run for its ctx's end.
func (r *liveRun) cancel() {
	r.ctxErr, r.ctxDone = r.ctx.Err(), nil
	r.h.Kill()
}

// started sets up what serves a program that runs: its proxy, its
// terminal.
func (r *liveRun) started() {
	h, st := r.h, r.st
	if r.se == nil && r.px != nil {
		if r.proxyErr = r.px.start(); r.proxyErr != nil {
			h.Kill()
		}
	}
	if r.se == nil && st.tty != nil {
		if h.Term == nil {
			r.termErr = errors.New("sandbox: terminal: the sandbox's init sent no pty")
		} else {
			r.termErr = st.attach(h.Term, h.Kill)
		}
		if r.termErr != nil {
			h.Kill()
		}
	} else if h.Term != nil {
		h.Term.Close()
	}
	h.Term = nil
}

// cleanUp lets go of everything the run held, its Cmd's StdinPipe too.
func (r *liveRun) cleanUp() {
	r.cmd.closeStdinPipe()
	if r.px != nil {
		r.px.stop()
	}
	if r.release != nil {
		r.release()
	}
	r.st.close()
}

// finish waits for the run's end, until its ctx's, and returns what Run
// returns for it. p hears of the init's reaping at once.
func (r *liveRun) finish(p *Process) (*Result, error) {
	s, cfg, st, px, h, se := r.s, r.cfg, r.st, r.px, r.h, r.se
	var exit wire.Exit
	for done := h.Done; done != nil; {
		select {
		case exit = <-done:
			done = nil
			p.ended.Store(true)
		case <-r.ctxDone:
			r.cancel()
		case e := <-h.Events: // its own launcher's (InProcess)
			p.audit.events([]wire.Event{e})
		}
	}
	// Every event came before Done: the ones still queued go first.
	for queued := true; queued && h.Events != nil; {
		select {
		case e := <-h.Events:
			p.audit.events([]wire.Event{e})
		default:
			queued = false
		}
	}
	wall := time.Since(r.begin)
	if r.enter {
		// Its background processes may hold its output open long
		// after it ended.
		st.waitAfterExit(outputGrace)
	} else {
		st.wait()
	}
	ctxErr := r.ctxErr

	res := st.result()
	res.WallTime = wall
	res.UserTime = time.Duration(exit.UserNS)
	res.SystemTime = time.Duration(exit.SysNS)
	res.MaxRSS = exit.MaxRSSKiB << 10
	res.Pooled = exit.Pooled
	if se == nil && runStarted != nil {
		runStarted(s.ws.owner, res.Pooled)
	}
	res.CgroupCPU, res.MemoryPeak = time.Duration(exit.CgroupCPUNS), exit.MemoryPeak
	res.CPUTime = res.CgroupCPU
	if res.CPUTime == 0 {
		res.CPUTime = res.UserTime + res.SystemTime
	}
	res.OOMKills, res.PidsLimitHit = int(exit.OOMKills+exit.OOMKillsBefore), exit.PidsMax > 0
	res.Limits, res.Denials = exit.Limits, exit.Denials
	res.Violation = exit.Violation
	r.audited = runFacts{auditExec: s.cfg.AuditExec, execs: exit.Execs}
	if px != nil {
		res.Connections, res.ConnectionsDropped = px.stop()
	}
	if r.changes != nil {
		res.Changes, res.ChangesDropped = r.changes()
	}
	res.lists()
	if r.proxyErr != nil {
		return nil, r.proxyErr
	}
	if r.termErr != nil {
		return nil, r.termErr
	}
	ws := syscall.WaitStatus(exit.Status)
	res.ExitCode = -1
	switch {
	case exit.Violation != "" && se == nil:
		res.Outcome, res.Signal = SeccompKilled, ws.Signal()
		return res, nil
	case ctxErr != nil && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		// An end like any other: the Result says how, and the error is
		// kept for what kept the run from being made.
		res.Outcome, res.Signal = Canceled, ws.Signal()
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			res.Outcome = Timeout
		}
		return res, nil
	case se != nil && se.Op == wire.OpInitDied:
		return nil, initDied(ws, exit, cfg)
	case se != nil:
		s.root().nameImageRoot(se)
		err := setupError(se, cfg)
		if errors.Is(err, ErrNotFound) || errors.Is(err, unix.EACCES) && se.Stage == "exec" {
			res.Outcome, res.ExitCode = Exited, 127
			if !errors.Is(err, ErrNotFound) {
				res.ExitCode = 126
			}
			return res, err
		}
		return nil, err
	case ws.Exited():
		res.Outcome, res.ExitCode = Exited, ws.ExitStatus()
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && st.interrupted():
		// SIGINT's default action, which the kernel does not take for
		// a namespace's init (termInput).
		res.Outcome, res.Signal = Signaled, syscall.SIGINT
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && exit.DefaultSignal != 0:
		// A signal's default action, which the launcher took for the
		// kernel (Process.Signal).
		res.Outcome, res.Signal = Signaled, syscall.Signal(exit.DefaultSignal)
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && exit.OOMKills > 0:
		res.Outcome, res.Signal = OutOfMemory, ws.Signal()
	case ws.Signaled():
		res.Outcome, res.Signal = Signaled, ws.Signal()
	}
	if h.Lost != nil {
		return res, h.Lost
	}
	return res, nil
}

// initDied explains an init that died during setup before it could
// report, from how it ended.
func initDied(ws syscall.WaitStatus, exit wire.Exit, cfg *wire.Config) error {
	var why string
	switch {
	case exit.OOMKills > 0:
		why = fmt.Sprintf("killed by the OOM killer at the memory limit (Options.Limits.Memory, %d bytes)", cfg.Memory)
	case ws.Signaled():
		why = "killed by " + unix.SignalName(ws.Signal())
	case ws.Exited():
		why = fmt.Sprintf("exited with status %d without a report", ws.ExitStatus())
	default:
		why = "ended without a report"
	}
	if exit.OOMKills == 0 && cfg.Memory > 0 && exit.MemoryPeak >= cfg.Memory {
		why += fmt.Sprintf(", at its memory limit (Options.Limits.Memory, %d bytes)", cfg.Memory)
	}
	return &SetupError{Stage: "start", Op: "the sandbox's init died during setup", Err: errors.New(why)}
}

// noCgroupHint is what to do where no writable cgroup exists for a run's
// limits: the two fixes, as Run's refusal and Probe give them.
const noCgroupHint = "set Options.Limits.Policy = BestEffortLimits to run with rlimits standing in for the limits, " +
	"or delegate a cgroup v2 subtree to this user (systemd Delegate=yes; see Options.Limits.CgroupParent)"

// notFoundError is a program the init could not find. It matches
// ErrNotFound, and ENOENT (os.ErrNotExist).
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string   { return e.msg }
func (e *notFoundError) Unwrap() []error { return []error{ErrNotFound, unix.ENOENT} }

// notFound says where the program was looked for: at its path when it has
// a slash, else in the directories of PATH in env.
func notFound(prog string, env []string) error {
	if strings.Contains(prog, "/") {
		return &notFoundError{fmt.Sprintf("sandbox: program %q not found: no such file in the sandbox", prog)}
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return &notFoundError{fmt.Sprintf("sandbox: program %q not found in the sandbox's PATH (%s)", prog, path)}
}

// setupError rebuilds the init's error with its identity.
func setupError(se *wire.SetupError, cfg *wire.Config) error {
	var cause error = syscall.Errno(se.Errno)
	if se.Errno == 0 {
		cause = errors.New(se.Text)
	}
	switch {
	case se.Stage == "exec" && se.Op == "look up program" && se.Errno == int(unix.ENOENT):
		return notFound(se.Path, cfg.Env)
	case se.Stage == "exec" && se.Errno == int(unix.EACCES):
		return fmt.Errorf("sandbox: program %q is not executable in the sandbox: %w", se.Path, cause)
	case se.Stage == "clone" && se.Op == "write id maps":
		if ue := idMapUnsupported(cause); ue != nil {
			return ue
		}
		se.Op += fmt.Sprintf(" (sandbox uid %d to host uid %d, gid %d to host gid %d: a caller that is not root may map only its own ids,"+
			" and root only ids its own user namespace maps; see Options.HostUID)", SandboxUID, cfg.HostUID, SandboxGID, cfg.HostGID)
	case se.Stage == "clone":
		if ue := usernsUnsupported(cause); ue != nil {
			return ue
		}
	case se.Stage == "mount" && se.Op == "fsmount proc" && se.Errno == int(unix.EPERM):
		if ue := procMaskError(cause); ue != nil {
			return ue
		}
	case se.Stage == "cgroup" && se.Op == wire.OpNoCgroup:
		return &UnsupportedError{Feature: "cgroup limits (Options.Limits)", Reason: se.Text, Err: ErrNoCgroup, Hint: noCgroupHint}
	case se.Stage == "enter" && se.Errno == int(unix.EAGAIN) && cfg.Pids > 0:
		cause = fmt.Errorf("%w: the live sandbox's processes use all of its pids limit (Options.Limits.Pids %d); end some (Sandbox.Processes, Sandbox.Signal)", cause, cfg.Pids)
	case se.Stage == "spawner":
		return fmt.Errorf("sandbox: %w: %s", ErrSpawner, se.Text)
	case (se.Errno == int(unix.ENOMEM) || se.Errno == int(unix.ENFILE) || se.Errno == int(unix.ENOSPC) && se.Stage == "mount") && cfg.Memory > 0:
		// The setup's memory is charged to the run's cgroup from the
		// start: at a tiny limit a step fails for want of it, and a
		// write to one of the setup's own small tmpfs mounts (whose
		// pages are charged too) with ENOSPC, and a socket (whose
		// inode the limit refuses) with ENFILE.
		cause = fmt.Errorf("%w at the run's memory limit (Options.Limits.Memory %d bytes; at least %d are needed)", cause, cfg.Memory, MinMemory)
	case strings.HasPrefix(se.Op, "open source") && se.Errno == int(unix.EACCES):
		se.Op += fmt.Sprintf(" (the sandbox's host uid %d/gid %d must be able to reach it; see Options.HostUID)", cfg.HostUID, cfg.HostGID)
	}
	return &SetupError{Stage: se.Stage, Op: se.Op, Path: se.Path, Err: cause}
}

// stdio holds the pipes between the caller and one sandbox, or, for a
// Cmd with a Terminal, the master of the pty made in it.
type stdio struct {
	child   [3]*os.File // the sandbox's 0, 1, 2
	stdinW  *os.File    // our end of stdin
	stdin   io.Reader
	stop    [2]int // a pipe: closing stop[1] ends the copy of an *os.File stdin
	outR    [2]*os.File
	outW    [2]io.Writer
	capped  [2]*cappedBuffer
	counted [2]*countingWriter
	wg      sync.WaitGroup

	tty   *ttyState  // the Cmd's, when it has a Terminal; the child's stdio is then /dev/null
	input *termInput // the Terminal's input, once attached
}

// interrupted says whether the run was ended for an interrupt its
// program's init would have ignored (termInput).
func (st *stdio) interrupted() bool { return st.input != nil && st.input.interrupted.Load() }

func newStdio(cmd *Cmd, limit int64) (_ *stdio, err error) {
	st := &stdio{stop: [2]int{-1, -1}}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	st.stdin = cmd.Stdin
	if cmd.stdinPipe != nil && cmd.Terminal != nil {
		// Copied into the terminal, as any Stdin.
		st.stdin = cmd.stdinPipe
	}
	if f, ok := st.stdin.(*os.File); ok {
		if f == nil {
			st.stdin = nil
		} else {
			var p [2]int
			if err = unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return nil, fmt.Errorf("sandbox: stdin: %w", err)
			}
			st.stop = p
		}
	}
	if cmd.Terminal != nil {
		// The init puts the pty on 0, 1 and 2.
		st.tty = &cmd.tty
		for i := range st.child {
			if st.child[i], err = os.Open(os.DevNull); err != nil {
				return nil, fmt.Errorf("sandbox: stdio: %w", err)
			}
		}
	} else if cmd.stdinPipe != nil {
		// Ours, made for the run: the program reads it directly, and
		// it is closed with the run's other ends (closeChild), so that
		// a write once the program is gone fails.
		st.child[0] = cmd.stdinPipe
	} else if st.stdin == nil {
		st.child[0], err = os.Open(os.DevNull)
	} else {
		st.child[0], st.stdinW, err = os.Pipe()
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: stdin: %w", err)
	}
	for i, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		if cmd.Terminal == nil {
			if st.outR[i], st.child[i+1], err = os.Pipe(); err != nil {
				return nil, fmt.Errorf("sandbox: output pipe: %w", err)
			}
		}
		if w == nil {
			st.capped[i] = newCappedBuffer(limit)
			st.outW[i] = st.capped[i]
		} else {
			st.counted[i] = &countingWriter{w: w}
			st.outW[i] = st.counted[i]
		}
	}
	return st, nil
}

// copy starts moving stdin in and output out, through the pipes; a run
// with a terminal starts once its master is there (attach).
func (st *stdio) copy() {
	if st.stdinW != nil {
		st.copyIn(st.stdinW)
		st.stdinW = nil
	}
	for i := range st.outR {
		if st.outR[i] != nil {
			st.copyOut(st.outR[i], st.outW[i])
		}
	}
}

// copyIn starts copying stdin to w, which it closes at stdin's end. The
// copy is not waited for: a Reader that never returns must not hold up
// Run; once the run is over, w's reader is gone and its writes fail. An
// *os.File stdin is read only while the run lasts (st.stop).
func (st *stdio) copyIn(w io.WriteCloser) {
	if f, ok := st.stdin.(*os.File); ok {
		stop := st.stop[0]
		st.stop[0] = -1
		go copyFileIn(w, f, stop)
		return
	}
	go func(r io.Reader) {
		io.Copy(w, r)
		w.Close()
	}(st.stdin)
}

// copyOut copies r to w until r ends; wait waits for it.
func (st *stdio) copyOut(r io.Reader, w io.Writer) {
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		io.Copy(w, r)
	}()
}

// attach starts the copies of a terminal's run through master, the
// received master of the pty its init made: stdin into it, what it
// outputs to the Cmd's Stdout (or Result.Stdout). Reads of master end
// in EIO once every process of the sandbox has closed the pty.
func (st *stdio) attach(master *os.File, kill func()) error {
	master, err := pollableMaster(master)
	if err != nil {
		return fmt.Errorf("sandbox: terminal: %w", err)
	}
	st.tty.setMaster(master)
	st.input = &termInput{master: master, kill: kill}
	if st.stdin != nil {
		st.copyIn(noClose{st.input})
	}
	st.copyOut(master, st.outW[0])
	return nil
}

// noClose is a Writer whose Close does nothing: the end of stdin does not
// close a terminal.
type noClose struct{ io.Writer }

func (noClose) Close() error { return nil }

// wait returns once both output pipes reached EOF: every process of the
// sandbox is gone by then, so nothing holds their write ends.
func (st *stdio) wait() { st.wg.Wait() }

// outputGrace is how long the output of a live sandbox's call is read
// after its process ended, when something it started still holds it.
const outputGrace = 100 * time.Millisecond

// waitAfterExit returns once both output pipes reached EOF, or grace
// after that has not happened: processes the call left running in a live
// sandbox may hold the write ends for as long as they live. Their later
// writes then fail (EPIPE), as on a closed pipe.
func (st *stdio) waitAfterExit(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		st.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	for _, f := range st.outR {
		if f != nil {
			f.Close() // ends its copy, which a deadline would not for a blocking pipe
		}
	}
	if st.tty != nil {
		st.tty.end()
	}
	<-done
}

func (st *stdio) result() *Result {
	r := &Result{}
	outs := []*Output{&r.Stdout, &r.Stderr}
	truncs := []*bool{&r.StdoutTruncated, &r.StderrTruncated}
	counts := []*int64{&r.StdoutBytes, &r.StderrBytes}
	for i := range 2 {
		if b := st.capped[i]; b != nil {
			*outs[i], *truncs[i], *counts[i] = b.bytes(), b.truncated(), b.total
		} else {
			*counts[i] = st.counted[i].total
		}
	}
	return r
}

// closeChild closes our copies of the sandbox's ends.
func (st *stdio) closeChild() {
	for i, f := range st.child {
		if f != nil {
			f.Close()
			st.child[i] = nil
		}
	}
}

// close closes every end still open, the sandbox's too when the run
// failed before they were handed over, ends the copy of an *os.File stdin
// and closes a terminal's master.
func (st *stdio) close() {
	st.closeChild()
	for _, f := range append(st.outR[:], st.stdinW) {
		if f != nil {
			f.Close()
		}
	}
	for _, fd := range st.stop {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	st.stop = [2]int{-1, -1}
	if st.tty != nil {
		st.tty.end()
	}
}

// fillPool has the spawner prepare the Sandbox's pool (Pool) and
// waits until it is full. A preparation that fails is logged by the
// spawner (as are those of later refills); fillPool logs only a spawner
// that could not be started.
func (s *Sandbox) fillPool() error {
	ctx := context.Background()
	if s.image != nil {
		ctx = s.image.ctx
	}
	if err := s.resolveImage(ctx); err != nil {
		s.log.Warn("sandbox: the pool cannot be filled; runs start cold", "error", err)
		return err
	}
	sp, err := theSpawner(s.log)
	if err != nil {
		s.log.Warn("sandbox: the pool cannot be filled; runs start cold", "error", err)
		return err
	}
	// The sandbox of every Run: each brings its session's workspace
	// mount when the workspace is kept (forRun).
	spec := s.cfg.spec(s.filter, s.root())
	spec.WorkspaceMount = s.cfg.kept()
	s.ws.spawned.Store(true)
	return sp.fill(s.ws.owner, &spec, s.cfg.Pool)
}
