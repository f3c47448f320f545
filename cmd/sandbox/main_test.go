package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

func TestParseBind(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec     string
		writable bool
		want     sandbox.Bind
	}{
		{"/data", false, sandbox.Bind{Source: "/data"}},
		{"/data:/mnt/data", false, sandbox.Bind{Source: "/data", Target: "/mnt/data"}},
		{"/data:/mnt/data", true, sandbox.Bind{Source: "/data", Target: "/mnt/data", Writable: true}},
		{"/a/../b/", false, sandbox.Bind{Source: "/b"}},
		{"rel", false, sandbox.Bind{Source: filepath.Join(cwd, "rel")}},
		{"rel:/x", true, sandbox.Bind{Source: filepath.Join(cwd, "rel"), Target: "/x", Writable: true}},
		{"/src:/dst:with-colon", false, sandbox.Bind{Source: "/src", Target: "/dst:with-colon"}},
	} {
		got, err := parseBind(tc.spec, tc.writable)
		if err != nil {
			t.Errorf("parseBind(%q): %v", tc.spec, err)
			continue
		}
		if got != tc.want {
			t.Errorf("parseBind(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
	}
	for _, spec := range []string{"", ":", ":/dst", "/src:", "/src:relative"} {
		if b, err := parseBind(spec, false); err == nil {
			t.Errorf("parseBind(%q) = %+v, want an error", spec, b)
		}
	}
}

func TestEnvList(t *testing.T) {
	var e envList
	for _, kv := range []string{"A=1", "B=", "C=x=y"} {
		if err := e.Set(kv); err != nil {
			t.Errorf("Set(%q): %v", kv, err)
		}
	}
	if want := (envList{"A=1", "B=", "C=x=y"}); !reflect.DeepEqual(e, want) {
		t.Errorf("envList = %q, want %q", e, want)
	}
	for _, kv := range []string{"", "A", "=1", "A=\x00"} {
		if err := e.Set(kv); err == nil {
			t.Errorf("Set(%q) succeeded, want an error", kv)
		}
	}
}

func TestParseRun(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseRun([]string{
		"--timeout", "1.5s", "--ro-bind", "/usr/share:/share", "--bind", "/srv",
		"--ro-bind", "/opt", "--workspace", "ws", "--rootfs", "/images/debian",
		"--env", "A=1", "--env", "B=2", "--dir", "/tmp", "--json",
		"--", "python3", "-c", "print(1)", "--not-a-flag",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &runConfig{
		opts: sandbox.Options{
			Rootfs:    "/images/debian",
			Workspace: filepath.Join(cwd, "ws"),
			Binds: []sandbox.Bind{
				{Source: "/usr/share", Target: "/share"},
				{Source: "/srv", Writable: true},
				{Source: "/opt"},
			},
			InProcess: true,
		},
		args:    []string{"python3", "-c", "print(1)", "--not-a-flag"},
		env:     []string{"A=1", "B=2"},
		dir:     "/tmp",
		timeout: 1500 * time.Millisecond,
		json:    true,
	}
	cfg.binds = nil // checked below
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("parseRun:\n got %+v\nwant %+v", cfg, want)
	}

	// Without "--" the command starts at the first non-flag argument.
	cfg, err = parseRun([]string{"/bin/echo", "--timeout", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/bin/echo", "--timeout", "1s"}; !reflect.DeepEqual(cfg.args, want) || cfg.timeout != 0 {
		t.Errorf("parseRun without --: args %q timeout %v, want %q and 0", cfg.args, cfg.timeout, want)
	}
	if !cfg.opts.InProcess {
		t.Error("Options.InProcess is false, want true in the CLI")
	}
}

func TestParseRunErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the flag, or the problem, that the error must name
	}{
		{[]string{"--frobnicate", "--", "true"}, "-frobnicate"},
		{[]string{"--timeout", "soon", "--", "true"}, "-timeout"},
		{[]string{"--timeout", "-1s", "--", "true"}, "-timeout"},
		{[]string{"--timeout"}, "-timeout"},
		{[]string{"--env", "NOEQUALS", "--", "true"}, "-env"},
		{[]string{"--env", "=v", "--", "true"}, "-env"},
		{[]string{"--bind", "/src:", "--", "true"}, "-bind"},
		{[]string{"--ro-bind", "/src:rel", "--", "true"}, "-ro-bind"},
		{[]string{"--ro-bind", "", "--", "true"}, "-ro-bind"},
		{[]string{"--workspace", "", "--", "true"}, "-workspace"},
		{[]string{"--json=maybe", "--", "true"}, "-json"},
		{[]string{"--timeout", "1s"}, "no command"},
		{[]string{"--"}, "no command"},
		{nil, "no command"},
	} {
		_, err := parseRun(tc.args)
		if err == nil {
			t.Errorf("parseRun(%q) succeeded, want an error naming %s", tc.args, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRun(%q) = %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
	if _, err := parseRun([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseRun(-h) = %v, want flag.ErrHelp", err)
	}
}

func TestExplainNamesFlag(t *testing.T) {
	cfg, err := parseRun([]string{"--ro-bind", "/usr", "--bind", "/nonexistent-dir-for-test:/x", "--", "true"})
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.explain(sandbox.New(cfg.opts).Err())
	if err == nil || !strings.Contains(err.Error(), `--bind "/nonexistent-dir-for-test:/x"`) {
		t.Errorf("error = %v, want one naming --bind and its spec", err)
	}
	if !errors.Is(err, sandbox.ErrInvalidOption) {
		t.Errorf("error %v does not match sandbox.ErrInvalidOption", err)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{nil, exitFailure, "Usage:"},
		{[]string{"frob"}, exitFailure, `unknown command "frob"`},
		{[]string{"run", "--nope", "--", "true"}, exitFailure, "-nope"},
		{[]string{"run"}, exitFailure, "no command"},
		{[]string{"probe", "--nope"}, exitFailure, "-nope"},
		{[]string{"probe", "extra"}, exitFailure, `"extra"`},
		{[]string{"help", "frob"}, exitFailure, `unknown command "frob"`},
		{[]string{"run", "--bind", "/nonexistent-dir-for-test", "--", "true"}, exitFailure, "--bind"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(tc.args, streams{stdout: &stdout, stderr: &stderr})
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("cli(%q) = %d, stderr %q; want %d and %q in stderr", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "run"}, {"help", "probe"}, {"run", "-h"}, {"probe", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := cli(args, streams{stdout: &stdout, stderr: &stderr}); code != 0 || !strings.Contains(stdout.String(), "Usage") {
			t.Errorf("cli(%q) = %d, stdout %q; want 0 and a usage text", args, code, stdout.String())
		}
	}
}

func TestExitStatus(t *testing.T) {
	notFound := errors.New("sandbox: program not found")
	for _, tc := range []struct {
		name string
		res  *sandbox.Result
		err  error
		want int
	}{
		{"exit 0", &sandbox.Result{Outcome: sandbox.Exited}, nil, 0},
		{"exit 3", &sandbox.Result{Outcome: sandbox.Exited, ExitCode: 3}, nil, 3},
		{"signal", &sandbox.Result{Outcome: sandbox.Signaled, ExitCode: -1, Signal: 9}, nil, 137},
		{"timeout", &sandbox.Result{Outcome: sandbox.Timeout, ExitCode: -1, Signal: 9}, errors.New("deadline"), exitTimeout},
		{"canceled", &sandbox.Result{Outcome: sandbox.Canceled, ExitCode: -1, Signal: 9}, errors.New("canceled"), 130},
		{"not found", &sandbox.Result{Outcome: sandbox.Exited, ExitCode: 127}, errors.Join(notFound, sandbox.ErrNotFound), 127},
		{"not executable", &sandbox.Result{Outcome: sandbox.Exited, ExitCode: 126}, errors.New("permission denied"), 126},
		{"not found, no result", nil, sandbox.ErrNotFound, exitFailure},
		{"setup failed", nil, &sandbox.SetupError{Stage: "mount", Err: errors.New("boom")}, exitFailure},
		{"spawner lost", &sandbox.Result{Outcome: sandbox.Exited}, sandbox.ErrSpawner, exitFailure},
	} {
		if got := exitStatus(tc.res, tc.err, nil); got != tc.want {
			t.Errorf("%s: exitStatus = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// cliBinary returns the tool's binary: $SANDBOX_CLI if set (make
// test-rootless builds it beforehand, since the unprivileged user may not be
// able to run the go command), else one built with "go build" into t's
// temporary directory.
func cliBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SANDBOX_CLI"); p != "" {
		return p
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the tool with (set SANDBOX_CLI to a built one): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "sandbox")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// requireSandbox skips the test when this host cannot run sandboxes.
func requireSandbox(t *testing.T) {
	t.Helper()
	report, err := sandbox.Probe()
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if !report.CanRun() {
		t.Skipf("this host cannot run sandboxes:\n%s", report)
	}
}

// TestCLI runs the built tool the way a user would.
func TestCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)

	run := func(t *testing.T, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s %q: %v", bin, args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // wanted stdout, if not empty
		err  string // wanted in stderr, if not empty
	}{
		{"exit code", []string{"run", "--", "/bin/sh", "-c", "exit 3"}, 3, "", ""},
		{"streams output", []string{"run", "--env", "A=b", "--", "/bin/sh", "-c", "echo $A; echo oops >&2"}, 0, "b\n", "oops\n"},
		{"timeout", []string{"run", "--timeout", "200ms", "--", "/bin/sleep", "10"}, exitTimeout, "", "--timeout"},
		{"not found", []string{"run", "--", "/nonexistent-prog"}, exitNotFound, "", "not found"},
		{"probe", []string{"probe"}, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stdout %q, stderr %q", code, tc.code, stdout, stderr)
			}
			if tc.out != "" && stdout != tc.out {
				t.Errorf("stdout %q, want %q", stdout, tc.out)
			}
			if !strings.Contains(stderr, tc.err) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.err)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := run(t, "run", "--json", "--", "/bin/echo", "hi")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr %q", code, stderr)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
		}
		for key, want := range map[string]any{"stdout": "hi\n", "stderr": "", "exit_code": 0.0, "outcome": "exited", "signal": 0.0} {
			if got[key] != want {
				t.Errorf("%s = %#v, want %#v (in %s)", key, got[key], want, stdout)
			}
		}
		if _, ok := got["error"]; ok {
			t.Errorf("unexpected error in %s", stdout)
		}
		if ns, _ := got["wall_time_ns"].(float64); ns <= 0 {
			t.Errorf("wall_time_ns = %v, want > 0", got["wall_time_ns"])
		}
	})
}
