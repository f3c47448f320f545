package main

import (
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
	"golang.org/x/sys/unix"
)

// runOutput is what the run and run_code tools return in structured
// content: the run's sandbox.Result as it serialises itself, and what the
// server adds; summary is the same for models that read text.
type runOutput struct {
	*sandbox.Result // nil when the run could not be made; Error says why

	ChangesTracked bool   `json:"changes_tracked" jsonschema:"whether changes lists the files the run changed (not on a live session)"`
	Error          string `json:"error,omitempty"`

	timeout time.Duration // the call's, for the summary
	memory  int64         // the session's memory limit, for the summary; 0 if none
}

// newRunOutput makes the output of res, a run of a call with timeout;
// tracked says that the session's workspace lists each run's changes
// (not a live session's, nor a host --workspace).
func newRunOutput(res *sandbox.Result, timeout time.Duration, tracked bool) *runOutput {
	return &runOutput{Result: res, ChangesTracked: tracked, timeout: timeout}
}

// tracksChanges says whether runs of a Sandbox of opts list their changes.
func tracksChanges(opts sandbox.Options) bool {
	ws, ok := opts.Workspace.(sandbox.SessionWorkspace)
	return ok && ws.TrackChanges
}

// runDescriptions describe the Result's fields to a model that reads the
// run tools' output schema.
var runDescriptions = map[string]string{
	"outcome":          "how the run ended: exited, signaled, timeout, canceled, out of memory or seccomp kill",
	"exit_code":        "the exit status if outcome is exited, else -1",
	"signal":           "the number of the signal that ended it, e.g. 9 for SIGKILL; 0 if none",
	"stdout_truncated": "stdout was longer than the server keeps: its middle was dropped",
	"stdout_bytes":     "every byte it wrote to stdout, the dropped ones too",
	"wall_time_ns":     "how long it ran, in nanoseconds",
	"denials":          "syscalls the sandbox's seccomp policy refused, and how often",
	"violation":        "the refused syscall that ended the run, with outcome seccomp kill",
	"connections":      "its attempts to reach the network through the egress proxy, allowed and refused",
	"changes":          "workspace paths the run added, modified or deleted",
	"changes_dropped":  "changes past the listed ones; -1 if they could not be listed",
}

// outputSchemas returns the options that make the tools' output schemas
// say what is sent: the types that serialise themselves otherwise than
// their Go kind, and runOutput's own schema, whose Result fields are
// absent when the run could not be made.
func outputSchemas() (*jsonschema.ForOptions, error) {
	var outcomes, kinds []any
	for o := sandbox.Exited; o <= sandbox.SeccompKilled; o++ {
		outcomes = append(outcomes, o.String())
	}
	for k := sandbox.ChangeAdded; k <= sandbox.ChangeDeleted; k++ {
		kinds = append(kinds, k.String())
	}
	opts := &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[sandbox.Outcome]():    {Type: "string", Enum: outcomes},
		reflect.TypeFor[sandbox.ChangeKind](): {Type: "string", Enum: kinds},
		reflect.TypeFor[sandbox.Output]():     {Type: "string"},
		reflect.TypeFor[syscall.Errno]():      {Type: "string", Description: "its name, e.g. EPERM"},
		reflect.TypeFor[fs.FileMode]():        {Type: "string", Description: "type and permission bits, e.g. -rw-r--r--"},
	}}
	run, err := jsonschema.For[runOutput](opts)
	if err != nil {
		return nil, err
	}
	for name, desc := range runDescriptions {
		if p := run.Properties[name]; p != nil {
			p.Description = desc
		}
	}
	run.Description = "how the run ended and what it printed; durations in nanoseconds (_ns), sizes in bytes (_bytes); " +
		"only changes_tracked and error when the run could not be made"
	run.Required = []string{"changes_tracked"}
	opts.TypeSchemas[reflect.TypeFor[runOutput]()] = run
	return opts, nil
}

// ending says in a few words how the run ended.
func (o *runOutput) ending() string {
	if o.Result == nil {
		return "failed: " + o.Error
	}
	switch o.Outcome {
	case sandbox.Exited:
		return fmt.Sprintf("exited with code %d", o.ExitCode)
	case sandbox.Signaled:
		return "killed by " + unix.SignalName(o.Signal)
	case sandbox.Timeout:
		if o.timeout > 0 {
			return fmt.Sprintf("killed after its %s timeout", o.timeout)
		}
		return "killed at its timeout"
	case sandbox.Canceled:
		return "killed: the call was canceled"
	case sandbox.OutOfMemory:
		if o.memory > 0 {
			return fmt.Sprintf("killed: out of memory at the sandbox's %s limit", formatSize(o.memory))
		}
		return "killed: out of memory at the sandbox's limit"
	case sandbox.SeccompKilled:
		return fmt.Sprintf("killed at syscall %s, which the sandbox's seccomp policy refuses", o.Violation)
	}
	return o.Outcome.String()
}

// summary is the output as text: how the run ended, its output, and what
// else it did.
func (o *runOutput) summary(cfg *mcpConfig) string {
	if o.Result == nil {
		return o.ending() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s after %s\n", o.ending(), o.WallTime.Round(time.Millisecond))
	for _, s := range []struct {
		name      string
		text      string
		truncated bool
		total     int64
	}{{"stdout", string(o.Stdout), o.StdoutTruncated, o.StdoutBytes}, {"stderr", string(o.Stderr), o.StderrTruncated, o.StderrBytes}} {
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
			parts[i] = fmt.Sprintf("%s (%s) x%d", d.Syscall, unix.ErrnoName(d.Errno), d.Count)
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
