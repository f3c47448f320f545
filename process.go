package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Process is a program started in a sandbox by Sandbox.Start: a handle to
// wait for its Result and to signal or kill it while it runs, like an
// os.Process with os/exec's Wait. Its methods are safe for concurrent use.
type Process struct {
	// Set before Start returns it: how the launcher that started the
	// run (the spawner, or this process with InProcess)
	// delivers a signal, and kills the run.
	signal func(syscall.Signal) error
	kill   func()
	// holdIdle, for a process in a live sandbox, holds its idle
	// timeout off while a Wait waits, until the release it returns.
	holdIdle func() func()

	pid   int    // inside the sandbox, once it runs
	runID uint64 // the spawner's id of the run
	// hostPid is its pid on the host, for a live sandbox's init only:
	// the live sandbox keeps a pidfd of it.
	hostPid int

	ended atomic.Bool // the program's init has been reaped
	// startFailed says the program never ran, or the run was ended
	// before Start could return it (its ctx, its proxy or terminal
	// failing): Start waits for its end and says why.
	startFailed bool

	done   chan struct{} // closed once res and err are set
	res    *Result
	err    error
	logEnd func(*Result, error)
	// audit is the run's audit trail; nil without Options.Audit.
	audit *runAudit
}

// Start starts cmd in a new sandbox and returns once its program runs.
// Wait then returns what Run would have; Run is Start then Wait. In a live
// Sandbox (Options.Live) cmd enters the running sandbox as a process of
// its own instead: Wait waits for that process only, ctx's end or Kill
// kills it and its process group, and what it started in a session of its
// own lives on.
//
// The error is non-nil when the sandbox could not be built or the program
// could not be started, with the errors Run returns then (a program not
// found matches ErrNotFound; there is no Result to go with it). ctx bounds
// the whole run, not only the start: its end kills the run, and Wait's
// Result says Timeout or Canceled, as Run's would. The Cmd's Stdin is
// copied in and its Stdout and Stderr written to while it runs, from the
// start on, whether or not Wait is called.
func (s *Sandbox) Start(ctx context.Context, cmd *Cmd) (*Process, error) {
	p, err := s.start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if p.startFailed {
		// With Run's error, if it has one; else its Result says how
		// the run ended (its ctx's end, say), as Run's would.
		if _, err := p.Wait(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// start checks cmd and starts it; an error is one from before anything
// was started.
func (s *Sandbox) start(ctx context.Context, cmd *Cmd) (*Process, error) {
	if s.err != nil {
		return nil, s.err
	}
	if err := cmd.validate(); err != nil {
		return nil, err
	}
	if err := s.resolveImage(ctx); err != nil {
		return nil, err
	}
	if err := checkCommandLine(&s.cfg, cmd, s.root()); err != nil {
		return nil, err
	}
	cmd.used = true
	id := runIDs.Add(1)
	s.log.Debug("sandbox: run started", "run", id, "program", cmd.Path)
	begin := time.Now()
	p := &Process{done: make(chan struct{})}
	p.logEnd = func(res *Result, err error) { logRun(s.log, id, cmd, res, err, time.Since(begin)) }
	p.audit = s.audit.beginRun(ctx, id, cmd, &s.cfg, s.root())
	if err := s.startRun(ctx, cmd, p); err != nil {
		cmd.closeStdinPipe()
		p.audit.end(nil, err, runFacts{})
		p.logEnd(nil, err)
		return nil, err
	}
	return p, nil
}

// end records how the run ended, once every process of its sandbox is
// gone and its output copied.
func (p *Process) end(res *Result, err error) {
	p.ended.Store(true)
	p.res, p.err = res, err
	p.logEnd(res, err)
	close(p.done)
}

// Wait waits until every process of the sandbox has ended (in a live
// sandbox: the process Start started) and returns the Result, with the
// error, that Run would have returned. Later calls return the same.
func (p *Process) Wait() (*Result, error) {
	if p.holdIdle != nil {
		defer p.holdIdle()()
	}
	<-p.done
	return p.res, p.err
}

// Pid returns the program's process id inside its sandbox. In a sandbox
// of its own it is always 1: the sandbox's init runs no process of its
// own beside the program, it execs the program in its own place, so the
// program is the init of its PID namespace. In a live sandbox
// (Options.Live) it is the pid the process got when it entered. Its pid
// on the host is not given: nothing in the sandbox knows it, and the
// Process's methods reach it safely where a pid could name another
// process once it is gone.
func (p *Process) Pid() int { return p.pid }

// Signal sends sig (a syscall.Signal) to the program.
//
// The program is its PID namespace's init, and the kernel drops a signal
// sent to a namespace's init from outside when the init has no handler
// for it, SIGKILL and SIGSTOP excepted. Signal does what the signal does
// to any other process instead: a signal whose default action ends a
// process (SIGTERM, SIGINT, SIGHUP, SIGUSR1, ...) sent to a program that
// neither catches nor ignores it kills the run, and Wait's Result then
// has Outcome Signaled and that Signal; one whose default action stops a
// process (SIGTSTP, SIGTTIN, SIGTTOU) stops it as SIGSTOP would. A
// program that handles the signal gets it, and one that ignores it
// ignores it. SIGKILL kills the run as Kill does. Signal 0 only checks
// that the program has not ended.
//
// Signal returns an error matching os.ErrProcessDone once the run is
// known to be over; a signal that meets the run as it ends does nothing.
func (p *Process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok || s < 0 || s > maxSignal {
		return fmt.Errorf("sandbox: signal %v: %w", sig, errNotASignal)
	}
	if p.ended.Load() {
		return fmt.Errorf("sandbox: signal %v: %w", sig, os.ErrProcessDone)
	}
	if s == 0 {
		return nil
	}
	if err := p.signal(s); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("sandbox: signal %v: %w", sig, os.ErrProcessDone)
		}
		return fmt.Errorf("sandbox: signal %v: %w", sig, err)
	}
	return nil
}

// maxSignal is the highest signal number Linux has (SIGRTMAX).
const maxSignal = 64

var errNotASignal = errors.New("not a signal of this system: give a syscall.Signal from 0 to 64")

// Kill kills the program and every other process of its sandbox at once
// (in a live sandbox: the process and its process group); Wait's Result
// then has Outcome Signaled and Signal SIGKILL. It returns
// an error matching os.ErrProcessDone once the run is known to be over.
func (p *Process) Kill() error {
	if p.ended.Load() {
		return fmt.Errorf("sandbox: kill: %w", os.ErrProcessDone)
	}
	p.kill()
	return nil
}

// StdinPipe returns a pipe that is the program's standard input once it
// starts, like os/exec's: what is written to it the program reads, and
// closing it gives the program EOF (with a Terminal: what is written goes
// into the terminal, whose input has no end). Call it before Start, with
// Stdin unset. The pipe is closed once the run is over, if the caller
// has not closed it; a write to a program that reads no more blocks until
// it reads or the run ends, and a write after the run fails.
func (c *Cmd) StdinPipe() (io.WriteCloser, error) {
	switch {
	case c.Stdin != nil || c.stdinPipe != nil:
		return nil, optionErr("Cmd.Stdin", fmt.Sprint(c.Stdin), "is already set; StdinPipe makes it a pipe, so leave it nil")
	case c.used:
		return nil, optionErr("Cmd", c.Path, "was already started; call StdinPipe before Start")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: StdinPipe: %w", err)
	}
	c.stdinPipe = r
	c.stdinPipeW = &closeOnce{File: w}
	return c.stdinPipeW, nil
}

// closeStdinPipe closes both ends of the StdinPipe, if there is one.
func (c *Cmd) closeStdinPipe() {
	if c.stdinPipe != nil {
		c.stdinPipe.Close()
		c.stdinPipeW.Close()
	}
}

// closeOnce is the caller's end of a StdinPipe, which both the caller and
// the end of the run close.
type closeOnce struct {
	*os.File
	once sync.Once
	err  error
}

func (c *closeOnce) Close() error {
	c.once.Do(func() { c.err = c.File.Close() })
	return c.err
}
