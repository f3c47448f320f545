package service

import (
	"context"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// How runs end, as the answers say.

func TestRunCommand(t *testing.T) {
	ts := startServer(t)
	a := ts.run(t, `{"command":["sh","-c","echo hello; echo oops >&2; exit 3"]}`)
	if a.Cause != "exited" || a.Outcome != "exited" || a.ExitCode != 3 || a.Stdout != "hello\n" || a.Stderr != "oops\n" {
		t.Errorf("answer %+v, want cause exited, exit 3, stdout hello, stderr oops", a)
	}
	var memory bool
	for _, l := range a.Limits {
		if l.Name == "memory" {
			memory = true
			if noCgroup == "" && (!l.Enforced || !strings.HasPrefix(l.By, "cgroup")) {
				t.Errorf("memory limit %+v, want enforced by a cgroup", l)
			}
		}
	}
	if !memory {
		t.Errorf("limits %+v: no memory limit", a.Limits)
	}

	a = ts.run(t, `{"command":["sh","-c","cat; echo $GREETING from $(pwd)"],"stdin":"in\n","env":{"GREETING":"hi"}}`)
	if !a.success() || a.Stdout != "in\nhi from /workspace\n" {
		t.Errorf("stdin and env: %+v", a)
	}

	// A program that is not there is the program's failure, as in a shell.
	a = ts.run(t, `{"command":["no-such-program"]}`)
	if a.Cause != "exited" || a.ExitCode != 127 || a.Error == "" {
		t.Errorf("a missing program: %+v, want exit 127 and an error", a)
	}
}

func TestRunCode(t *testing.T) {
	ts := startServer(t)
	if a := ts.run(t, `{"language":"sh","code":"echo $((6 * 7))"}`); !a.success() || a.Stdout != "42\n" {
		t.Errorf("sh: %+v", a)
	}

	body := `{"language":"python","code":"import sys\nprint('python', sys.version_info[0])"}`
	if !hostHas("python3") {
		// Refused with the language named, as the server's fault.
		resp, a := ts.post(t, body)
		if resp.StatusCode != http.StatusNotImplemented || a.Field != "language" || !strings.Contains(a.Error, "python") {
			t.Errorf("python on a host without python3: %s %+v, want 501 naming the language", resp.Status, a)
		}
		return
	}
	if a := ts.run(t, body); !a.success() || a.Stdout != "python 3\n" {
		t.Errorf("python: %+v", a)
	}
}

func TestTimeout(t *testing.T) {
	ts := startServer(t)
	a := ts.run(t, `{"command":["sh","-c","echo started; sleep 1000"],"limits":{"timeout":"3s"}}`)
	if a.Cause != "timeout" || a.Outcome != "timeout" || a.Stdout != "started\n" || !strings.Contains(a.Error, "timeout of 3s") {
		t.Errorf("answer %+v, want cause timeout, the output so far, and an error naming the timeout", a)
	}
}

func TestOutOfMemory(t *testing.T) {
	if noCgroup != "" {
		t.Skipf("no writable cgroup, so no memory limit that the kernel's OOM killer enforces (RLIMIT_DATA makes allocations fail instead): %s", noCgroup)
	}
	ts := startServer(t)
	// tail keeps the last line, and /dev/zero has no line end.
	a := ts.run(t, `{"command":["tail","-n1","/dev/zero"],"limits":{"memory":"32M"}}`)
	if a.Cause != "out_of_memory" || a.Outcome != "out of memory" || a.OOMKills < 1 {
		t.Errorf("answer %+v, want cause out_of_memory", a)
	}
}

func TestSeccompDenial(t *testing.T) {
	if !hostHas("unshare") {
		t.Skip("no unshare on this host to make a refused syscall with")
	}
	ts := startServer(t)
	a := ts.run(t, `{"command":["unshare","-U","true"]}`)
	if a.Cause != "exited" || a.ExitCode == 0 || !a.denied("unshare") {
		t.Errorf("answer %+v, want unshare refused, named in denials, and the program failing", a)
	}
	a = ts.run(t, `{"command":["unshare","-U","true"],"seccomp_kill":true}`)
	if a.Cause != "seccomp_kill" || a.Violation != "unshare" {
		t.Errorf("with seccomp_kill: %+v, want cause seccomp_kill and violation unshare", a)
	}
}

func TestFloodTruncated(t *testing.T) {
	ts := startServer(t)
	const body = `{"command":["sh","-c","yes | head -c 3000000; echo done >&2"],"limits":{"output":"64K"}`
	a := ts.run(t, body+`}`)
	if !a.success() || !a.StdoutTruncated || a.StdoutBytes != 3000000 || len(a.Stdout) > 64<<10+100 ||
		!strings.Contains(a.Stdout, "omitting") || a.StderrTruncated || a.Stderr != "done\n" {
		t.Errorf("JSON: %d bytes of stdout, answer %+v; want 64K kept of 3000000, stdout truncated, stderr whole",
			len(a.Stdout), a.short())
	}

	stdout, stderr, res := ts.stream(t, context.Background(), body+`,"stream":true}`).rest(t)
	if len(stdout) != 64<<10 || strings.Trim(stdout, "y\n") != "" || stderr != "done\n" {
		t.Errorf("stream: %d bytes of stdout, stderr %q; want the first 64K and stderr whole", len(stdout), stderr)
	}
	if !res.success() || !res.StdoutTruncated || res.StdoutBytes != 3000000 || res.StderrTruncated {
		t.Errorf("stream: result %+v, want stdout truncated of 3000000 bytes", res.short())
	}
}

// TestStreamWhileRunning: the first line arrives while the program is
// still running, blocked until the test kills the process it waits for.
func TestStreamWhileRunning(t *testing.T) {
	ts := startServer(t)
	token := newToken()
	s := ts.stream(t, context.Background(), `{"command":["sh","-c","echo first; sleep 1000 `+token+`; echo second"],"stream":true}`)
	if l := s.next(t); l.Stream != "stdout" || l.Data != "first\n" {
		t.Fatalf("first line %+v, want stdout first", l)
	}
	// The run goes on: it holds its slot, and its sleep runs.
	if n := ts.metrics(t)["sandbox_serve_runs_in_flight"]; n != 1 {
		t.Errorf("runs in flight after the first line: %v, want 1", n)
	}
	for _, pid := range waitToken(t, token) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	stdout, _, res := s.rest(t)
	if stdout != "second\n" || !res.success() {
		t.Errorf("after the sleep was killed: stdout %q, result %+v; want second, then exit 0", stdout, res.short())
	}
}

func TestPool(t *testing.T) {
	ts := startServer(t, "-pool", "2")
	// The pool fills in the background; until it has, runs start cold.
	deadline := time.Now().Add(wait)
	for {
		a := ts.run(t, `{"command":["echo","pooled"]}`)
		if !a.success() || a.Stdout != "pooled\n" {
			t.Fatalf("default limits with -pool: %+v", a)
		}
		if a.Pooled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no run with the default limits took a prepared sandbox")
		}
	}
	if a := ts.run(t, `{"command":["echo","cold"],"limits":{"memory":"64M"}}`); !a.success() || a.Stdout != "cold\n" || a.Pooled {
		t.Errorf("other limits: %+v, want a run of its own", a.short())
	}
	// The prepared sandboxes wait in the server's process tree; stopping
	// the server removes them and their cgroups.
	procs := tree(ts.cmd.Process.Pid)
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, procs)
}

func (a *answer) success() bool { return a.Cause == "exited" && a.ExitCode == 0 }

func (a *answer) denied(syscall string) bool {
	for _, d := range a.Denials {
		if d.Syscall == syscall && d.Count > 0 {
			return true
		}
	}
	return false
}

// short is the answer without its output, for messages.
func (a *answer) short() answer {
	c := *a
	c.Stdout, c.Stderr = "", ""
	return c
}

// hostHas reports whether the sandbox's PATH finds name on this host, whose
// /usr, /bin and /sbin a sandbox sees.
func hostHas(name string) bool {
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		if fi, err := os.Stat(dir + "/" + name); err == nil && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
