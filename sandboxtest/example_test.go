package sandboxtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/sandboxtest"
)

// ExampleNew is the body of a test: in a test file it reads
//
//	func TestUpper(t *testing.T) {
//		sb := sandboxtest.New(t, sandbox.Options{})
//		...
//	}
//
// An Example gets no *testing.T, so this one runs the body with a stand-in
// (runAsTest, below) that prints what go test would report.
func ExampleNew() {
	runAsTest(func(t testing.TB) {
		// Best-effort limits let it run where no cgroup can hold them;
		// a test of limits would leave the default.
		sb := sandboxtest.New(t, sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})

		// The workspace is a directory of the test's, /workspace inside.
		if err := os.WriteFile(filepath.Join(sb.Dir(), "in.txt"), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sb.Shell("tr a-z A-Z < in.txt > out.txt && id -un").ExpectSuccess().ExpectStdoutContains("sandbox")
		out, err := os.ReadFile(filepath.Join(sb.Dir(), "out.txt"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s", out)
	})
	// Output:
	// HELLO
	// PASS
}

// A failed expectation reports the run: its command, how it ended and the
// head and tail of its output.
func ExampleResult_ExpectSuccess() {
	runAsTest(func(t testing.TB) {
		sb := sandboxtest.New(t, sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})
		sb.Shell("echo partial; echo 'config.json: no such file' >&2; exit 2").ExpectSuccess()
	})
	// Output:
	// FAIL: sandboxtest: want exit code 0
	// run: sh -c "echo partial; echo 'config.json: no such file' >&2; exit 2"
	// outcome: exited, exit code 2
	// stdout (8 bytes):
	// 	partial
	// stderr (26 bytes):
	// 	config.json: no such file
}

// runAsTest runs body as go test runs a test function, with exampleT for
// its *testing.T: in a goroutine of its own, which Fatal and Skip end,
// then its Cleanup functions, last registered first. It prints PASS, or
// each failure and skip as it is reported.
func runAsTest(body func(t testing.TB)) {
	t := &exampleT{}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(t)
	}()
	<-done
	t.cancel()
	for _, f := range slices.Backward(t.cleanups) {
		f()
	}
	if !t.failed && !t.skipped {
		fmt.Println("PASS")
	}
}

// exampleT stands in for a *testing.T, implementing what sandboxtest and
// the examples call. (testing.TB cannot be implemented outside package
// testing without embedding it; the embedded one is nil, so a call this
// type does not implement would panic.)
type exampleT struct {
	testing.TB
	ctx             context.Context
	cancel          context.CancelFunc
	cleanups        []func()
	tempDir         string
	tempDirs        int
	failed, skipped bool
}

func (t *exampleT) Helper()                  {}
func (t *exampleT) Context() context.Context { return t.ctx }
func (t *exampleT) Cleanup(f func())         { t.cleanups = append(t.cleanups, f) }

// TempDir makes a new directory in a directory of the test's, removed
// after the test, as testing does.
func (t *exampleT) TempDir() string {
	if t.tempDir == "" {
		dir, err := os.MkdirTemp("", "Example")
		if err != nil {
			t.Fatal(err)
		}
		t.tempDir = dir
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	t.tempDirs++
	dir := filepath.Join(t.tempDir, fmt.Sprintf("%03d", t.tempDirs))
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (t *exampleT) Errorf(format string, args ...any) {
	t.failed = true
	fmt.Printf("FAIL: "+format+"\n", args...)
}
func (t *exampleT) Error(args ...any) {
	t.failed = true
	fmt.Println(append([]any{"FAIL:"}, args...)...)
}
func (t *exampleT) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *exampleT) Fatal(args ...any)                 { t.Error(args...); runtime.Goexit() }
func (t *exampleT) FailNow()                          { t.failed = true; runtime.Goexit() }
func (t *exampleT) Skip(args ...any) {
	t.skipped = true
	fmt.Println(append([]any{"SKIP:"}, args...)...)
	runtime.Goexit()
}
func (t *exampleT) Skipf(format string, args ...any) { t.Skip(fmt.Sprintf(format, args...)) }
