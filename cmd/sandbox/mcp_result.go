package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
	"golang.org/x/sys/unix"
)

// runOutput is a run's sandbox.Result as the run and run_code tools return
// it, in structured content; summary is the same for models that read text.
type runOutput struct {
	Outcome            string           `json:"outcome" jsonschema:"how the run ended: exited, signaled, timeout, canceled, out of memory or seccomp kill"`
	ExitCode           int              `json:"exit_code" jsonschema:"the exit status if outcome is exited, else -1"`
	Signal             string           `json:"signal,omitempty" jsonschema:"the signal that ended it, e.g. SIGKILL"`
	Stdout             string           `json:"stdout"`
	Stderr             string           `json:"stderr"`
	StdoutTruncated    bool             `json:"stdout_truncated" jsonschema:"stdout was longer than the server keeps: its middle was dropped"`
	StderrTruncated    bool             `json:"stderr_truncated"`
	StdoutBytes        int64            `json:"stdout_bytes" jsonschema:"every byte it wrote to stdout, the dropped ones too"`
	StderrBytes        int64            `json:"stderr_bytes"`
	DurationMS         int64            `json:"duration_ms"`
	Denials            []jsonDenial     `json:"denials" jsonschema:"syscalls the sandbox's seccomp policy refused, and how often"`
	Violation          string           `json:"violation,omitempty" jsonschema:"the refused syscall that ended the run, with outcome seccomp kill"`
	Connections        []jsonConnection `json:"connections" jsonschema:"its attempts to reach the network through the egress proxy, allowed and refused"`
	ConnectionsDropped int              `json:"connections_dropped,omitempty"`
	ChangesTracked     bool             `json:"changes_tracked" jsonschema:"whether changes lists the files the run changed (not on a live session)"`
	Changes            []changeInfo     `json:"changes" jsonschema:"workspace paths the run added, modified or deleted"`
	ChangesDropped     int              `json:"changes_dropped,omitempty" jsonschema:"changes past the listed ones; -1 if they could not be listed"`
	Error              string           `json:"error,omitempty"`

	timeout time.Duration // the call's, for the summary
	memory  int64         // the session's memory limit, for the summary; 0 if none
}

// changeInfo is a sandbox.Change.
type changeInfo struct {
	Path string `json:"path" jsonschema:"relative to /workspace"`
	Kind string `json:"kind" jsonschema:"added, modified or deleted"`
	Size int64  `json:"size" jsonschema:"bytes of a file (for deleted: what it had)"`
	Mode string `json:"mode" jsonschema:"type and permission bits, e.g. -rw-r--r--"`
}

// newRunOutput makes the output of res, a run of a call with timeout; live
// says that the session is live, where changes are not tracked.
func newRunOutput(res *sandbox.Result, timeout time.Duration, live bool) *runOutput {
	out := &runOutput{
		Outcome: res.Outcome.String(), ExitCode: res.ExitCode,
		Stdout: string(res.Stdout), Stderr: string(res.Stderr),
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		DurationMS:         res.WallTime.Milliseconds(),
		Denials:            []jsonDenial{},
		Violation:          res.Violation,
		Connections:        jsonConnections(res.Connections),
		ConnectionsDropped: res.ConnectionsDropped,
		ChangesTracked:     !live,
		Changes:            []changeInfo{},
		ChangesDropped:     res.ChangesDropped,
		timeout:            timeout,
	}
	if res.Signal != 0 {
		out.Signal = unix.SignalName(res.Signal)
	}
	for _, d := range res.Denials {
		out.Denials = append(out.Denials, jsonDenial{Syscall: d.Syscall, Errno: unix.ErrnoName(d.Errno), Count: d.Count})
	}
	for _, c := range res.Changes {
		out.Changes = append(out.Changes, changeInfo{Path: c.Path, Kind: c.Kind.String(), Size: c.Size, Mode: c.Mode.String()})
	}
	return out
}

// ending says in a few words how the run ended.
func (o *runOutput) ending() string {
	switch o.Outcome {
	case sandbox.Exited.String():
		return fmt.Sprintf("exited with code %d", o.ExitCode)
	case sandbox.Signaled.String():
		return "killed by " + o.Signal
	case sandbox.Timeout.String():
		if o.timeout > 0 {
			return fmt.Sprintf("killed after its %s timeout", o.timeout)
		}
		return "killed at its timeout"
	case sandbox.Canceled.String():
		return "killed: the call was canceled"
	case sandbox.OutOfMemory.String():
		if o.memory > 0 {
			return fmt.Sprintf("killed: out of memory at the sandbox's %s limit", formatSize(o.memory))
		}
		return "killed: out of memory at the sandbox's limit"
	case sandbox.SeccompKilled.String():
		return fmt.Sprintf("killed at syscall %s, which the sandbox's seccomp policy refuses", o.Violation)
	}
	if o.Error != "" {
		return "failed: " + o.Error
	}
	return o.Outcome
}

// summary is the output as text: how the run ended, its output, and what
// else it did.
func (o *runOutput) summary(cfg *mcpConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s after %s\n", o.ending(), time.Duration(o.DurationMS)*time.Millisecond)
	for _, s := range []struct {
		name      string
		text      string
		truncated bool
		total     int64
	}{{"stdout", o.Stdout, o.StdoutTruncated, o.StdoutBytes}, {"stderr", o.Stderr, o.StderrTruncated, o.StderrBytes}} {
		if s.total == 0 {
			continue
		}
		note := ""
		if s.truncated {
			note = fmt.Sprintf(" (%d bytes; the middle was dropped to keep %s)", s.total, formatSize(cfg.outputLimit))
		}
		fmt.Fprintf(&b, "--- %s%s ---\n%s", s.name, note, s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteString("\n")
		}
	}
	if len(o.Changes) > 0 || o.ChangesDropped != 0 {
		b.WriteString("--- changed files ---\n")
		for _, c := range o.Changes {
			fmt.Fprintf(&b, "%s %s (%d bytes)\n", c.Kind, c.Path, c.Size)
		}
		switch {
		case o.ChangesDropped > 0:
			fmt.Fprintf(&b, "and %d more\n", o.ChangesDropped)
		case o.ChangesDropped < 0:
			b.WriteString("(the list could not be made)\n")
		}
	}
	if len(o.Denials) > 0 {
		parts := make([]string, len(o.Denials))
		for i, d := range o.Denials {
			parts[i] = fmt.Sprintf("%s (%s) x%d", d.Syscall, d.Errno, d.Count)
		}
		fmt.Fprintf(&b, "--- syscalls the sandbox refused ---\n%s\n", strings.Join(parts, ", "))
	}
	for _, c := range o.Connections {
		switch {
		case !c.Allowed:
			fmt.Fprintf(&b, "network: refused %s %s:%d: %s\n", c.Method, c.Host, c.Port, c.Reason)
		case c.Error != "":
			fmt.Fprintf(&b, "network: %s %s:%d allowed, failed: %s\n", c.Method, c.Host, c.Port, c.Error)
		default:
			fmt.Fprintf(&b, "network: %s %s:%d allowed\n", c.Method, c.Host, c.Port)
		}
	}
	return b.String()
}
