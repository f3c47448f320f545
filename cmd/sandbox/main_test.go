package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/seccompprofile"
	"golang.org/x/sys/unix"
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
		"--memory", "1GiB", "--cpus", "0.5", "--pids", "64", "--tmp-size", "16M",
		"--workspace-size", "100k", "--best-effort",
		"--", "python3", "-c", "print(1)", "--not-a-flag",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &runConfig{
		opts: sandbox.Options{
			Root:      sandbox.RootDir("/images/debian"),
			Workspace: sandbox.HostWorkspace{Dir: filepath.Join(cwd, "ws")},
			Binds: []sandbox.Bind{
				{Source: "/usr/share", Target: "/share"},
				{Source: "/srv", Writable: true},
				{Source: "/opt"},
			},
			Limits: sandbox.Limits{Memory: 1 << 30, CPUs: 0.5, Pids: 64, TmpSize: 16 << 20, Policy: sandbox.BestEffortLimits},
			Start:  sandbox.InProcess{},
		},
		args:    []string{"python3", "-c", "print(1)", "--not-a-flag"},
		env:     []string{"A=1", "B=2"},
		dir:     "/tmp",
		timeout: 1500 * time.Millisecond,
		json:    true,
		given: map[string]string{
			"memory": "1GiB", "cpus": "0.5", "pids": "64", "tmp-size": "16M", "workspace-size": "100k",
		},
		seccomp: seccompFlag{value: "default"},
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
	if cfg.opts.Start != (sandbox.InProcess{}) {
		t.Errorf("Options.Start is %#v, want InProcess{} in the CLI", cfg.opts.Start)
	}
	// Limits not given stay zero, the library's defaults, and the policy
	// is the library's default: refuse without a cgroup.
	o := cfg.opts
	if o.Limits != (sandbox.Limits{}) || o.Workspace != (sandbox.FreshWorkspace{}) || len(cfg.given) != 0 {
		t.Errorf("parseRun without limit flags: %+v, given %q; want zero limits and EnforceLimits", o, cfg.given)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"4096", 4096},
		{"100B", 100},
		{"100b", 100},
		{"100k", 100 << 10},
		{"100K", 100 << 10},
		{"100KB", 100 << 10},
		{"100Ki", 100 << 10},
		{"100KiB", 100 << 10},
		{"512M", 512 << 20},
		{"512m", 512 << 20},
		{"512MiB", 512 << 20},
		{"512mib", 512 << 20},
		{"1G", 1 << 30},
		{"1GiB", 1 << 30},
		{"1gb", 1 << 30},
		{"1.5G", 3 << 29},
		{".5M", 1 << 19},
		{"0.1K", 102},
		{"8589934591G", 8589934591 << 30},
	} {
		got, err := parseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"", "B", "K", "KiB", "i", "-1", "-1K", "+1K", "1T", "1KK", "1Bi", "1iB", "1i", "1 M", " 1M", "1M ",
		"1.5", "1.5B", "1e3", "1e3K", "0x10", "0x10K", "NaN", "Inf", "InfK", "1_000", "lots",
		"8589934592G", "9223372036854775808", "99999999999999999999K",
	} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0"}, {1, "1"}, {1000, "1000"}, {1 << 10, "1K"}, {1536, "1536"}, {3 << 19, "1536K"},
		{512 << 20, "512M"}, {1 << 30, "1G"}, {sandbox.DefaultMemory, "512M"},
	} {
		if got := formatSize(tc.in); got != tc.want {
			t.Errorf("formatSize(%d) = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := parseSize(formatSize(tc.in)); err != nil || back != tc.in {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v", tc.in, back, err)
		}
	}
}

// TestParseRunLimits checks what each limit flag sets in Options: "no
// limit" is a negative value there, and zero (the library's default) is
// never the result of a flag that was given.
func TestParseRunLimits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want func(o sandbox.Options) bool
	}{
		{[]string{"--memory", "0"}, func(o sandbox.Options) bool { return o.Limits.Memory < 0 }},
		{[]string{"--memory", "0M"}, func(o sandbox.Options) bool { return o.Limits.Memory < 0 }},
		{[]string{"--memory", "-1"}, func(o sandbox.Options) bool { return o.Limits.Memory < 0 }},
		{[]string{"--memory", "unlimited"}, func(o sandbox.Options) bool { return o.Limits.Memory < 0 }},
		{[]string{"--memory", "Unlimited"}, func(o sandbox.Options) bool { return o.Limits.Memory < 0 }},
		{[]string{"--memory=32M"}, func(o sandbox.Options) bool { return o.Limits.Memory == 32<<20 }},
		{[]string{"--memory", "16M"}, func(o sandbox.Options) bool { return o.Limits.Memory == sandbox.MinMemory }},
		{[]string{"--cpus", "0"}, func(o sandbox.Options) bool { return o.Limits.CPUs < 0 }},
		{[]string{"--cpus", "0.0"}, func(o sandbox.Options) bool { return o.Limits.CPUs < 0 }},
		{[]string{"--cpus", "-1"}, func(o sandbox.Options) bool { return o.Limits.CPUs < 0 }},
		{[]string{"--cpus", "unlimited"}, func(o sandbox.Options) bool { return o.Limits.CPUs < 0 }},
		{[]string{"--cpus", "2"}, func(o sandbox.Options) bool { return o.Limits.CPUs == 2 }},
		{[]string{"--cpus", ".25"}, func(o sandbox.Options) bool { return o.Limits.CPUs == 0.25 }},
		{[]string{"--pids", "0"}, func(o sandbox.Options) bool { return o.Limits.Pids < 0 }},
		{[]string{"--pids", "-1"}, func(o sandbox.Options) bool { return o.Limits.Pids < 0 }},
		{[]string{"--pids", "unlimited"}, func(o sandbox.Options) bool { return o.Limits.Pids < 0 }},
		{[]string{"--pids", "1"}, func(o sandbox.Options) bool { return o.Limits.Pids == 1 }},
		{[]string{"--tmp-size", "1"}, func(o sandbox.Options) bool { return o.Limits.TmpSize == 1 }},
		{[]string{"--workspace-size", "2G"}, func(o sandbox.Options) bool { return o.Workspace == sandbox.FreshWorkspace{Size: 2 << 30} }},
		{[]string{"--max-file-size", "100M"}, func(o sandbox.Options) bool { return o.Limits.FileSize == 100<<20 }},
		{[]string{"--max-file-size", "unlimited"}, func(o sandbox.Options) bool { return o.Limits.FileSize < 0 }},
		{[]string{"--best-effort"}, func(o sandbox.Options) bool { return o.Limits.Policy == sandbox.BestEffortLimits }},
		{[]string{"--best-effort=false"}, func(o sandbox.Options) bool { return o.Limits.Policy == sandbox.EnforceLimits }},
		// The last of a repeated flag wins, as for the other flags.
		{[]string{"--memory", "unlimited", "--memory", "32M"}, func(o sandbox.Options) bool { return o.Limits.Memory == 32<<20 }},
	} {
		cfg, err := parseRun(append(tc.args, "--", "true"))
		if err != nil {
			t.Errorf("parseRun(%q): %v", tc.args, err)
			continue
		}
		if !tc.want(cfg.opts) {
			t.Errorf("parseRun(%q): Options %+v, not what the flag asks", tc.args, cfg.opts)
		}
		if err := sandbox.New(cfg.opts).Err(); err != nil {
			t.Errorf("parseRun(%q): New: %v", tc.args, err)
		}
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
		{[]string{"--memory", "lots", "--", "true"}, "-memory"},
		{[]string{"--memory", "-2", "--", "true"}, "-memory"},
		{[]string{"--memory", "1T", "--", "true"}, "-memory"},
		{[]string{"--memory", "", "--", "true"}, "-memory"},
		{[]string{"--memory"}, "-memory"},
		{[]string{"--cpus", "half", "--", "true"}, "-cpus"},
		{[]string{"--cpus", "-0.5", "--", "true"}, "-cpus"},
		{[]string{"--cpus", "NaN", "--", "true"}, "-cpus"},
		{[]string{"--cpus", "Inf", "--", "true"}, "-cpus"},
		{[]string{"--pids", "1.5", "--", "true"}, "-pids"},
		{[]string{"--pids", "-3", "--", "true"}, "-pids"},
		{[]string{"--pids", "many", "--", "true"}, "-pids"},
		{[]string{"--tmp-size", "0", "--", "true"}, "-tmp-size"},
		{[]string{"--tmp-size", "unlimited", "--", "true"}, "-tmp-size"},
		{[]string{"--tmp-size", "-1", "--", "true"}, "-tmp-size"},
		{[]string{"--workspace-size", "0K", "--", "true"}, "-workspace-size"},
		{[]string{"--workspace-size", "big", "--", "true"}, "-workspace-size"},
		{[]string{"--best-effort=sometimes", "--", "true"}, "-best-effort"},
		{[]string{"--max-file-size", "big", "--", "true"}, "-max-file-size"},
		{[]string{"-t", "--no-tty", "--", "true"}, "--tty and --no-tty"},
		// Flags whose Options rule each other out.
		{[]string{"--rootfs", "/", "--image", "oci:/nowhere", "--", "true"}, "--rootfs / and --image"},
		{[]string{"--seccomp", "unconfined", "--seccomp-kill", "--", "true"}, "--seccomp-kill needs a filter"},
		{[]string{"--secret", "PATH=api.example.com", "--", "true"}, "--secret needs --net allow"},
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

func TestParseRunTTY(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want ttyMode
	}{
		{[]string{"--", "true"}, ttyAuto},
		{[]string{"-t", "--", "true"}, ttyForce},
		{[]string{"--tty", "--", "true"}, ttyForce},
		{[]string{"--no-tty", "--", "true"}, ttyNone},
	} {
		cfg, err := parseRun(tc.args)
		if err != nil {
			t.Errorf("parseRun(%q): %v", tc.args, err)
		} else if cfg.tty != tc.want {
			t.Errorf("parseRun(%q): tty %v, want %v", tc.args, cfg.tty, tc.want)
		}
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

	// Values the flags accept but the library refuses: the error names
	// the flag and the value as it was typed.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpus", "2000"}, `--cpus "2000"`},
		{[]string{"--cpus", "0.001"}, `--cpus "0.001"`},
		{[]string{"--memory", "100"}, `--memory "100": is below the 16777216 bytes (16 MiB) a sandbox needs to start`},
		{[]string{"--workspace", "/nonexistent-dir-for-test"}, `--workspace "/nonexistent-dir-for-test": does not exist`},
	} {
		cfg, err := parseRun(append(tc.args, "--", "true"))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.explain(sandbox.New(cfg.opts).Err())
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sandbox.ErrInvalidOption) {
			t.Errorf("%q: error = %v, want one naming %s that matches ErrInvalidOption", tc.args, err, tc.want)
		}
	}
}

func TestCgroupRefused(t *testing.T) {
	refusal := &sandbox.UnsupportedError{Feature: "cgroup limits", Reason: "no writable cgroup", Err: sandbox.ErrNoCgroup}
	if !cgroupRefused(refusal) || !cgroupRefused(fmt.Errorf("wrapped: %w", refusal)) {
		t.Error("cgroupRefused does not recognise the library's refusal")
	}
	for _, err := range []error{nil, errors.New("cgroup"), &sandbox.UnsupportedError{Feature: "user namespaces"}} {
		if cgroupRefused(err) {
			t.Errorf("cgroupRefused(%v) = true", err)
		}
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
		{[]string{"run", "--memory", "12X", "--", "true"}, exitFailure, "-memory"},
		{[]string{"run", "--cpus", "4096", "--", "true"}, exitFailure, `--cpus "4096"`},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(tc.args, streams{stdout: &stdout, stderr: &stderr})
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("cli(%q) = %d, stderr %q; want %d and %q in stderr", tc.args, code, stderr.String(), tc.code, tc.want)
		}
		// A usage error is its line and where to read more, not the
		// whole flag list.
		if len(tc.args) > 0 && (strings.Count(stderr.String(), "\n") > 2 || strings.Contains(stderr.String(), "--timeout")) {
			t.Errorf("cli(%q): stderr %q, want at most the error and a pointer to the help", tc.args, stderr.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--nope", "--", "true"}, "sandbox: run: flag provided but not defined: -nope\nRun \"sandbox help run\" for its flags.\n"},
		{[]string{"probe", "extra"}, "sandbox: probe: unexpected argument \"extra\"\nRun \"sandbox help probe\" for its flags.\n"},
		{[]string{"frob"}, "sandbox: unknown command \"frob\"\nRun \"sandbox help\" for the commands.\n"},
	} {
		var stdout, stderr bytes.Buffer
		if cli(tc.args, streams{stdout: &stdout, stderr: &stderr}); stderr.String() != tc.want {
			t.Errorf("cli(%q): stderr %q, want %q", tc.args, stderr.String(), tc.want)
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
		{"out of memory", &sandbox.Result{Outcome: sandbox.OutOfMemory, ExitCode: -1, Signal: 9, OOMKills: 1}, nil, 137},
		{"timeout", &sandbox.Result{Outcome: sandbox.Timeout, ExitCode: -1, Signal: 9}, nil, exitTimeout},
		{"canceled", &sandbox.Result{Outcome: sandbox.Canceled, ExitCode: -1, Signal: 9}, nil, 130},
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

// TestJSONResult: --json prints the Result as it serialises itself,
// beside the error, and only the error when there is no Result.
func TestJSONResult(t *testing.T) {
	res := &sandbox.Result{
		Outcome: sandbox.OutOfMemory, ExitCode: -1, Signal: 9,
		UserTime: 2 * time.Millisecond, SystemTime: time.Millisecond,
		CgroupCPU: 5 * time.Millisecond, CPUTime: 5 * time.Millisecond, MemoryPeak: 32 << 20, OOMKills: 1, PidsLimitHit: true,
		Limits: []sandbox.Limit{
			{Name: "memory", Value: "33554432 bytes", Enforced: true, By: "cgroup v2"},
			{Name: "cpu", Value: "none", By: "not limited (Options)"},
		},
	}
	b, err := json.Marshal(jsonOutput{Result: res, Error: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"outcome": "out of memory", "signal": 9.0, "exit_code": -1.0, "error": "boom",
		"oom_kills": 1.0, "pids_limit_hit": true, "memory_peak_bytes": float64(32 << 20),
		"cgroup_cpu_ns": 5e6, "cpu_time_ns": 5e6, "user_time_ns": 2e6, "system_time_ns": 1e6,
		"limits": []any{
			map[string]any{"name": "memory", "value": "33554432 bytes", "enforced": true, "by": "cgroup v2"},
			map[string]any{"name": "cpu", "value": "none", "enforced": false, "by": "not limited (Options)"},
		},
	} {
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s = %#v, want %#v (in %s)", key, got[key], want, b)
		}
	}

	b, err = json.Marshal(jsonOutput{Error: "boom"})
	if err != nil || string(b) != `{"error":"boom"}` {
		t.Errorf("without a Result: %s, %v; want only the error", b, err)
	}
}

// canCreateCgroups reports whether this user may be able to make cgroups
// for the runs' limits: it is root, or it can write its own cgroup (the v1
// memory one, or the v2 one).
func canCreateCgroups() bool {
	if os.Geteuid() == 0 {
		return true
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir = filepath.Join("/sys/fs/cgroup", parts[2])
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		default:
			continue
		}
		if unix.Access(dir, unix.W_OK) == nil {
			return true
		}
	}
	return false
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

// runTool runs the built tool bin with args as a user would and returns
// its exit status and output. A tool still running after two minutes is
// killed, so that a hang fails the test instead of stalling the suite.
func runTool(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// bestEffortHere are the flags a run of the tool needs here: --best-effort
// where this process cannot create cgroups, none elsewhere.
func bestEffortHere() []string {
	if !canCreateCgroups() {
		return []string{"--best-effort"}
	}
	return nil
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
		return runTool(t, bin, args...)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // wanted stdout, if not empty
		err  string // wanted in stderr, if not empty
	}{
		// --best-effort: these are not about limits, and must run also
		// where no writable cgroup exists.
		{"exit code", []string{"run", "--best-effort", "--", "/bin/sh", "-c", "exit 3"}, 3, "", ""},
		{"streams output", []string{"run", "--best-effort", "--env", "A=b", "--", "/bin/sh", "-c", "echo $A; echo oops >&2"}, 0, "b\n", "oops\n"},
		{"timeout", []string{"run", "--best-effort", "--timeout", "200ms", "--", "/bin/sleep", "10"}, exitTimeout, "", "--timeout"},
		{"not found", []string{"run", "--best-effort", "--", "/nonexistent-prog"}, exitNotFound, "", `"/nonexistent-prog" not found: no such file`},
		{"not in PATH", []string{"run", "--best-effort", "--", "nonexistent-prog"}, exitNotFound, "", `"nonexistent-prog" not found in the sandbox's PATH`},
		{"memory below the minimum", []string{"run", "--memory", "64K", "--", "/bin/true"}, exitFailure, "",
			`--memory "64K": is below the 16777216 bytes (16 MiB) a sandbox needs to start`},
		{"no limits", []string{"run", "--memory", "0", "--cpus", "unlimited", "--pids", "-1", "--", "/bin/sh", "-c", "echo ok"}, 0, "ok\n", ""},
		{"bad --memory", []string{"run", "--memory", "12X", "--", "/bin/true"}, exitFailure, "", "-memory"},
		{"seccomp refusal reported with -v", []string{"run", "--best-effort", "-v", "--", "python3", "-c",
			"import ctypes; print(ctypes.CDLL(None).unshare(0x10000000))"}, 0, "-1\n", "the seccomp policy refused: unshare (EPERM)"},
		{"seccomp kill", []string{"run", "--best-effort", "--seccomp-kill", "--", "python3", "-c",
			"import ctypes; ctypes.CDLL(None).unshare(0x10000000); print('not reached')"}, exitSeccomp, "", "killed at syscall unshare"},
		{"seccomp unconfined", []string{"run", "--best-effort", "--seccomp", "unconfined", "--", "python3", "-c",
			"import ctypes; print(ctypes.CDLL(None).personality(0xffffffff) >= 0)"}, 0, "True\n", ""},
		{"seccomp bad profile", []string{"run", "--seccomp", "testdata/bad-profile.json", "--", "/bin/true"}, exitFailure, "",
			`syscalls[0].action: "SCMP_ACT_TRAP"`},
		{"seccomp profile", []string{"run", "--best-effort", "--seccomp", "testdata/no-mkdir.json", "--", "/bin/sh", "-c",
			"mkdir /tmp/d 2>/dev/null || echo refused"}, 0, "refused\n", "unknown on"},
		// /proc/net/dev has a "name:" line per interface.
		{"net none", []string{"run", "--best-effort", "--", "/bin/sh", "-c", "grep : /proc/net/dev | cut -d: -f1"}, 0, "    lo\n", ""},
		{"net host", []string{"run", "--best-effort", "--net", "host", "--", "/bin/sh", "-c",
			"test $(grep -c : /proc/net/dev) -gt 1 && echo host"}, 0, "host\n", ""},
		{"net allow refuses", []string{"run", "--best-effort", "--net", "allow:pypi.org", "--", "python3", "-c",
			"import urllib.request as u\ntry: u.urlopen('http://evil.example.net/x')\nexcept Exception as e: print(e)"},
			0, "HTTP Error 403: Forbidden\n", "egress refused: GET evil.example.net:80: evil.example.net is not on the allowlist"},
		{"net bad entry", []string{"run", "--net", "allow:pypi.org,pypi.org:99999", "--", "/bin/true"}, exitFailure, "",
			`--net "pypi.org:99999": port 99999 out of range`},
		{"net bad mode", []string{"run", "--net", "all", "--", "/bin/true"}, exitFailure, "", `"none", "allow:HOST[,HOST...]" or "host"`},
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

	// runJSON runs the tool with --json and decodes its stdout.
	runJSON := func(t *testing.T, args ...string) (code int, got map[string]any, stderr string) {
		t.Helper()
		code, stdout, stderr := run(t, append([]string{"run", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s\nstderr: %s", err, stdout, stderr)
		}
		return code, got, stderr
	}

	// memoryLimit returns the "memory" entry of a --json "limits" list.
	memoryLimit := func(t *testing.T, got map[string]any) map[string]any {
		t.Helper()
		limits, ok := got["limits"].([]any)
		if !ok {
			t.Fatalf("limits = %#v, want a list", got["limits"])
		}
		for _, l := range limits {
			if m, _ := l.(map[string]any); m["name"] == "memory" {
				return m
			}
		}
		t.Fatalf("no memory limit in %v", limits)
		return nil
	}

	t.Run("json connections", func(t *testing.T) {
		code, got, stderr := runJSON(t, "--best-effort", "--net", "allow:pypi.org", "--", "python3", "-c",
			"import urllib.request as u\ntry: u.urlopen('http://evil.example.net/x')\nexcept Exception: pass")
		if code != 0 {
			t.Fatalf("exit status %d; stderr %q", code, stderr)
		}
		cs, _ := got["connections"].([]any)
		if len(cs) != 1 {
			t.Fatalf("connections = %v, want one", got["connections"])
		}
		c, _ := cs[0].(map[string]any)
		if c["host"] != "evil.example.net" || c["port"] != 80.0 || c["allowed"] != false || c["status"] != 403.0 ||
			c["method"] != "GET" || c["bytes_up"].(float64) < 20 {
			t.Errorf("connection %v", c)
		}
		if strings.Contains(stderr, "egress") {
			t.Errorf("--json printed the report on stderr too: %q", stderr)
		}
	})

	t.Run("json", func(t *testing.T) {
		code, got, stderr := runJSON(t, "--best-effort", "--", "/bin/echo", "hi")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr %q", code, stderr)
		}
		stdout, _ := json.Marshal(got)
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
		for _, key := range []string{"oom_kills", "pids_limit_hit", "memory_peak_bytes", "cgroup_cpu_ns", "limits"} {
			if _, ok := got[key]; !ok {
				t.Errorf("no %s in %s", key, stdout)
			}
		}
		if got["oom_kills"] != 0.0 || got["pids_limit_hit"] != false {
			t.Errorf("oom_kills %v, pids_limit_hit %v; want 0 and false", got["oom_kills"], got["pids_limit_hit"])
		}
	})

	// The memory limit is in place: by a cgroup where one can be made,
	// else (--best-effort) by RLIMIT_DATA.
	t.Run("memory limit", func(t *testing.T) {
		code, got, stderr := runJSON(t, "--best-effort", "--memory", "32M", "--", "/bin/sh", "-c", "exit 0")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr %q, result %v", code, stderr, got)
		}
		mem := memoryLimit(t, got)
		by, _ := mem["by"].(string)
		if mem["enforced"] != true || mem["value"] != "33554432 bytes" ||
			!(strings.HasPrefix(by, "cgroup") || strings.HasPrefix(by, "RLIMIT_DATA")) {
			t.Errorf("memory limit %v, want 33554432 bytes enforced by a cgroup or RLIMIT_DATA", mem)
		}
		t.Logf("memory limit enforced by %s", by)
	})

	// A program that outgrows --memory: with a cgroup, the OOM killer ends
	// it, and the tool says so and exits 128+SIGKILL. (tail keeps the
	// endless "line" of /dev/zero in memory.)
	t.Run("out of memory", func(t *testing.T) {
		args := []string{"--best-effort", "--memory", "32M", "--timeout", "20s", "--", "tail", "/dev/zero"}
		code, got, stderr := runJSON(t, args...)
		if by, _ := memoryLimit(t, got)["by"].(string); !strings.HasPrefix(by, "cgroup") {
			// RLIMIT_DATA: the allocation fails instead, and tail says so.
			if code == 0 || code == exitTimeout || got["outcome"] != "exited" {
				t.Errorf("exit status %d, result %v; want tail to fail at the rlimit", code, got)
			}
			t.Skipf("no cgroup (memory limited by %s): no OOM kill to see", by)
		}
		if code != 128+9 || got["outcome"] != "out of memory" || got["oom_kills"] == 0.0 {
			t.Fatalf("exit status %d, result %v; want 137, outcome \"out of memory\" and an OOM kill; stderr %q", code, got, stderr)
		}
		if peak, _ := got["memory_peak_bytes"].(float64); peak > 32<<20 {
			t.Errorf("memory_peak_bytes = %v, over the 32M limit", peak)
		}
		code, _, stderr = run(t, append([]string{"run"}, args...)...)
		if want := "sandbox: tail: out of memory (--memory 32M)"; code != 128+9 || !strings.Contains(stderr, want) {
			t.Errorf("without --json: exit status %d, stderr %q; want 137 and %q", code, stderr, want)
		}
	})

	// --workspace keeps files from one invocation to the next; a missing
	// directory is refused, as the library refuses it, and not made.
	// Without it nothing stays.
	t.Run("workspace across invocations", func(t *testing.T) {
		parent, err := os.MkdirTemp("", "sandbox-cli-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(parent)
		os.Chmod(parent, 0o755)
		ws := filepath.Join(parent, "project")
		code, _, stderr := run(t, "run", "--best-effort", "--workspace", ws, "--", "/bin/true")
		if _, err := os.Stat(ws); code != exitFailure || !strings.Contains(stderr, "does not exist") || err == nil {
			t.Errorf("a missing --workspace: exit %d, stderr %q, made: %v; want it refused and not made", code, stderr, err == nil)
		}
		workspaceFor(t, ws)
		for i, c := range []struct{ script, want string }{
			{"echo print 1 > main.py; ls", "main.py\n"},
			{"cat main.py; echo more >> main.py", "print 1\n"},
			{"cat main.py", "print 1\nmore\n"},
		} {
			code, out, stderr := run(t, "run", "--best-effort", "--workspace", ws, "--", "/bin/sh", "-c", c.script)
			if code != 0 || out != c.want {
				t.Fatalf("invocation %d: exit %d, stdout %q (want %q), stderr %q", i, code, out, c.want, stderr)
			}
		}
		if b, err := os.ReadFile(filepath.Join(ws, "main.py")); err != nil || string(b) != "print 1\nmore\n" {
			t.Errorf("host sees %q, %v", b, err)
		}
		run(t, "run", "--best-effort", "--", "/bin/sh", "-c", "echo x > /workspace/f")
		if code, out, _ := run(t, "run", "--best-effort", "--", "/bin/ls", "/workspace"); code != 0 || out != "" {
			t.Errorf("without --workspace, a later run saw %q", out)
		}
	})

	// --max-file-size bounds a file in a host workspace: dd fails as a
	// program does at EFBIG, not killed by SIGXFSZ; without it 100 MB fit.
	t.Run("max file size", func(t *testing.T) {
		parent, err := os.MkdirTemp("", "sandbox-cli-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(parent)
		os.Chmod(parent, 0o755) // t.TempDir's parent is private to root
		ws := filepath.Join(parent, "ws")
		workspaceFor(t, ws)
		dd := `dd if=/dev/zero of=big bs=1M count=100 2>&1 >/dev/null | grep -o 'File too large'; echo "exit ${PIPESTATUS[0]}"`
		code, out, stderr := run(t, "run", "--best-effort", "--workspace", ws, "--max-file-size", "1M", "--", "bash", "-c", dd)
		if code != 0 || out != "File too large\nexit 1\n" {
			t.Errorf("--max-file-size 1M: exit %d, stdout %q, stderr %q; want dd to fail with \"File too large\" and exit 1", code, out, stderr)
		}
		code, out, stderr = run(t, "run", "--best-effort", "--workspace", ws, "--", "bash", "-c", dd)
		if fi, err := os.Stat(filepath.Join(ws, "big")); code != 0 || out != "exit 0\n" || err != nil || fi.Size() != 100<<20 {
			t.Errorf("default: exit %d, stdout %q, stderr %q, host file %v; want 100 MiB written", code, out, stderr, err)
		}
	})

	// A refused syscall is on stderr only with -v; --json always lists it.
	t.Run("denials quiet by default", func(t *testing.T) {
		prog := []string{"python3", "-c", "import ctypes; print(ctypes.CDLL(None).unshare(0x10000000))"}
		code, out, stderr := run(t, append([]string{"run", "--best-effort", "--"}, prog...)...)
		if code != 0 || out != "-1\n" || stderr != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want -1 and nothing on stderr", code, out, stderr)
		}
		code, got, stderr := runJSON(t, append([]string{"--best-effort", "--"}, prog...)...)
		if ds, _ := got["denials"].([]any); code != 0 || len(ds) != 1 || stderr != "" || ds[0].(map[string]any)["syscall"] != "unshare" {
			t.Errorf("--json: exit %d, denials %v, stderr %q; want unshare in denials", code, got["denials"], stderr)
		}
	})

	// probe's first line is its verdict for this user: 0 where a default
	// run works, 2 where only --best-effort runs do, saying how to fix it.
	t.Run("probe", func(t *testing.T) {
		code, out, stderr := run(t, "probe")
		first, _, _ := strings.Cut(out, "\n")
		switch code {
		case 0:
			if first != "sandboxes can run on this host" {
				t.Errorf("exit 0, first line %q", first)
			}
		case exitBestEffortOnly:
			if !strings.Contains(first, "Delegate=yes") || !strings.Contains(first, "--best-effort") {
				t.Errorf("exit 2, first line %q; want both fixes", first)
			}
			code, _, stderr := run(t, "run", "--", "/bin/true")
			if code != exitFailure || !strings.HasPrefix(stderr, "sandbox: pass --best-effort") {
				t.Errorf("probe says a default run is refused; the run: exit %d, stderr %q, want a refusal that starts with the fix", code, stderr)
			}
		default:
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		jsonCode, jsonOut, _ := run(t, "probe", "--json")
		var got struct {
			Summary       string `json:"summary"`
			CanRunDefault bool   `json:"can_run_default"`
		}
		if err := json.Unmarshal([]byte(jsonOut), &got); err != nil || jsonCode != code || got.Summary != first || got.CanRunDefault != (code == 0) {
			t.Errorf("probe --json: exit %d, %+v (%v); want exit %d, the summary %q and can_run_default %v", jsonCode, got, err, code, first, code == 0)
		}
	})

	// Where this user cannot make cgroups, a run with limits is refused
	// unless --best-effort, and the refusal says how to delegate a cgroup
	// and how to run anyway.
	t.Run("refused without cgroup", func(t *testing.T) {
		if canCreateCgroups() {
			t.Skip("this user can create cgroups: nothing is refused")
		}
		code, got, stderr := runJSON(t, "--", "/bin/sh", "-c", "exit 0")
		switch code {
		case 0:
			// The library found a writable cgroup that the check above
			// did not see; then it must be enforcing with it.
			if by, _ := memoryLimit(t, got)["by"].(string); !strings.HasPrefix(by, "cgroup") {
				t.Errorf("ran with the default policy, memory limit by %q, want a cgroup", by)
			}
		case exitFailure:
			if !strings.HasPrefix(stderr, "sandbox: pass --best-effort") {
				t.Errorf("stderr %q does not start with what to do", stderr)
			}
			for _, want := range []string{"Delegate=yes", "--best-effort"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not mention %q", stderr, want)
				}
			}
			if msg, _ := got["error"].(string); !strings.Contains(msg, "Delegate=yes") {
				t.Errorf("JSON error %q does not name the missing delegation", msg)
			}
		default:
			t.Errorf("exit status %d, want 0 or %d; stderr %q", code, exitFailure, stderr)
		}
	})
}

// workspaceFor makes dir a --workspace the sandbox's host uid can write
// (65534 when the test runs as root).
func workspaceFor(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		uid, gid := (&sandbox.Options{}).HostIDs()
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPolicyExport: the printed policy reads back as the default.
func TestPolicyExport(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := cli([]string{"policy", "export"}, streams{stdout: &out, stderr: &errOut}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	p, unknown, err := seccompprofile.FromDocker(out.Bytes())
	if err != nil || len(unknown) > 0 {
		t.Fatalf("reading back the export: %v, unknown %v", err, unknown)
	}
	if err := sandbox.New(sandbox.Options{Seccomp: p}).Err(); err != nil {
		t.Fatalf("the exported policy does not compile: %v", err)
	}
	if !strings.Contains(out.String(), `"SCMP_ACT_ERRNO"`) || !strings.Contains(out.String(), `"openat"`) {
		t.Errorf("export lacks the default action or the allowlist:\n%.300s", out.String())
	}
	if code := cli([]string{"policy", "import"}, streams{stdout: &out, stderr: &errOut}); code != exitFailure {
		t.Errorf("policy import: exit %d, want %d", code, exitFailure)
	}
}

func TestBindIndex(t *testing.T) {
	for _, tc := range []struct {
		option, n string
		ok        bool
	}{
		{"Options.Binds[0]", "0", true},
		{"Options.Binds[12].Source", "12", true},
		{"Options.Binds[]", "", false},
		{"Options.Binds[x]", "", false},
		{"Options.Binds[1x]", "", false},
		{"Options.Binds[1", "", false},
		{"Cmd.Options.Binds[1]", "", false},
		{"Options.Seccomp", "", false},
	} {
		if n, ok := bindIndex(tc.option); n != tc.n || ok != tc.ok {
			t.Errorf("bindIndex(%q) = %q, %v, want %q, %v", tc.option, n, ok, tc.n, tc.ok)
		}
	}
}
