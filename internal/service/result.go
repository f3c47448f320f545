package service

import (
	"strings"
	"time"

	"github.com/fumehood/sandbox"
	"golang.org/x/sys/unix"
)

// runResponse is the answer to a run: the body in JSON mode, and the
// "result" of a stream's last line.
type runResponse struct {
	ID string `json:"id"`
	// Cause is how the run ended as a metric label: the Outcome's name
	// with underscores (exited, signaled, timeout, canceled, out_of_memory,
	// seccomp_kill), or "error" when there is no Result.
	Cause string `json:"cause"`
	// Error says what went wrong: the run could not be made, or it was
	// killed at its timeout or by the server's shutdown.
	Error string `json:"error,omitempty"`
	// Field is the request field at fault when the request could not
	// run as given (400), e.g. "command" for a command line too long.
	Field string `json:"field,omitempty"`
	// DurationNS is the run as the server saw it, the sandbox's set-up
	// and removal included.
	DurationNS int64 `json:"duration_ns"`
	*result          // nil when there is no Result
}

// result is a sandbox.Result with the field names of cmd/sandbox --json.
// Stdout and Stderr stay empty here: writeAnswer writes the Result's
// output in their place, and when streaming the output went in events.
type result struct {
	Outcome         sandbox.Outcome `json:"outcome"` // its name, e.g. "out of memory"
	ExitCode        int             `json:"exit_code"`
	Signal          int             `json:"signal"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	StdoutBytes     int64           `json:"stdout_bytes"` // all the program wrote, kept or not
	StderrBytes     int64           `json:"stderr_bytes"`
	WallTimeNS      int64           `json:"wall_time_ns"`
	UserTimeNS      int64           `json:"user_time_ns"`
	SystemTimeNS    int64           `json:"system_time_ns"`
	MaxRSS          int64           `json:"max_rss_bytes"`
	CPUTimeNS       int64           `json:"cpu_time_ns"`       // the cgroup's count if there was one, else user + system
	CgroupCPUNS     int64           `json:"cgroup_cpu_ns"`     // 0 without a cgroup
	MemoryPeak      int64           `json:"memory_peak_bytes"` // 0 without a cgroup
	OOMKills        int             `json:"oom_kills"`
	PidsLimitHit    bool            `json:"pids_limit_hit"`
	Pooled          bool            `json:"pooled"`
	Limits          []limit         `json:"limits"`  // never null
	Denials         []denial        `json:"denials"` // never null
	Violation       string          `json:"violation,omitempty"`
	Connections     []connection    `json:"connections"` // never null; network "allow"'s proxy report
}

type limit struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Enforced bool   `json:"enforced"`
	By       string `json:"by"`
}

type denial struct {
	Syscall string `json:"syscall"`
	Errno   string `json:"errno"` // its name, e.g. "EPERM"
	Count   int    `json:"count"`
}

type connection struct {
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Method     string `json:"method"`
	Allowed    bool   `json:"allowed"`
	Reason     string `json:"reason"`
	Addr       string `json:"addr,omitempty"`
	Status     int    `json:"status"`
	Error      string `json:"error,omitempty"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	DurationNS int64  `json:"duration_ns"`
}

// causeOf is how a run ended, as a metric label.
func causeOf(r *sandbox.Result) string {
	if r == nil {
		return "error"
	}
	return strings.ReplaceAll(r.Outcome.String(), " ", "_")
}

func newRunResponse(id string, r *sandbox.Result, elapsed time.Duration) *runResponse {
	resp := &runResponse{ID: id, Cause: causeOf(r), DurationNS: elapsed.Nanoseconds()}
	if r == nil {
		return resp
	}
	res := &result{
		Outcome:         r.Outcome,
		ExitCode:        r.ExitCode,
		Signal:          int(r.Signal),
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		StdoutBytes:     r.StdoutBytes,
		StderrBytes:     r.StderrBytes,
		WallTimeNS:      r.WallTime.Nanoseconds(),
		UserTimeNS:      r.UserTime.Nanoseconds(),
		SystemTimeNS:    r.SystemTime.Nanoseconds(),
		MaxRSS:          r.MaxRSS,
		CPUTimeNS:       r.CPUTime().Nanoseconds(),
		CgroupCPUNS:     r.CgroupCPU.Nanoseconds(),
		MemoryPeak:      r.MemoryPeak,
		OOMKills:        r.OOMKills,
		PidsLimitHit:    r.PidsLimitHit,
		Pooled:          r.Pooled,
		Limits:          []limit{},
		Denials:         []denial{},
		Violation:       r.Violation,
		Connections:     []connection{},
	}
	for _, l := range r.Limits {
		res.Limits = append(res.Limits, limit{Name: l.Name, Value: l.Value, Enforced: l.Enforced, By: l.By})
	}
	for _, d := range r.Denials {
		res.Denials = append(res.Denials, denial{Syscall: d.Syscall, Errno: unix.ErrnoName(d.Errno), Count: d.Count})
	}
	for _, c := range r.Connections {
		res.Connections = append(res.Connections, connection{Host: c.Host, Port: c.Port, Method: c.Method,
			Allowed: c.Allowed, Reason: c.Reason, Addr: c.Addr, Status: c.Status, Error: c.Error,
			BytesUp: c.BytesUp, BytesDown: c.BytesDown, DurationNS: c.Duration.Nanoseconds()})
	}
	resp.result = res
	return resp
}
