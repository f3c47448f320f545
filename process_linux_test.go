//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startModes are the three ways a run starts: cold through the spawner,
// from a pool the spawner prepared, and in this process (InProcess).
var startModes = []struct {
	name string
	opts Options
}{
	{"cold", Options{}},
	{"pooled", Options{Start: Pool{Size: 2}}},
	{"inprocess", Options{Start: InProcess{}}},
	{"live", Options{Live: &Live{}}},
}

// newStartTest is a Sandbox of o whose pool, if it has one, is full.
func newStartTest(t *testing.T, o Options) *Sandbox {
	t.Helper()
	s := newTest(t, o)
	if poolSize(o) > 0 {
		if err := s.fillPool(); err != nil {
			t.Fatalf("fill the pool: %v", err)
		}
	}
	return s
}

// requireStartLeftNothing closes s, which destroys its pool, and fails
// unless nothing of the test's runs is left on the host.
func requireStartLeftNothing(t *testing.T, s *Sandbox) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	requireNothingLeft(t, "SBXTEST_MARK="+t.Name())
}

// startCmd is name with args, carrying the test's marker in its
// environment for requireNothingLeft.
func startCmd(t *testing.T, name string, args ...string) *Cmd {
	c := Command(name, args...)
	c.Env = []string{"SBXTEST_MARK=" + t.Name()}
	return c
}

// TestStartWaitIsRun: Start then Wait gives what Run gives for the same
// program (its output, exit code and outcome), cold, pooled and in
// process; the program is pid 1 inside, as Pid says; nothing is left.
func TestStartWaitIsRun(t *testing.T) {
	requireSandbox(t)
	for _, m := range startModes {
		t.Run(m.name, func(t *testing.T) {
			s := newStartTest(t, m.opts)
			script := `echo "out $$"; echo err >&2; exit 7`
			want, err := s.Run(context.Background(), startCmd(t, "sh", "-c", script))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			p, err := s.Start(context.Background(), startCmd(t, "sh", "-c", script))
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			got, err := p.Wait()
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			// In a live sandbox each process has a pid of its own.
			wantPid := 1
			if m.opts.Live != nil {
				wantPid = p.Pid()
				want.Stdout = []byte(fmt.Sprintf("out %d\n", wantPid))
			}
			if string(got.Stdout) != string(want.Stdout) || string(got.Stderr) != string(want.Stderr) ||
				got.ExitCode != want.ExitCode || got.Outcome != want.Outcome {
				t.Errorf("Start+Wait: %q %q exit %d %v; Run: %q %q exit %d %v",
					got.Stdout, got.Stderr, got.ExitCode, got.Outcome, want.Stdout, want.Stderr, want.ExitCode, want.Outcome)
			}
			if string(got.Stdout) != fmt.Sprintf("out %d\n", wantPid) || m.opts.Live != nil && wantPid <= 1 {
				t.Errorf("stdout %q, Pid %d; want the program's pid inside, as Pid says (1 but in a live sandbox)", got.Stdout, p.Pid())
			}
			if poolSize(m.opts) > 0 && !got.Pooled {
				t.Errorf("the started run did not take a prepared sandbox")
			}
			again, err := p.Wait()
			if again != got || err != nil {
				t.Errorf("a second Wait: %p, %v; want the first's %p", again, err, got)
			}
			requireStartLeftNothing(t, s)
		})
	}
}

// TestStartErrors: a program that is not there fails Start as it fails
// Run, and starts nothing.
func TestStartErrors(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	p, err := s.Start(context.Background(), Command("no-such-program"))
	if p != nil || !errors.Is(err, ErrNotFound) {
		t.Errorf("Start of a missing program: %v, %v; want no Process and ErrNotFound", p, err)
	}
	cmd := Command("cat")
	cmd.Stdin = os.Stdin
	if _, err := cmd.StdinPipe(); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("StdinPipe with Stdin set: %v; want ErrInvalidOption", err)
	}
	cmd = Command("true")
	if _, err := s.Run(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("StdinPipe after the run: %v; want ErrInvalidOption", err)
	}
}

// TestStartStdinPipe: what is written to the StdinPipe reaches the program
// while it runs (each line's answer comes back before the next is
// written), and closing the pipe ends its input, so that it exits.
func TestStartStdinPipe(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	for _, m := range startModes {
		t.Run(m.name, func(t *testing.T) {
			s := newStartTest(t, m.opts)
			cmd := startCmd(t, "python3", "-c", "import sys\nfor l in sys.stdin: print(l.upper(), end='', flush=True)\nprint('eof')")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			outR, outW := io.Pipe()
			cmd.Stdout = outW
			// The deadline ends a run that missed its input's end.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := s.Start(ctx, cmd)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			waited := waitClosing(p, outW)
			lines := bufio.NewReader(outR)
			for _, word := range []string{"one", "two"} {
				if _, err := io.WriteString(in, word+"\n"); err != nil {
					t.Fatalf("write: %v", err)
				}
				if got, err := lines.ReadString('\n'); got != toUpper(word)+"\n" {
					t.Fatalf("read %q, %v; want %q", got, err, toUpper(word))
				}
			}
			if err := in.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := lines.ReadString('\n'); got != "eof\n" {
				t.Fatalf("after closing stdin: %q, %v; want eof", got, err)
			}
			w := <-waited
			res, err := w.res, w.err
			if err != nil || res.Outcome != Exited || res.ExitCode != 0 {
				t.Fatalf("Wait: %v, %+v; want exit 0", err, res)
			}
			requireStartLeftNothing(t, s)
		})
	}
}

// waitedResult is what Wait returned.
type waitedResult struct {
	res *Result
	err error
}

// waitClosing waits for p in the background, then closes w, the Cmd's
// Stdout, so that reads of its output end with the run.
func waitClosing(p *Process, w *io.PipeWriter) <-chan waitedResult {
	c := make(chan waitedResult, 1)
	go func() {
		res, err := p.Wait()
		w.Close()
		c <- waitedResult{res, err}
	}()
	return c
}

func toUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestProcessSignalDefault: SIGTERM to a program with no handler for it,
// which the kernel drops for its namespace's init, ends it as it would
// end any process: Outcome Signaled with SIGTERM, through the spawner
// and in process. A later Signal or Kill says the process is done.
func TestProcessSignalDefault(t *testing.T) {
	requireSandbox(t)
	for _, m := range startModes {
		t.Run(m.name, func(t *testing.T) {
			s := newStartTest(t, m.opts)
			// The deadline ends a run the signal did not.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := s.Start(ctx, startCmd(t, "sleep", "100"))
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("Signal: %v", err)
			}
			res, err := p.Wait()
			if err != nil || res.Outcome != Signaled || res.Signal != syscall.SIGTERM {
				t.Fatalf("Wait: %v, outcome %v signal %v; want Signaled by SIGTERM", err, res.Outcome, res.Signal)
			}
			if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("Signal after the end: %v; want os.ErrProcessDone", err)
			}
			if err := p.Kill(); !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("Kill after the end: %v; want os.ErrProcessDone", err)
			}
			requireStartLeftNothing(t, s)
		})
	}
}

// TestProcessSignalHandled: a program that handles SIGTERM gets it: its
// handler prints and exits 3.
func TestProcessSignalHandled(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	for _, m := range startModes {
		t.Run(m.name, func(t *testing.T) {
			s := newStartTest(t, m.opts)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := startCmd(t, "python3", "-c", `import os, signal, sys, time
# Not print: the signal may come while the print of ready is still
# inside stdout's writer, which print may not enter again.
def term(sig, frame):
    os.write(1, b"got %d\n" % sig)
    sys.exit(3)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
# Short sleeps, not one long one: Python runs a handler between
# bytecodes, and a signal that comes after the last check before a
# sleep's system call (a preempted program, on a loaded host) leaves
# the handler waiting until that sleep ends.
while True:
    time.sleep(0.05)`)
			outR, outW := io.Pipe()
			cmd.Stdout = outW
			p, err := s.Start(ctx, cmd)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			waited := waitClosing(p, outW)
			lines := bufio.NewReader(outR)
			if got, err := lines.ReadString('\n'); got != "ready\n" {
				t.Fatalf("read %q, %v; want ready", got, err)
			}
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("Signal: %v", err)
			}
			gotc := make(chan string, 1)
			go func() { got, _ := lines.ReadString('\n'); gotc <- got }()
			select {
			case got := <-gotc:
				if got != "got 15\n" {
					t.Errorf("read %q; want the handler's line", got)
				}
			case <-time.After(10 * time.Second):
				// What the program was doing, for the failure to say.
				for _, pid := range hostProcesses("SBXTEST_MARK=" + t.Name()) {
					status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
					wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
					t.Logf("host pid %d, waiting in %q:\n%s", pid, wchan, status)
				}
				t.Errorf("no line from the handler 10 s after the signal")
			}
			w := <-waited
			res, err := w.res, w.err
			if err != nil || res.Outcome != Exited || res.ExitCode != 3 {
				t.Fatalf("Wait: %v, %+v; want the handler's exit 3", err, res)
			}
		})
	}
}

// TestProcessKill: Kill ends the run with SIGKILL, and its StdinPipe is
// closed with it; a Process that ended on its own is known to be done
// without a Wait.
func TestProcessKill(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := startCmd(t, "sh", "-c", "sleep 100 & sleep 100")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Start(ctx, cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	res, err := p.Wait()
	if err != nil || res.Outcome != Signaled || res.Signal != syscall.SIGKILL {
		t.Fatalf("Wait: %v, outcome %v signal %v; want Signaled by SIGKILL", err, res.Outcome, res.Signal)
	}
	// The StdinPipe the caller left open is closed with the run.
	if _, err := io.WriteString(in, "late\n"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a write to the StdinPipe after the run: %v; want os.ErrClosed", err)
	}

	p, err = s.Start(ctx, Command("true"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !waitFor(func() bool { return errors.Is(p.Signal(syscall.SIGTERM), os.ErrProcessDone) }) {
		t.Errorf("Signal to a program that exited without a Wait: %v; want os.ErrProcessDone", p.Signal(syscall.SIGTERM))
	}
	requireStartLeftNothing(t, s)
}

// TestStartTimeout: ctx's deadline, reached while Wait waits, ends the
// run with Outcome Timeout and the output written until then.
func TestStartTimeout(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p, err := s.Start(ctx, startCmd(t, "sh", "-c", "echo before; sleep 100"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	res, err := p.Wait()
	if err != nil || res.Outcome != Timeout || string(res.Stdout) != "before\n" {
		t.Fatalf("Wait: %v, outcome %v, stdout %q; want Timeout with the output so far", err, res.Outcome, res.Stdout)
	}
	requireStartLeftNothing(t, s)
}

// TestProcessStopSignals: SIGSTOP stops the program and SIGCONT continues
// it; SIGTSTP, which it has no handler for, stops it as the kernel would
// stop any other process; signal 0 only says it is there. In every start
// mode: for an init (pid 1), the launcher takes the default actions the
// kernel drops.
func TestProcessStopSignals(t *testing.T) {
	requireSandbox(t)
	for _, m := range startModes {
		t.Run(m.name, func(t *testing.T) {
			s := newStartTest(t, m.opts)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := startCmd(t, "sh", "-c", "while :; do echo tick; sleep 0.02; done")
			out := &notifyWriter{}
			cmd.Stdout = out
			p, err := s.Start(ctx, cmd)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			ticks := func() int { return strings.Count(out.String(), "tick") }
			stopped := func() bool {
				before := ticks()
				time.Sleep(300 * time.Millisecond)
				return ticks() == before
			}
			resumed := func() bool {
				before := ticks()
				return waitFor(func() bool { return ticks() > before })
			}
			if !resumed() {
				t.Fatal("the program never ticked")
			}
			for _, stop := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGTSTP} {
				if err := p.Signal(stop); err != nil {
					t.Fatalf("Signal(%v): %v", stop, err)
				}
				if !waitFor(stopped) {
					t.Errorf("the program still ticks after %v", stop)
				}
				if err := p.Signal(syscall.Signal(0)); err != nil {
					t.Errorf("Signal(0) to the stopped program: %v", err)
				}
				if err := p.Signal(syscall.SIGCONT); err != nil {
					t.Fatalf("Signal(SIGCONT): %v", err)
				}
				if !resumed() {
					t.Errorf("the program did not tick again after SIGCONT")
				}
			}
			if err := p.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("Signal(0) to the running program: %v", err)
			}
			if !resumed() {
				t.Errorf("signal 0 stopped the program")
			}
			p.Kill()
			if res, err := p.Wait(); err != nil || res.Signal != syscall.SIGKILL {
				t.Errorf("Wait after Kill: %v, %+v", err, res)
			}
			if err := p.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("Signal(0) after the end: %v, want os.ErrProcessDone", err)
			}
			requireStartLeftNothing(t, s)
		})
	}
}
