//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/fumehood/sandbox/internal/sysutil"
	"golang.org/x/sys/unix"
)

// liveSandbox is the running sandbox of a live Sandbox (Options.Live), as
// the caller holds it: the run of its init, which holds its namespaces
// and reaps its orphans (wire.Program.Hold), in the spawner that started
// it; every call enters it there (launch.Enter). It is started at the
// first call and ends with Close, its idle timeout or its lifetime.
type liveSandbox struct {
	mu    sync.Mutex
	init  *Process       // the init's run, nil until the first call
	sp    *spawnerClient // the spawner holding it
	id    uint64         // the init's run id there
	calls int            // calls in flight, and Waits for processes in it
	// Its init on the host, for Processes and Signal: a pidfd that keeps
	// its pid from naming anything else while it lives, and its PID
	// namespace, which names the processes in the sandbox.
	pidfd int // -1 when there is none
	pidNS nsID
	ended error // why it ended, once it has; every later call fails with it
	// watched is closed once the watch of the running init (watch) has
	// seen it end, and set ended if it ended on its own.
	watched chan struct{}
	idle    *time.Timer
	life    *time.Timer
}

// beginCall readies the live sandbox for one call, starting it if it is
// not running, and returns it with the release to call when the call is
// done with it. Meanwhile the call holds the session as a Run does
// (forRun), so that a reshape or Close waits for it, and holds off the
// idle timeout. A call that starts a process is done once it runs: the
// process then lives on as one left in the background does, and only
// a Wait for it holds the timeout off again (holdIdle).
func (l *liveSandbox) beginCall(ctx context.Context, s *Sandbox) (*liveSandbox, func(), error) {
	ss := s.ws
	ss.mu.RLock()
	if ss.closed {
		ss.mu.RUnlock()
		l.mu.Lock()
		err := l.ended
		l.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("sandbox: run: %w", ErrClosed)
		}
		return nil, nil, err
	}
	if err := l.ensure(ctx, s); err != nil {
		ss.mu.RUnlock()
		return nil, nil, err
	}
	idle := l.holdIdle(s)
	var once sync.Once
	return l, func() {
		once.Do(func() {
			idle()
			ss.mu.RUnlock()
		})
	}, nil
}

// holdIdle holds the idle timeout off until the release it returns is
// called.
func (l *liveSandbox) holdIdle(s *Sandbox) func() {
	l.mu.Lock()
	l.calls++
	if l.idle != nil {
		l.idle.Stop()
	}
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.calls--
			if l.calls == 0 && l.idle != nil && l.ended == nil {
				l.idle.Reset(idleTimeout(&s.cfg))
			}
			l.mu.Unlock()
		})
	}
}

// idleTimeout is Options.Live.IdleTimeout with its default; negative: never.
func idleTimeout(o *resolved) time.Duration {
	if o.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return o.IdleTimeout
}

// ensure starts the live sandbox if none runs. The caller holds the
// session's read lock, which keeps Close and the reshapes out.
func (l *liveSandbox) ensure(ctx context.Context, s *Sandbox) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return l.ended
	}
	if l.init != nil {
		if !l.init.ended.Load() {
			return nil
		}
		// It died under us, and its watch has yet to say so: what
		// ran in it is gone, which no call must miss.
		l.ended = initEnded(l.init.Wait())
		return l.ended
	}
	sp, err := theSpawner(s.log)
	if err != nil {
		return err
	}
	cmd := &Cmd{Path: liveInitName, Args: []string{liveInitName}, hold: true}
	// The init outlives ctx, which bounds only the call that started it.
	p, err := s.start(context.WithoutCancel(ctx), cmd)
	if err != nil {
		return fmt.Errorf("sandbox: start the live sandbox: %w", err)
	}
	if p.startFailed {
		_, err := p.Wait()
		if err == nil {
			err = errors.New("its init ended at once")
		}
		return fmt.Errorf("sandbox: start the live sandbox: %w", err)
	}
	ns, pidfd, err := openInit(p.hostPid)
	if err != nil {
		p.Kill()
		p.Wait()
		return fmt.Errorf("sandbox: start the live sandbox: %w", err)
	}
	l.init, l.sp = p, sp
	l.id, l.pidfd, l.pidNS = p.runID, pidfd, ns
	l.watched = make(chan struct{})
	go l.watch(s, p, l.watched)
	if d := idleTimeout(&s.cfg); d > 0 {
		l.idle = time.AfterFunc(d, func() { l.expire(s, "idle for "+d.String()+" (Options.Live.IdleTimeout)", true) })
		l.idle.Stop() // armed when its calls are over
	}
	if d := s.cfg.MaxLifetime; d > 0 {
		l.life = time.AfterFunc(d, func() { l.expire(s, "its maximum lifetime of "+d.String()+" passed (Options.Live.MaxLifetime)", false) })
	}
	return nil
}

// liveInitName is the live sandbox's init's name in its Process's log.
const liveInitName = "sandbox-live-init"

// expire ends the live sandbox and closes the Sandbox, for why; an idle
// expiry does nothing if a call began meanwhile.
func (l *liveSandbox) expire(s *Sandbox, why string, idle bool) {
	l.mu.Lock()
	if l.ended != nil || idle && l.calls > 0 {
		l.mu.Unlock()
		return
	}
	l.ended = fmt.Errorf("sandbox: the live sandbox ended: %s: %w", why, expiredError{})
	l.mu.Unlock()
	s.log.Info("sandbox: live sandbox expired", "why", why)
	s.Close()
}

// watch waits for the end of the live sandbox's init p. If it ended on
// its own (killed, by the OOM killer or from outside; its spawner gone),
// everything in the sandbox ended with it: the Sandbox closes, as an
// expiry closes it, and every later call fails saying why.
func (l *liveSandbox) watch(s *Sandbox, p *Process, watched chan struct{}) {
	res, err := p.Wait()
	l.mu.Lock()
	// Not stopped (stop forgets it first); a call may have found it
	// ended already (ensure).
	own := l.init == p
	if own && l.ended == nil {
		l.ended = initEnded(res, err)
	}
	why := l.ended
	l.mu.Unlock()
	close(watched)
	if own {
		s.log.Warn("sandbox: the live sandbox ended", "why", why)
		s.Close()
	}
}

// initEnded is the error every call fails with once the live sandbox's
// init ended on its own, as res and err tell; it matches ErrClosed.
func initEnded(res *Result, err error) error {
	why := "its init ended"
	switch {
	case err != nil:
		why += ": " + err.Error()
	case res == nil:
	case res.Outcome == OutOfMemory:
		why = "its init was killed by the OOM killer at the memory limit (Options.Limits.Memory)"
	case res.Outcome == Signaled:
		why = "its init was killed by " + unix.SignalName(res.Signal)
	case res.Outcome == Exited:
		why = fmt.Sprintf("its init exited with status %d", res.ExitCode)
	default:
		why += " (" + res.Outcome.String() + ")"
	}
	return fmt.Errorf("sandbox: the live sandbox ended: %s, and everything in it with it; make a new Sandbox: %w", why, ErrClosed)
}

// explain is err, which a call met in the live sandbox, or, if its init
// has ended meanwhile, why the live sandbox ended: a call that raced
// with its end fails as every later one will.
func (l *liveSandbox) explain(err error) error {
	l.mu.Lock()
	if l.ended != nil {
		defer l.mu.Unlock()
		return l.ended
	}
	watched, ended := l.watched, l.pidfd >= 0 && sysutil.Exited(l.pidfd, l.init.hostPid)
	l.mu.Unlock()
	if watched == nil || !ended {
		return err
	}
	<-watched
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		return l.ended
	}
	return err
}

// expiredError matches ErrExpired and ErrClosed.
type expiredError struct{}

func (expiredError) Error() string   { return ErrExpired.Error() }
func (expiredError) Unwrap() []error { return []error{ErrExpired, ErrClosed} }

// stop kills the live sandbox, every process in it, and waits until its
// init has been reaped; the next call starts a new one unless err, which
// every later call then fails with, is set.
func (l *liveSandbox) stop(err error) {
	l.mu.Lock()
	p := l.init
	l.init = nil
	if err != nil && l.ended == nil {
		l.ended = err
	}
	for _, t := range []*time.Timer{l.idle, l.life} {
		if t != nil {
			t.Stop()
		}
	}
	l.idle, l.life = nil, nil
	pidfd := l.pidfd
	l.pidfd = -1
	l.mu.Unlock()
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if p != nil {
		p.Kill()
		p.Wait()
	}
}

// nsID names a namespace: the device and inode of its /proc/PID/ns link.
type nsID struct{ dev, ino uint64 }

// nsOf is the PID namespace of host process pid.
func nsOf(pid int) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/pid", &st); err != nil {
		return nsID{}, err
	}
	return nsID{st.Dev, st.Ino}, nil
}

// openInit opens a pidfd of the live sandbox's init, host pid pid, and
// reads its PID namespace; the pidfd, still naming a live process after
// the read, shows the namespace read was the init's.
func openInit(pid int) (nsID, int, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nsID{}, -1, fmt.Errorf("pidfd_open of its init: %w", err)
	}
	ns, err := nsOf(pid)
	if err == nil {
		err = unix.PidfdSendSignal(pidfd, 0, nil, 0)
	}
	if err != nil {
		unix.Close(pidfd)
		return nsID{}, -1, fmt.Errorf("read its init's PID namespace: %w", err)
	}
	return ns, pidfd, nil
}

// alive says whether the live sandbox's init, and so the sandbox, lives.
func (l *liveSandbox) alive() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pidfd >= 0 && !sysutil.Exited(l.pidfd, l.init.hostPid)
}

func newLiveSandbox() *liveSandbox { return &liveSandbox{pidfd: -1} }
