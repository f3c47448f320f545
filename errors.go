package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrNotSupported is matched (with errors.Is) by every error that says this
// host cannot provide a protection the sandbox needs. The error is an
// *UnsupportedError that names the feature, what is missing and how to
// enable it.
var ErrNotSupported = errors.New("not supported on this host")

// ErrInvalidOption is matched by every error about a wrong Options or Cmd
// field. The error is an *OptionError naming the field.
var ErrInvalidOption = errors.New("invalid option")

// ErrNotFound is matched when the program to run does not exist inside the
// sandbox or is not executable there. It is exec.ErrNotFound, so code written
// for os/exec keeps working. The Result returned alongside has exit code 127
// (not found) or 126 (found but not executable), as a shell would report.
var ErrNotFound = exec.ErrNotFound

// ErrNoCgroup is matched, along with ErrNotSupported, when Run refuses
// because no cgroup this process may write exists for the run's limits
// (see Options.Limits.Policy).
var ErrNoCgroup = errors.New("no writable cgroup")

// ErrSpawner is matched when the helper process that starts sandboxes died or
// misbehaved; the next Run starts a new one. It is also matched when a
// session's workspace keeper died: that workspace is lost, and every later
// Run and file operation of the Sandbox fails until it is closed.
var ErrSpawner = errors.New("spawner failed")

// UnsupportedError says which protection this host cannot provide, why, and
// how to enable it. It matches ErrNotSupported.
type UnsupportedError struct {
	Feature string // e.g. "user namespaces"
	Reason  string // what is missing, e.g. "user.max_user_namespaces is 0"
	Hint    string // how to enable it
	Err     error  // the underlying error, if any
}

// Error says what to do first, when there is a hint, then what is missing:
// "sandbox: HINT (FEATURE not available: REASON: ERR)".
func (e *UnsupportedError) Error() string {
	why := e.Feature + " not available: " + e.Reason
	if e.Err != nil && !strings.Contains(e.Reason, e.Err.Error()) {
		why += ": " + e.Err.Error()
	}
	if e.Hint == "" {
		return "sandbox: " + why
	}
	return "sandbox: " + e.Hint + " (" + why + ")"
}

// Is reports whether target is ErrNotSupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the underlying error.
func (e *UnsupportedError) Unwrap() error { return e.Err }

// OptionError is a wrong option or Cmd field. It matches ErrInvalidOption.
type OptionError struct {
	Option string // the field, e.g. "Options.Binds[1].Target" or "Cmd.Dir"
	Value  string // the offending value, quoted in the message
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("sandbox: %s %q: %s", e.Option, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }

// SetupError is a failure while building the sandbox, reported by the
// in-sandbox init with the stage it was in. Err is the system call's
// syscall.Errno where there was one, so errors.Is(err, unix.EPERM) works
// across the process boundary.
type SetupError struct {
	Stage string // e.g. "mount", "pivot_root", "exec"
	Op    string // the operation, e.g. "bind", "mkdir"
	Path  string // the path involved, if any
	Err   error
}

func (e *SetupError) Error() string {
	s := "sandbox: " + e.Stage
	if e.Op != "" {
		s += ": " + e.Op
	}
	if e.Path != "" {
		s += " " + e.Path
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying error, usually a syscall.Errno.
func (e *SetupError) Unwrap() error { return e.Err }

// ExitError is what Result.Err returns for a program that did not exit 0.
type ExitError struct {
	Result *Result
}

func (e *ExitError) Error() string {
	r := e.Result
	switch r.Outcome {
	case Exited:
		return fmt.Sprintf("exit status %d", r.ExitCode)
	case Signaled:
		return "signal: " + r.Signal.String()
	case Timeout:
		return "timeout: killed at the context's deadline"
	case Canceled:
		return "canceled: killed when the context was canceled"
	default:
		return r.Outcome.String()
	}
}

// ExitCode returns the program's exit code, or -1 if it did not exit.
func (e *ExitError) ExitCode() int { return e.Result.ExitCode }

// Is reports whether the run was ended by its context as target says:
// context.DeadlineExceeded for Outcome Timeout, context.Canceled for
// Outcome Canceled, so that code written for a ctx error keeps working.
func (e *ExitError) Is(target error) bool {
	switch e.Result.Outcome {
	case Timeout:
		return target == context.DeadlineExceeded
	case Canceled:
		return target == context.Canceled
	}
	return false
}

// ErrNotLive is matched by the error of a call that needs a live sandbox
// (Options.Live), such as Processes or DialContext, on one that is not.
var ErrNotLive = errors.New("not a live sandbox (Options.Live)")

// ErrExpired is matched by the error of every call on a Sandbox whose live
// sandbox ended at its Options.Live.IdleTimeout or MaxLifetime; the error
// matches ErrClosed too.
var ErrExpired = errors.New("live sandbox expired")
