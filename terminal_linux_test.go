//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/testsupport/ptytest"
	"golang.org/x/sys/unix"
)

// TestTerminal runs programs on a Cmd.Terminal under both inits: the pty
// is the sandbox's own, the program's stdio and controlling terminal in
// a session it leads, of the asked size, and input and output flow.
func TestTerminal(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	const script = `import os, sys
print("tty", os.ttyname(0), os.ttyname(1), os.ttyname(2))
print("size", os.get_terminal_size(0).lines, os.get_terminal_size(0).columns)
print("leader", os.getsid(0) == os.getpid(), "foreground", os.tcgetpgrp(0) == os.getpgrp())
print("ctty", os.open("/dev/tty", os.O_RDWR) >= 0)
print("got", input())
`
	spawned, inProc, errS, errI := runBothLaunchers(t, Options{}, func() *Cmd {
		c := Command("/usr/bin/python3", "-c", script)
		c.Terminal = &Terminal{Rows: 33, Cols: 101}
		c.Stdin = strings.NewReader("hello\n")
		return c
	})
	for _, r := range []struct {
		name string
		res  *Result
		err  error
	}{{"spawned", spawned, errS}, {"in process", inProc, errI}} {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		out := strings.ReplaceAll(string(r.res.Stdout), "\r\n", "\n")
		for _, want := range []string{"tty /dev/pts/0 /dev/pts/0 /dev/pts/0\n", "size 33 101\n", "leader True foreground True\n",
			"ctty True\n", "hello\n", "got hello\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the output lacks %q:\n%s", r.name, want, out)
			}
		}
		if !r.res.Success() || len(r.res.Stderr) != 0 {
			t.Errorf("%s: outcome %v, exit %d, stderr %q", r.name, r.res.Outcome, r.res.ExitCode, r.res.Stderr)
		}
	}
}

// TestTerminalDefaultSizeAndCap: a zero Terminal is 24x80, and the
// terminal's output is captured under OutputLimit.
func TestTerminalDefaultSizeAndCap(t *testing.T) {
	requireSandbox(t)
	s := newColdTest(t, Options{Limits: Limits{Output: 4096}})
	c := Command("sh", "-c", "stty size; head -c 100000 /dev/zero | tr '\\0' x")
	c.Terminal = &Terminal{}
	res, err := s.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(res.Stdout, []byte("24 80\r\n")) {
		t.Errorf("stty size said %q, want 24 80", res.Stdout[:min(len(res.Stdout), 20)])
	}
	if !res.StdoutTruncated || res.StdoutBytes < 100000 || len(res.Stdout) > 4096+200 {
		t.Errorf("truncated %v, %d bytes, %d kept; want the cap of 4096 to hold", res.StdoutTruncated, res.StdoutBytes, len(res.Stdout))
	}
}

// notifyWriter is a Writer that says when what it got holds a string.
type notifyWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want map[string]chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for s, ch := range w.want {
		if strings.Contains(w.buf.String(), s) {
			close(ch)
			delete(w.want, s)
		}
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestTerminalResize changes the window size of a running program, which
// sees SIGWINCH and the new size; Resize fails before and after the run.
func TestTerminalResize(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "bash")
	s := newColdTest(t, Options{})
	c := Command("bash", "-c", `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done`)
	c.Terminal = &Terminal{Rows: 10, Cols: 20}
	if err := c.Resize(1, 1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resize before Run = %v, want ErrNotRunning", err)
	}
	res, out := runResized(t, s, c)
	if !res.Success() || !strings.Contains(out, "42 123") {
		t.Errorf("outcome %v exit %d, output %q; want 42 123", res.Outcome, res.ExitCode, out)
	}
	if err := c.Resize(1, 1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resize after Run = %v, want ErrNotRunning", err)
	}
	if err := Command("true").Resize(1, 1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resize of a Cmd without a Terminal = %v, want ErrNotRunning", err)
	}
}

// runResized runs c, which has a Terminal, in s, and resizes its terminal
// to 42 rows and 123 columns once it has printed "ready"; it returns the
// Result and what c printed.
func runResized(t *testing.T, s *Sandbox, c *Cmd) (*Result, string) {
	t.Helper()
	ready := make(chan struct{})
	out := &notifyWriter{want: map[string]chan struct{}{"ready": ready}}
	c.Stdout = out
	go func() {
		select {
		case <-ready:
			if err := c.Resize(42, 123); err != nil {
				t.Errorf("Resize: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the program never said ready")
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Run(ctx, c)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return res, out.String()
}

// TestHostileTerminal runs ptytest.HostileProgram with the test's own pty as
// Cmd.Stdin, Stdout and Stderr, with and without a Terminal: the pty's
// state afterwards is what it was, and it still works.
func TestHostileTerminal(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	for _, term := range []bool{false, true} {
		t.Run(map[bool]string{false: "pipes", true: "terminal"}[term], func(t *testing.T) {
			p := ptytest.Open(t)
			before, err := ptytest.Snapshot(p.Peer)
			if err != nil {
				t.Fatal(err)
			}
			s := newColdTest(t, Options{})
			c := Command("/usr/bin/python3", "-c", ptytest.HostileProgram)
			c.Stdin, c.Stdout, c.Stderr = p.Peer, p.Peer, p.Peer
			if term {
				c.Terminal = &Terminal{}
			}
			// What the run prints reaches the test's master.
			got := make(chan []byte, 1)
			go func() {
				out, _ := p.ReadUntil("terminal changes:", 30*time.Second)
				if i := bytes.Index(out, []byte("changes:")); i < 0 || !bytes.Contains(out[i:], []byte("\n")) {
					more, _ := p.ReadUntil("\n", time.Second)
					out = append(out, more...)
				}
				got <- out
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := s.Run(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			out := <-got
			// Without a terminal the program held pipes, and only a
			// terminal of its own takes terminal changes (3 a fd).
			want := "terminal changes: 0"
			if term {
				want = "terminal changes: 9"
			}
			if !bytes.Contains(out, []byte(want)) || res.Outcome != Exited {
				t.Errorf("outcome %v, the program printed %q; want %q", res.Outcome, out, want)
			}
			p.CheckState(t, before)
			p.CheckWorks(t)
		})
	}
}

// TestTerminalPooledRunsCold: in a Sandbox with a pool, a run with a
// Terminal starts cold and leaves the pool to the runs without one.
func TestTerminalPooledRunsCold(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{Start: Pool{Size: 1}})
	if err := s.fillPool(); err != nil {
		t.Fatal(err)
	}
	c := Command("tty")
	c.Terminal = &Terminal{}
	res, err := s.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pooled || !strings.HasPrefix(string(res.Stdout), "/dev/pts/0") {
		t.Errorf("pooled %v, tty said %q; want a cold run on /dev/pts/0", res.Pooled, res.Stdout)
	}
	res, err = s.Run(context.Background(), Command("true"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pooled {
		t.Error("the run after the terminal's did not take the pool's prepared sandbox")
	}
}

// TestStdinFileThroughPipe gives Run an *os.File stdin: the program reads
// it, to its end, from a pipe of its own (another file than the
// caller's, seen from inside by its inode), and once Run has returned,
// the caller's next input is the caller's again.
func TestStdinFileThroughPipe(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("line one\nline two\n"))
	w.Close()
	c := Command("sh", "-c", "stat -L -c %i /dev/stdin; cat")
	c.Stdin = r
	res, err := s.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	ino, rest, _ := strings.Cut(string(res.Stdout), "\n")
	if rest != "line one\nline two\n" || ino == strconv.FormatUint(st.Ino, 10) {
		t.Errorf("the program's stdin is inode %s (the caller's is %d) and gave %q", ino, st.Ino, rest)
	}

	// A stdin that never ends does not hold up Run, and what comes
	// after it is left to the caller.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	defer w2.Close()
	w2.Write([]byte("first\n"))
	c = Command("head", "-n1")
	c.Stdin = r2
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err = s.Run(ctx, c)
	if err != nil || string(res.Stdout) != "first\n" {
		t.Fatalf("head said %q, %v", res.Stdout, err)
	}
	w2.Write([]byte("after\n"))
	got := make([]byte, 64)
	r2.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := r2.Read(got)
	if string(got[:n]) != "after\n" {
		t.Errorf("the caller read %q (%v) after the run, want its own input", got[:n], err)
	}
}

// TestTerminalLeavesNoFds: the caller holds no pty master, or anything
// else, after runs with a Terminal, those whose program is missing too.
func TestTerminalLeavesNoFds(t *testing.T) {
	requireSandbox(t)
	for _, inProcess := range []bool{false, true} {
		// FreshWorkspace: a session's workspace mount, fetched ahead
		// for its next Run, would count.
		s := newColdTest(t, Options{Start: inProcessIf(inProcess), Workspace: FreshWorkspace{}})
		run := func(name string) {
			c := Command(name)
			c.Terminal = &Terminal{}
			c.Stdin = strings.NewReader("x")
			s.Run(context.Background(), c)
		}
		run("true") // the spawner starts
		before := openFDs()
		for range 3 {
			run("true")
			run("/no/such/program")
		}
		if after := openFDs(); len(after) != len(before) {
			t.Errorf("InProcess %v: fds before the runs %v, after %v", inProcess, before, after)
		}
	}
}

// TestTerminalInterrupt: Ctrl-C on a program's terminal ends a program
// that leaves SIGINT to its default action, although the program is its
// sandbox's init, and reaches one that handles it.
func TestTerminalInterrupt(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	s := newColdTest(t, Options{})
	run := func(script string) (*Result, string) {
		t.Helper()
		stdin, typed := io.Pipe()
		defer typed.Close()
		ready := make(chan struct{})
		out := &notifyWriter{want: map[string]chan struct{}{"ready": ready}}
		c := Command("/usr/bin/python3", "-c", script)
		c.Terminal, c.Stdin, c.Stdout = &Terminal{}, stdin, out
		go func() {
			select {
			case <-ready:
				typed.Write([]byte{0x03})
			case <-time.After(20 * time.Second):
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := s.Run(ctx, c)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return res, out.String()
	}
	// Python's own SIGINT handler is set back to the default.
	res, out := run("import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); print('ready', flush=True); time.sleep(100)")
	if res.Outcome != Signaled || res.Signal != syscall.SIGINT {
		t.Errorf("a program without a handler: outcome %v, signal %v, output %q; want SIGINT", res.Outcome, res.Signal, out)
	}
	// Short sleeps: CPython runs a Python handler between bytecodes, so
	// a SIGINT that lands after its last check and before a sleep's
	// clock_nanosleep waits out the whole sleep.
	res, out = run("import os, signal, time\nsignal.signal(signal.SIGINT, lambda *a: (os.write(1, b'caught\\n'), os._exit(3)))\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)")
	if res.Outcome != Exited || res.ExitCode != 3 || !strings.Contains(out, "caught") {
		t.Errorf("a program with a handler: outcome %v, exit %d, output %q; want it caught", res.Outcome, res.ExitCode, out)
	}
}

func TestNSInitWithDefault(t *testing.T) {
	const init = "Name:\tsleep\nNSpid:\t4242\t1\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n"
	for _, tc := range []struct {
		status string
		want   bool
	}{
		{init, true},
		{strings.Replace(init, "\t1\n", "\t7\n", 1), false},               // not the init
		{strings.Replace(init, "NSpid:\t4242\t1", "NSpid:\t1", 1), false}, // the caller's namespace's own init
		{strings.Replace(init, "SigCgt:\t0000000000000000", "SigCgt:\t0000000000000002", 1), false},
		{strings.Replace(init, "SigIgn:\t0000000000000000", "SigIgn:\t0000000000000002", 1), false},
		{strings.Replace(init, "SigCgt:\t0000000000000000", "SigCgt:\t0000000000000001", 1), true}, // SIGHUP only
	} {
		if got := sysutil.NSInitWithDefault(tc.status, int(syscall.SIGINT)); got != tc.want {
			t.Errorf("NSInitWithDefault(%q) = %v, want %v", tc.status, got, tc.want)
		}
	}
	// Signal 0 is no signal: it has no action, default or other.
	for _, sig := range []int{0, -1, 65} {
		if sysutil.NSInitWithDefault(init, sig) || sysutil.DefaultAction(init, sig) {
			t.Errorf("signal %d has a default action", sig)
		}
	}
}
