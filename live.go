package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"
)

// Live keeps one sandbox running for all of the Sandbox's calls,
// Options.Live: its namespaces, root, /tmp, /workspace and processes last
// from the first call until Close, IdleTimeout or MaxLifetime. Each Run or
// Start enters it as a new process (see Sandbox.Start), and a process still
// running when its call returns, started in the background or with Start,
// keeps running. The cgroup limits (Options.Limits) bound everything alive
// in it together. Processes, Signal and DialContext see and reach what runs
// in it. Its calls and their processes share one sandbox user: one an
// earlier call left running can read a later call's environment (see the
// package doc's Live sandboxes), so keep credentials in Egress.Secrets.
// Should its init end, killed or with its spawner, the Sandbox closes, and
// its later calls fail with an error matching ErrClosed that says why. Not
// with InProcess (the running sandbox is held by the spawner). The zero
// value is a live sandbox with the default timeouts.
type Live struct {
	// IdleTimeout ends the live sandbox, and closes the Sandbox, once no
	// call has been in progress for this long (0: DefaultIdleTimeout;
	// negative: never): a Run until it returns, a Start until the process
	// runs, a Process's Wait while it waits, Processes, Signal and
	// DialContext. A process left running, in the background or by
	// Start, does not hold it off. Its calls then fail with an error
	// matching ErrExpired.
	IdleTimeout time.Duration
	// MaxLifetime ends the live sandbox, and closes the Sandbox, this
	// long after it started, whatever runs in it (0: no limit).
	MaxLifetime time.Duration
}

// ProcessInfo is one process alive in a live sandbox, as Processes sees
// it from outside.
type ProcessInfo struct {
	Pid  int      // inside the sandbox
	PPid int      // its parent's pid inside the sandbox; 0 for a process a call started
	Args []string // its command line, as it set it
	// State is its state as the kernel names it: "running",
	// "sleeping", "disk sleep", "stopped", "tracing stop", "zombie", ...
	State string
	CPU   time.Duration // user and system time it has used
	RSS   int64         // resident memory, in bytes
}

// Processes lists the processes alive in a live sandbox (Options.Live),
// but its init, in the order of their pids. It starts the live sandbox if
// no call has. On a Sandbox that is not live it returns an error matching
// ErrNotLive.
func (s *Sandbox) Processes(ctx context.Context) ([]ProcessInfo, error) {
	if err := s.liveCall(); err != nil {
		return nil, fmt.Errorf("sandbox: processes: %w", err)
	}
	return s.processes(ctx)
}

// Signal sends sig (a syscall.Signal) to the process with pid inside a
// live sandbox (Options.Live), as a kill(1) inside it would, except that
// its init (pid 1) cannot be signalled: Close ends it. A pid that names no
// process in it gives an error matching os.ErrProcessDone.
func (s *Sandbox) Signal(pid int, sig os.Signal) error {
	if err := s.liveCall(); err != nil {
		return fmt.Errorf("sandbox: signal: %w", err)
	}
	return s.signalInside(pid, sig)
}

// DialContext connects to a listener inside a live sandbox (Options.Live)
// from the host, as net.Dialer.DialContext would from inside it: network
// "tcp", "tcp4" or "tcp6" with an address on the sandbox's own loopback
// ("127.0.0.1:8000", "localhost:8000", "[::1]:8000"), or "unix" with a
// socket's absolute path inside the sandbox ("/tmp/app.sock"; "@name" for
// an abstract one). Nothing of the sandbox is exposed on the host's
// network; the returned connection is the caller's alone. A refused
// connection matches syscall.ECONNREFUSED, a missing socket file
// os.ErrNotExist. On a Sandbox that is not live it returns an error
// matching ErrNotLive.
func (s *Sandbox) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := s.liveCall(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return s.dial(ctx, network, address)
}

// liveCall checks that s can take a live sandbox's call.
func (s *Sandbox) liveCall() error {
	if s.err != nil {
		return s.err
	}
	if s.live == nil {
		return ErrNotLive
	}
	return nil
}
