package sandbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/report"
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

// UnmarshalText reads the name MarshalText writes.
func (o *Outcome) UnmarshalText(b []byte) error {
	i := slices.Index(outcomeNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("sandbox: outcome %q: not one of %q", b, outcomeNames)
	}
	*o = Outcome(i)
	return nil
}

// Result is what a run produced and how it ended. A non-zero exit or a crash
// is reported here, not as an error from Run.
//
// A Result serialises itself: encoding/json writes it in the shape
// "sandbox run --json", the MCP server's run tools and the HTTP service
// answer with, and reads that back into an equal Result. Names are
// snake_case; every duration is an integer count of nanoseconds, its name
// ending in "_ns"; every size is in bytes, its name ending in "_bytes";
// stdout and stderr are strings (bytes that are not UTF-8 read back as
// U+FFFD). A Result from Run has non-nil Limits, Denials, Connections and
// Changes, so that they are lists in JSON, never null.
type Result struct {
	Outcome  Outcome        `json:"outcome"`   // its name, e.g. "out of memory"
	ExitCode int            `json:"exit_code"` // the exit status if Outcome is Exited, else -1
	Signal   syscall.Signal `json:"signal"`    // the signal that ended the program, if one did (SIGKILL after Timeout or Canceled); 0 if none

	// Stdout and Stderr hold the captured output when Cmd.Stdout and
	// Cmd.Stderr were nil. Past Options.Limits.Output bytes the middle is
	// dropped: the first and last halves are kept around an elision marker
	// and the Truncated flag is set.
	Stdout          Output `json:"stdout"`
	Stderr          Output `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// StdoutBytes and StderrBytes count every byte the program wrote,
	// including the ones dropped by the limit.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`

	WallTime   time.Duration `json:"wall_time_ns"`   // from the start of the sandbox to the end of its last process
	UserTime   time.Duration `json:"user_time_ns"`   // CPU time in user mode, of the program and its reaped children
	SystemTime time.Duration `json:"system_time_ns"` // CPU time in the kernel, likewise
	MaxRSS     int64         `json:"max_rss_bytes"`  // peak resident set size in bytes of the largest process

	// Pooled says the run took a sandbox prepared ahead (Pool);
	// its WallTime then starts when it was taken, not when it was built.
	Pooled bool `json:"pooled"`

	// From the run's cgroup, when it had one (see Limits). A call of a
	// live sandbox (Options.Live) shares its cgroup with everything alive
	// there: CgroupCPU and MemoryPeak are 0 (UserTime, SystemTime and
	// MaxRSS are the call's own), PidsLimitHit says what the live
	// sandbox's cgroup saw while the call ran, and OOMKills counts the
	// OOM kills in it while the call ran and those before it that no
	// earlier call counted (of processes left in the background between
	// calls); an OOM kill while the call ran, of its own process, makes
	// its Outcome OutOfMemory.
	CgroupCPU    time.Duration `json:"cgroup_cpu_ns"`     // CPU time of every process of the run
	MemoryPeak   int64         `json:"memory_peak_bytes"` // peak memory of the run in bytes; 0 if the kernel does not say
	OOMKills     int           `json:"oom_kills"`         // processes the OOM killer killed
	PidsLimitHit bool          `json:"pids_limit_hit"`    // a fork or clone failed at the pids limit

	// CPUTime is the run's CPU time: CgroupCPU where there was a cgroup
	// count, which includes processes that were killed rather than
	// reaped, else UserTime plus SystemTime.
	CPUTime time.Duration `json:"cpu_time_ns"`

	// Limits says, for memory, cpu, pids and io, what was enforced and how.
	Limits []Limit `json:"limits"`

	// Denials lists, by name, each syscall the seccomp policy refused with
	// a reporting action (ActNotify, as the default policy does) and how
	// often; sorted by name. Violation is the syscall that ended the run
	// when Outcome is SeccompKilled.
	Denials   []Denial `json:"denials"`
	Violation string   `json:"violation,omitempty"`

	// Connections lists, in the order they started, the attempts of a
	// Egress run to reach a host through the egress proxy, allowed
	// and refused, and the connections to it that sent no request. Past
	// 1,000 entries only ConnectionsDropped counts.
	Connections        []Connection `json:"connections"`
	ConnectionsDropped int          `json:"connections_dropped"`

	// Changes lists, with SessionWorkspace.TrackChanges, the workspace paths that
	// differ between the Run's start and its end, sorted by path; past
	// MaxChanges only ChangesDropped counts. Runs of one Sandbox share
	// its workspace: a Run's Changes are what changed while it ran, by
	// anyone (another Run, a file operation). ChangesDropped is -1 when
	// the list could not be made (Options.Logger hears why).
	Changes        []Change `json:"changes"`
	ChangesDropped int      `json:"changes_dropped"`
}

// Output is a run's captured standard output or error: the bytes, which
// JSON writes as a string.
type Output []byte

// MarshalJSON writes o as a JSON string, as encoding/json writes a string
// (bytes that are not UTF-8 as U+FFFD).
func (o Output) MarshalJSON() ([]byte, error) { return json.Marshal(string(o)) }

// UnmarshalJSON reads a JSON string; "" and null read as nil.
func (o *Output) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*o = nil
	if s != "" {
		*o = Output(s)
	}
	return nil
}

// Denial is one syscall the seccomp policy refused during a run: its name
// (e.g. "ptrace", or "syscall_999" for a number without one), the Errno
// the program got back, and how often. JSON writes the errno by its name,
// e.g. "EPERM". The launcher reports it and the Result hands it on, one
// type for both.
type Denial = report.Denial

// Limit is one resource limit of a run as it was put in place: its Name
// ("memory", "cpu", "pids" or "io"), its Value (e.g. "536870912 bytes",
// or "none"), whether it was Enforced, and By what ("cgroup v2",
// "cgroup v1", an rlimit, or why it was not enforced).
type Limit = report.Limit

// lists makes r's lists non-nil, so that JSON has them as lists.
func (r *Result) lists() {
	if r.Limits == nil {
		r.Limits = []Limit{}
	}
	if r.Denials == nil {
		r.Denials = []Denial{}
	}
	if r.Connections == nil {
		r.Connections = []Connection{}
	}
	if r.Changes == nil {
		r.Changes = []Change{}
	}
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
