package sandboxtest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records what a test body reports instead
// of reporting it, so that a test can check that a failing expectation
// fails, and with what message. What it does not override (TempDir,
// Cleanup, Context, Helper, Log) goes to the real test.
type recorder struct {
	testing.TB
	mu              sync.Mutex
	failed, skipped bool
	msgs            []string
}

// record runs body with a recorder in a goroutine of its own, as testing
// runs a test, so that Fatalf and Skipf can end it with runtime.Goexit,
// and waits for it.
func record(t *testing.T, body func(tb testing.TB)) *recorder {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(r)
	}()
	<-done
	return r
}

func (r *recorder) add(failed, skipped bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || failed
	r.skipped = r.skipped || skipped
	if msg != "" {
		r.msgs = append(r.msgs, msg)
	}
}

func (r *recorder) Error(args ...any) { r.add(true, false, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.add(true, false, fmt.Sprintf(format, args...))
}
func (r *recorder) Fail()                             { r.add(true, false, "") }
func (r *recorder) FailNow()                          { r.add(true, false, ""); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.add(false, true, fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any) {
	r.add(false, true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) SkipNow() { r.add(false, true, ""); runtime.Goexit() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

// output is everything reported, one message a line.
func (r *recorder) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// wantFailure checks that the body failed without skipping, with a
// message holding each of want.
func (r *recorder) wantFailure(t *testing.T, want ...string) {
	t.Helper()
	if !r.Failed() || r.Skipped() {
		t.Fatalf("want a failure, got failed=%v skipped=%v; reported:\n%s", r.Failed(), r.Skipped(), r.output())
	}
	for _, w := range want {
		if !strings.Contains(r.output(), w) {
			t.Errorf("failure message lacks %q; it is:\n%s", w, r.output())
		}
	}
}

// wantPass checks that the body neither failed nor skipped.
func (r *recorder) wantPass(t *testing.T) {
	t.Helper()
	if r.Failed() || r.Skipped() {
		t.Fatalf("want no failure, got failed=%v skipped=%v; reported:\n%s", r.Failed(), r.Skipped(), r.output())
	}
}
