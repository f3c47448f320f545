package sandboxtest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/sandboxtest"
)

// anywhere lets the tests run where no cgroup can hold the limits (an
// unprivileged user on a cgroup v1 host), with rlimits standing in;
// TestDefaultOptionsUseACgroup covers the default.
var anywhere = sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}}

// requireSandbox skips the test the way sandboxtest.New would, for tests
// whose sandboxes are made with a recorder, which would record the skip
// instead of skipping.
func requireSandbox(t *testing.T, opts sandbox.Options) {
	t.Helper()
	sandboxtest.New(t, opts)
}

func TestShellWorkspace(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, anywhere)
	if err := os.WriteFile(filepath.Join(sb.Dir(), "in.txt"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb.Shell("tr a-z A-Z < in.txt > out.txt && pwd").ExpectSuccess().ExpectStdoutContains("/workspace")
	got, err := os.ReadFile(filepath.Join(sb.Dir(), "out.txt"))
	if err != nil {
		t.Fatalf("the snippet's output file on the host: %v", err)
	}
	if string(got) != "HELLO FROM THE HOST\n" {
		t.Errorf("out.txt = %q, want the input upper-cased", got)
	}
}

func TestPython(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, anywhere)
	res := sb.Python("import os, sys\nprint(6 * 7, os.getuid())\nprint('warning', file=sys.stderr)\nopen('py.txt', 'w').write('written')")
	res.ExpectSuccess().ExpectStdoutContains("42 1000").ExpectStderrContains("warning")
	if got, err := os.ReadFile(filepath.Join(sb.Dir(), "py.txt")); err != nil || string(got) != "written" {
		t.Errorf("py.txt = %q, %v; want \"written\"", got, err)
	}
}

func TestGo(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, anywhere)
	src := `package main

import (
	"fmt"
	"os"
)

func main() {
	host, _ := os.Hostname()
	fmt.Println("pid", os.Getpid(), "on", host, "args", os.Args[1:])
	os.Exit(7)
}
`
	sb.Go(src, "a b", "c").ExpectExit(7).ExpectStdoutContains("pid 1 on sandbox args [a b c]")
}

func TestGoFile(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, anywhere)
	sb.GoFile("testdata/args.go", "first", "second").ExpectSuccess().
		ExpectStdoutContains("first\nsecond\nuid 1000 in /workspace\n")
}

func TestBinary(t *testing.T) {
	t.Parallel()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the binary: %v", err)
	}
	// A binary the sandbox cannot have from the host's /usr: built here,
	// outside any directory it binds.
	bin := filepath.Join(t.TempDir(), "args")
	build := exec.Command(gocmd, "build", "-o", bin, "testdata/args.go")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sb := sandboxtest.New(t, anywhere)
	sb.Binary(bin, "x").ExpectSuccess().ExpectStdoutContains("x\nuid 1000 in /workspace\n")
	// Each program gets a directory of its own: the same name twice is
	// fine.
	sb.Binary(bin, "y").ExpectSuccess().ExpectStdoutContains("y\n")
}

func TestExpectExitAndSuccess(t *testing.T) {
	t.Parallel()
	requireSandbox(t, anywhere)
	script := "echo some output; echo an error >&2; exit 3"
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectExit(3).ExpectOutcome(sandbox.Exited)
	}).wantPass(t)
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectSuccess()
	}).wantFailure(t, "want exit code 0", "outcome: exited, exit code 3", "some output", "an error", `sh -c "echo some output;`)
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectExit(4)
	}).wantFailure(t, "want exit code 4", "exit code 3")
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectStdoutContains("other output")
	}).wantFailure(t, `want stdout containing "other output"`, "some output")
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, anywhere)
	sb.Timeout = time.Second
	// A timeout is how the run ended, not a failure to run it.
	res := sb.Shell("echo started; exec sleep 60").ExpectOutcome(sandbox.Timeout).ExpectStdoutContains("started")
	if s := res.String(); !strings.Contains(s, "timeout of 1s") {
		t.Errorf("summary does not name the timeout:\n%s", s)
	}
}

func TestExpectDenied(t *testing.T) {
	t.Parallel()
	requireSandbox(t, anywhere)
	// unshare is refused by the default policy, with EPERM.
	script := "unshare -U true || echo refused"
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectSuccess().ExpectDenied("unshare").ExpectStdoutContains("refused")
	}).wantPass(t)
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectDenied("ptrace")
	}).wantFailure(t, "want the syscall ptrace refused", "refused syscalls: unshare (operation not permitted) x1")
}

func TestSummaryShowsHeadAndTail(t *testing.T) {
	t.Parallel()
	requireSandbox(t, anywhere)
	// 100,000 bytes between a first and a last line: the message keeps
	// both and leaves out the middle.
	script := `echo FIRST; head -c 100000 /dev/zero | tr '\0' x; echo; echo LAST; exit 1`
	r := record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Shell(script).ExpectSuccess()
	})
	r.wantFailure(t, "FIRST", "LAST", "stdout (100012 bytes)", "bytes not shown")
	if n := len(r.output()); n > 4000 {
		t.Errorf("the failure message is %d bytes; want it short:\n%s", n, r.output())
	}
}

func TestSetupErrorFails(t *testing.T) {
	t.Parallel()
	requireSandbox(t, anywhere)
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, anywhere).Run(sandbox.Command("no-such-program"))
		tb.Errorf("not reached: Run should have ended the test")
	}).wantFailure(t, "no-such-program", "not found")
	if _, err := exec.LookPath("go"); err == nil {
		r := record(t, func(tb testing.TB) {
			sandboxtest.New(tb, anywhere).Go("package main\nfunc main() { undefined() }\n")
		})
		r.wantFailure(t, "go build", "undefined")
		if strings.Contains(r.output(), "not reached") {
			t.Errorf("the test went on after a failed build")
		}
	}
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, sandbox.Options{Workspace: sandbox.HostWorkspace{Dir: "/tmp"}, Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})
	}).wantFailure(t, "Options.Workspace", "leave it nil")
	record(t, func(tb testing.TB) {
		sandboxtest.New(tb, sandbox.Options{Hostname: "a/b", Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})
	}).wantFailure(t, "Options.Hostname")
}

// TestParallelWorkspaces runs subtests at once, each writing a file of its
// own name into its workspace: each must see its own file only.
func TestParallelWorkspaces(t *testing.T) {
	t.Parallel()
	dirs := make([]string, 4)
	for i := range dirs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			sb := sandboxtest.New(t, anywhere)
			dirs[i] = sb.Dir()
			name := fmt.Sprintf("mine-%d", i)
			res := sb.Shell("sleep 0.2; echo > " + name + "; ls").ExpectSuccess()
			if got := string(res.Stdout); got != name+"\n" {
				t.Errorf("workspace holds %q, want only %s", got, name)
			}
			entries, err := os.ReadDir(sb.Dir())
			if err != nil || len(entries) != 1 || entries[0].Name() != name {
				t.Errorf("the host's workspace holds %v (%v), want only %s", entries, err, name)
			}
		})
	}
	t.Cleanup(func() {
		for i := range dirs {
			for j := range i {
				if dirs[i] != "" && dirs[i] == dirs[j] {
					t.Errorf("subtests %d and %d share the workspace %s", j, i, dirs[i])
				}
			}
		}
	})
}

// TestDefaultOptionsUseACgroup runs with the default Options, which need a
// cgroup: as root it shows the limits enforced by it; where there is none
// for this user, New skips, saying so.
func TestDefaultOptionsUseACgroup(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, sandbox.Options{})
	res := sb.Shell("true").ExpectSuccess()
	i := slices.IndexFunc(res.Limits, func(l sandbox.Limit) bool { return l.Name == "memory" })
	if i < 0 || !res.Limits[i].Enforced || !strings.HasPrefix(res.Limits[i].By, "cgroup") {
		t.Errorf("limits %+v, want memory enforced by a cgroup", res.Limits)
	}
}

func TestSkipWhenHostCannotSandbox(t *testing.T) {
	t.Parallel()
	full := func(missing string, detail string) *sandbox.ProbeReport {
		r := &sandbox.ProbeReport{Kernel: "6.1.0-test"}
		for _, name := range []string{"user namespace", "pid namespace", "mount namespace", "network namespace",
			"ipc namespace", "uts namespace", "cgroup namespace", "cgroup", "seccomp", "seccomp user notification"} {
			r.Layers = append(r.Layers, sandbox.Layer{Name: name, Available: name != missing, Detail: detail})
		}
		return r
	}
	probe := func(r *sandbox.ProbeReport) func() (*sandbox.ProbeReport, error) {
		return func() (*sandbox.ProbeReport, error) { return r, nil }
	}

	r := record(t, func(tb testing.TB) {
		sandboxtest.NewWithProbe(tb, anywhere, probe(full("user namespace", "user.max_user_namespaces is 0")))
		tb.Errorf("not reached: New should have skipped")
	})
	if !r.Skipped() || r.Failed() {
		t.Fatalf("no user namespace: want a skip, got failed=%v skipped=%v:\n%s", r.Failed(), r.Skipped(), r.output())
	}
	for _, want := range []string{"cannot build sandboxes", "kernel 6.1.0-test", "user namespace: user.max_user_namespaces is 0"} {
		if !strings.Contains(r.output(), want) {
			t.Errorf("skip message lacks %q:\n%s", want, r.output())
		}
	}

	// No cgroup: a skip that says how to run anyway, unless the Options
	// already do.
	noCgroup := full("cgroup", "cgroup v1: /sys/fs/cgroup/memory is not writable by uid 1001")
	r = record(t, func(tb testing.TB) { sandboxtest.NewWithProbe(tb, sandbox.Options{}, probe(noCgroup)) })
	if !r.Skipped() || !strings.Contains(r.output(), "not writable by uid 1001") || !strings.Contains(r.output(), "BestEffortLimits") {
		t.Errorf("no cgroup: want a skip naming the cgroup and BestEffortLimits, got skipped=%v:\n%s", r.Skipped(), r.output())
	}
	record(t, func(tb testing.TB) { sandboxtest.NewWithProbe(tb, anywhere, probe(noCgroup)) }).wantPass(t)

	if got := sandboxtest.SkipReason(full("", ""), sandbox.Options{}); got != "" {
		t.Errorf("every layer available: skip reason %q, want none", got)
	}

	// A probe that fails is not a host that cannot sandbox.
	record(t, func(tb testing.TB) {
		sandboxtest.NewWithProbe(tb, anywhere, func() (*sandbox.ProbeReport, error) {
			return nil, fmt.Errorf("probe broke")
		})
	}).wantFailure(t, "probe broke")
}

func TestSkipWhenRunNotSupported(t *testing.T) {
	t.Parallel()
	requireSandbox(t, anywhere)
	refused := &sandbox.UnsupportedError{Feature: "cgroup limits", Reason: "no cgroup here", Err: sandbox.ErrNoCgroup,
		Hint: "set Options.Limits.Policy = BestEffortLimits"}
	for _, tc := range []struct {
		name string
		err  error
		skip bool
	}{
		{"not supported", refused, true},
		{"wrapped", fmt.Errorf("outer: %w", refused), true},
		{"other error", fmt.Errorf("spawner: %w", sandbox.ErrSpawner), false},
	} {
		r := record(t, func(tb testing.TB) {
			sb := sandboxtest.New(tb, anywhere)
			sb.SetRun(func(*sandbox.Sandbox, context.Context, *sandbox.Cmd) (*sandbox.Result, error) { return nil, tc.err })
			sb.Shell("true")
			tb.Errorf("not reached")
		})
		if r.Skipped() != tc.skip || r.Failed() == tc.skip || !strings.Contains(r.output(), tc.err.Error()) {
			t.Errorf("%s: skipped=%v failed=%v, want skipped=%v and the error in:\n%s", tc.name, r.Skipped(), r.Failed(), tc.skip, r.output())
		}
	}
}

// deadlineTB has a test binary deadline, as *testing.T has.
type deadlineTB struct {
	testing.TB
	deadline time.Time
}

func (d deadlineTB) Deadline() (time.Time, bool) { return d.deadline, true }

func TestRunTimeout(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		timeout time.Duration
		tb      testing.TB
		want    time.Duration
	}{
		{0, t, sandboxtest.DefaultTimeout}, // no deadline under -timeout 0; else far
		{5 * time.Second, t, 5 * time.Second},
		{0, deadlineTB{t, now.Add(10 * time.Second)}, 9 * time.Second},
		{time.Second, deadlineTB{t, now.Add(10 * time.Second)}, time.Second},
		{0, deadlineTB{t, now.Add(-time.Second)}, time.Millisecond},
	} {
		if tc.tb == t {
			if d, ok := t.Deadline(); ok && d.Sub(now) < 2*sandboxtest.DefaultTimeout {
				continue // this binary's own deadline is near: the case would not hold
			}
		}
		if got := sandboxtest.RunTimeout(tc.timeout, tc.tb, now); got != tc.want {
			t.Errorf("runTimeout(%v, %T) = %v, want %v", tc.timeout, tc.tb, got, tc.want)
		}
	}
}
