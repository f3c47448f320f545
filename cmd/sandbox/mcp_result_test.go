package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
)

// TestMCPRunOutputSchema: the output schema the run tools publish accepts
// what they send, a Result with every list filled and an output without
// a Result, and refuses what the Go kinds alone would have said (an
// errno as a number, a mode as a number).
func TestMCPRunOutputSchema(t *testing.T) {
	opts, err := outputSchemas()
	if err != nil {
		t.Fatal(err)
	}
	schema, err := jsonschema.For[runOutput](opts)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &sandbox.Result{
		Outcome: sandbox.Signaled, ExitCode: -1, Signal: syscall.SIGKILL, Stdout: sandbox.Output("out"),
		WallTime: time.Second, Limits: []sandbox.Limit{{Name: "pids", Value: "64", Enforced: true, By: "cgroup v1"}},
		Denials:     []sandbox.Denial{{Syscall: "ptrace", Errno: syscall.EPERM, Count: 1}},
		Connections: []sandbox.Connection{{Host: "pypi.org", Port: 443, Method: "CONNECT", Start: time.Now(), Duration: time.Second}},
		Changes:     []sandbox.Change{{Path: "a", Kind: sandbox.ChangeModified, Size: 1, Mode: 0o600}},
	}
	valid := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return resolved.Validate(doc)
	}
	for _, out := range []*runOutput{newRunOutput(res, time.Second, true), {Error: "boom"}} {
		if err := valid(out); err != nil {
			t.Errorf("the schema refuses what is sent: %v", err)
		}
	}

	b, _ := json.Marshal(newRunOutput(res, time.Second, true))
	for _, wrong := range []struct{ from, to string }{{`"errno":"EPERM"`, `"errno":1`}, {`"mode":"-rw-------"`, `"mode":384`}, {`"outcome":"signaled"`, `"outcome":1`}} {
		if !strings.Contains(string(b), wrong.from) {
			t.Fatalf("%s: no %s", b, wrong.from)
		}
		var doc any
		if err := json.Unmarshal([]byte(strings.Replace(string(b), wrong.from, wrong.to, 1)), &doc); err != nil {
			t.Fatal(err)
		}
		if resolved.Validate(doc) == nil {
			t.Errorf("the schema accepts %s", wrong.to)
		}
	}
}

// TestMCPChangesTracked: a run's changes_tracked says whether the
// session's workspace lists changes, which a live server's does not.
func TestMCPChangesTracked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--live"}, false},
	} {
		cfg, err := parseMCP(tc.args)
		if err != nil {
			t.Fatalf("parseMCP(%q): %v", tc.args, err)
		}
		out := newRunOutput(&sandbox.Result{}, time.Second, tracksChanges(cfg.cfg.opts))
		if out.ChangesTracked != tc.want {
			t.Errorf("sandbox mcp %q: changes_tracked = %v, want %v", tc.args, out.ChangesTracked, tc.want)
		}
	}
}
