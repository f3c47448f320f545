package sandbox

import (
	"syscall"
	"time"
)

// Outcome is how a run ended. The set is closed: every Result has exactly one.
type Outcome int

const (
	// Exited: the program exited by itself; ExitCode holds its status.
	Exited Outcome = iota
	// Signaled: the program was killed by a signal; Signal says which.
	Signaled
	// Timeout: the context's deadline passed and the sandbox was killed.
	Timeout
	// Canceled: the context was canceled and the sandbox was killed.
	Canceled
	// OutOfMemory: the kernel's OOM killer ended the program at the
	// run's memory limit (Options.Limits.Memory).
	OutOfMemory
	// SeccompKilled: with SeccompPolicy.KillOnRefusal, the program made a syscall
	// the policy refuses and the run was killed before that syscall ran;
	// Result.Violation names it.
	SeccompKilled
)

var outcomeNames = [...]string{"exited", "signaled", "timeout", "canceled", "out of memory", "seccomp kill"}

// String returns the outcome's lower-case name, e.g. "timeout".
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// MarshalText makes Outcome print as its name in JSON.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Result is what a run produced and how it ended. A non-zero exit or a crash
// is reported here, not as an error from Run.
type Result struct {
	Outcome  Outcome
	ExitCode int            // the exit status if Outcome is Exited, else -1
	Signal   syscall.Signal // the signal that ended the program, if one did (SIGKILL after Timeout or Canceled)

	// Stdout and Stderr hold the captured output when Cmd.Stdout and
	// Cmd.Stderr were nil. Past Options.Limits.Output bytes the middle is
	// dropped: the first and last halves are kept around an elision marker
	// and the Truncated flag is set.
	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool
	// StdoutBytes and StderrBytes count every byte the program wrote,
	// including the ones dropped by the limit.
	StdoutBytes, StderrBytes int64

	WallTime   time.Duration // from the start of the sandbox to the end of its last process
	UserTime   time.Duration // CPU time in user mode, of the program and its reaped children
	SystemTime time.Duration // CPU time in the kernel, likewise
	MaxRSS     int64         // peak resident set size in bytes of the largest process

	// Pooled says the run took a sandbox prepared ahead (Pool);
	// its WallTime then starts when it was taken, not when it was built.
	Pooled bool

	// From the run's cgroup, when it had one (see Limits). A call of a
	// live sandbox (Options.Live) shares its cgroup with everything alive
	// there: CgroupCPU and MemoryPeak are 0 (UserTime, SystemTime and
	// MaxRSS are the call's own), PidsLimitHit says what the live
	// sandbox's cgroup saw while the call ran, and OOMKills counts the
	// OOM kills in it while the call ran and those before it that no
	// earlier call counted (of processes left in the background between
	// calls); an OOM kill while the call ran, of its own process, makes
	// its Outcome OutOfMemory.
	CgroupCPU    time.Duration // CPU time of every process of the run
	MemoryPeak   int64         // peak memory of the run in bytes; 0 if the kernel does not say
	OOMKills     int           // processes the OOM killer killed
	PidsLimitHit bool          // a fork or clone failed at the pids limit

	// Limits says, for memory, cpu, pids and io, what was enforced and how.
	Limits []Limit

	// Denials lists, by name, each syscall the seccomp policy refused with
	// a reporting action (ActNotify, as the default policy does) and how
	// often; sorted by name. Violation is the syscall that ended the run
	// when Outcome is SeccompKilled.
	Denials   []Denial
	Violation string

	// Connections lists, in the order they started, the attempts of a
	// Egress run to reach a host through the egress proxy, allowed
	// and refused, and the connections to it that sent no request. Past
	// 1,000 entries only ConnectionsDropped counts.
	Connections        []Connection
	ConnectionsDropped int

	// Changes lists, with SessionWorkspace.TrackChanges, the workspace paths that
	// differ between the Run's start and its end, sorted by path; past
	// MaxChanges only ChangesDropped counts. Runs of one Sandbox share
	// its workspace: a Run's Changes are what changed while it ran, by
	// anyone (another Run, a file operation). ChangesDropped is -1 when
	// the list could not be made (Options.Logger hears why).
	Changes        []Change
	ChangesDropped int
}

// Denial is one syscall the seccomp policy refused during a run.
type Denial struct {
	Syscall string        // e.g. "ptrace", or "syscall_999" for a number without a name
	Errno   syscall.Errno // what the program got back
	Count   int
}

// Limit is one resource limit of a run as it was put in place.
type Limit struct {
	Name     string // "memory", "cpu", "pids" or "io"
	Value    string // the limit, e.g. "536870912 bytes", or "none"
	Enforced bool
	By       string // "cgroup v2", "cgroup v1", an rlimit, or why it was not enforced
}

// CPUTime is the run's CPU time: its cgroup's count where it had one,
// which includes processes that were killed rather than reaped, else
// UserTime plus SystemTime.
func (r *Result) CPUTime() time.Duration {
	if r.CgroupCPU > 0 {
		return r.CgroupCPU
	}
	return r.UserTime + r.SystemTime
}

// Success reports whether the program exited with status 0.
func (r *Result) Success() bool { return r.Outcome == Exited && r.ExitCode == 0 }

// Err returns nil if the program exited 0 and an *ExitError otherwise, for
// callers who prefer os/exec's "if err != nil" style.
func (r *Result) Err() error {
	if r.Success() {
		return nil
	}
	return &ExitError{Result: r}
}
