package sandboxtest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

// Result is how a run ended, with methods that check it. Each Expect
// method reports a failed expectation with t.Errorf, followed by a summary
// of the run (see String), and returns the Result so that checks can be
// chained:
//
//	sb.Shell("echo hi").ExpectSuccess().ExpectStdoutContains("hi")
type Result struct {
	// Result is what the sandbox package reported; nil only when the run
	// could not be made and the test was ended.
	*sandbox.Result

	tb      testing.TB
	cmd     *sandbox.Cmd
	timeout time.Duration // the run's, named when it timed out
}

// ExpectSuccess checks that the program exited with status 0.
func (r *Result) ExpectSuccess() *Result {
	r.tb.Helper()
	if r.Result == nil || !r.Success() {
		r.fail("want exit code 0")
	}
	return r
}

// ExpectExit checks that the program exited with status code.
func (r *Result) ExpectExit(code int) *Result {
	r.tb.Helper()
	if r.Result == nil || r.Outcome != sandbox.Exited || r.ExitCode != code {
		r.fail(fmt.Sprintf("want exit code %d", code))
	}
	return r
}

// ExpectOutcome checks how the run ended, e.g. sandbox.Timeout or
// sandbox.OutOfMemory.
func (r *Result) ExpectOutcome(o sandbox.Outcome) *Result {
	r.tb.Helper()
	if r.Result == nil || r.Outcome != o {
		r.fail("want outcome " + o.String())
	}
	return r
}

// ExpectStdoutContains checks that the captured standard output contains
// substr.
func (r *Result) ExpectStdoutContains(substr string) *Result {
	r.tb.Helper()
	if r.Result == nil || !bytes.Contains(r.Stdout, []byte(substr)) {
		r.fail(fmt.Sprintf("want stdout containing %q", substr))
	}
	return r
}

// ExpectStderrContains checks that the captured standard error contains
// substr.
func (r *Result) ExpectStderrContains(substr string) *Result {
	r.tb.Helper()
	if r.Result == nil || !bytes.Contains(r.Stderr, []byte(substr)) {
		r.fail(fmt.Sprintf("want stderr containing %q", substr))
	}
	return r
}

// ExpectDenied checks that the seccomp policy refused the syscall name
// (e.g. "ptrace") during the run: that Denials names it, or that it is the
// Violation that ended the run.
func (r *Result) ExpectDenied(name string) *Result {
	r.tb.Helper()
	if r.Result != nil && r.Violation == name {
		return r
	}
	if r.Result != nil {
		for _, d := range r.Denials {
			if d.Syscall == name {
				return r
			}
		}
	}
	r.fail(fmt.Sprintf("want the syscall %s refused", name))
	return r
}

func (r *Result) fail(want string) {
	r.tb.Helper()
	r.tb.Errorf("sandboxtest: %s\n%s", want, r)
}
