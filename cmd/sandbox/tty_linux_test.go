//go:build linux

package main

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/ptytest"
	"golang.org/x/sys/unix"
)

// startOnPty starts the tool with args on p's peer as its stdin, stdout,
// stderr and controlling terminal, in a session of its own, as a login
// shell would.
func startOnPty(t *testing.T, bin string, p *ptytest.Pair, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.Peer, p.Peer, p.Peer
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// waitExit waits for the tool, reading what it prints meanwhile, and
// returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd, p *ptytest.Pair) int {
	t.Helper()
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			return cmd.ProcessState.ExitCode()
		case <-deadline:
			t.Fatalf("the tool did not exit; it printed %q", p.Drain(100*time.Millisecond))
		default:
			p.Drain(50 * time.Millisecond)
		}
	}
}

// TestCLIInteractiveShell drives "sandbox run -- bash" on a pty, as a user
// at a terminal would: bash has a terminal and job control, Ctrl-C ends
// the foreground job and not the shell, a resize of the tool's window
// reaches the program, and the tool's terminal is put back as it was.
func TestCLIInteractiveShell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	p := ptytest.Open(t)
	before, err := ptytest.Snapshot(p.Peer)
	if err != nil {
		t.Fatal(err)
	}
	cmd := startOnPty(t, bin, p, "run", "--best-effort", "--env", "PS1=PROMPT> ", "--", "bash", "--norc", "--noprofile", "-i")
	expect := func(what, want string) {
		t.Helper()
		if out, ok := p.Expect(want, 15*time.Second); !ok {
			t.Fatalf("%s: no %q in %q", what, want, out)
		}
	}
	send := func(line string) {
		t.Helper()
		// Enter sends CR, as from a keyboard.
		if _, err := p.Master.Write([]byte(line + "\r")); err != nil {
			t.Fatal(err)
		}
	}
	if out, ok := p.Expect("PROMPT> ", 15*time.Second); !ok || bytes.Contains(out, []byte("job control")) {
		t.Fatalf("bash started with %q", out)
	}
	send("tty")
	expect("tty", "/dev/pts/0")
	expect("tty", "PROMPT> ")
	send("sleep 100 &")
	expect("background job", "PROMPT> ")
	send("jobs")
	expect("jobs", "Running")
	expect("jobs", "sleep 100 &")
	expect("jobs", "PROMPT> ")
	send("sleep 100")
	// Ctrl-C, again if it came before sleep was the foreground job; a
	// prompt says the shell is back. A Ctrl-C that ended the run, or
	// never reached sleep, leaves no prompt.
	interrupted := false
	for try := 0; try < 5 && !interrupted; try++ {
		time.Sleep(300 * time.Millisecond)
		p.Master.Write([]byte{0x03})
		_, interrupted = p.Expect("PROMPT> ", 3*time.Second)
	}
	if !interrupted {
		t.Fatal("Ctrl-C did not end the foreground sleep")
	}
	send("echo after-$((20+22))")
	expect("after Ctrl-C", "after-42")
	// The test's side of the resize sends SIGWINCH to the tool, the
	// foreground of the test's pty.
	if err := unix.IoctlSetWinsize(int(p.Master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 51, Col: 133}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	send("stty size")
	expect("resize", "51 133")
	send("exit 7")
	if code := waitExit(t, cmd, p); code != 7 {
		t.Errorf("the tool exited %d, want bash's 7", code)
	}
	after, err := ptytest.Snapshot(p.Peer)
	if err != nil {
		t.Fatal(err)
	}
	before.Winsize = after.Winsize // the test changed it
	if after != before {
		t.Errorf("the tool's terminal was not put back:\nbefore %+v\nafter  %+v", before, after)
	}
	p.CheckWorks(t)
}

// TestCLIInterruptEndsPlainProgram: Ctrl-C ends a program that is not a
// shell and does not handle SIGINT, as on the host, though it is its
// sandbox's init; the exit status says SIGINT.
func TestCLIInterruptEndsPlainProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	p := ptytest.Open(t)
	cmd := startOnPty(t, bin, p, "run", "--best-effort", "--", "sh", "-c", "echo started; exec sleep 100")
	if out, ok := p.Expect("started", 15*time.Second); !ok {
		t.Fatalf("no start: %q", out)
	}
	// Again until the tool exits: one that came before sh had exec'd
	// sleep went to sh, which catches SIGINT.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			p.Master.Write([]byte{0x03})
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	if code := waitExit(t, cmd, p); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d after Ctrl-C, want %d", code, 128+int(syscall.SIGINT))
	}
}

// TestCLITerminalRestoredOnSignal: a tool ended by SIGTERM or SIGHUP while
// its terminal is raw puts it back as it was.
func TestCLITerminalRestoredOnSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			p := ptytest.Open(t)
			before, err := ptytest.Snapshot(p.Peer)
			if err != nil {
				t.Fatal(err)
			}
			cmd := startOnPty(t, bin, p, "run", "--best-effort", "--", "sh", "-c", "echo started; sleep 100")
			if out, ok := p.ReadUntil("started", 15*time.Second); !ok {
				t.Fatalf("no start: %q", out)
			}
			raw, err := ptytest.Snapshot(p.Peer)
			if err != nil {
				t.Fatal(err)
			}
			if raw.Termios.Lflag&unix.ICANON != 0 {
				t.Errorf("the tool's terminal is not raw while the program runs")
			}
			cmd.Process.Signal(sig)
			if code := waitExit(t, cmd, p); code != 128+int(sig) {
				t.Errorf("exit %d, want %d", code, 128+int(sig))
			}
			p.CheckState(t, before)
		})
	}
}

// TestCLITerminalRestoredOnFailure: a run that fails (its program is not
// there) puts the tool's terminal back too, before the error is printed.
func TestCLITerminalRestoredOnFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	p := ptytest.Open(t)
	before, err := ptytest.Snapshot(p.Peer)
	if err != nil {
		t.Fatal(err)
	}
	cmd := startOnPty(t, bin, p, "run", "--best-effort", "--tty", "--", "/no/such/program")
	out, _ := p.Expect("not found", 15*time.Second)
	// The error line was written with the terminal's own output
	// processing back on: its newline became CR LF. The line discipline
	// pushes the text and the converted newline apart, so the newline
	// may not have come with "not found"; it is read before waitExit,
	// which drains and discards what the master holds.
	rest, _ := p.Expect("\n", 15*time.Second)
	if !bytes.HasSuffix(rest, []byte("\r")) {
		t.Errorf("the error line ended %q, not CR LF: printed before the terminal was put back", rest)
	}
	if code := waitExit(t, cmd, p); code != exitNotFound {
		t.Errorf("exit %d, want %d; printed %q", code, exitNotFound, append(out, rest...))
	}
	p.CheckState(t, before)
}

// TestCLIHostileTerminal runs ptytest.HostileProgram through the tool on the
// test's pty, with --tty and --no-tty: the pty is as it was afterwards,
// and works.
func TestCLIHostileTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	for _, tc := range []struct{ flag, want string }{{"--no-tty", "terminal changes: 0"}, {"--tty", "terminal changes: 9"}} {
		t.Run(strings.TrimPrefix(tc.flag, "--"), func(t *testing.T) {
			p := ptytest.Open(t)
			before, err := ptytest.Snapshot(p.Peer)
			if err != nil {
				t.Fatal(err)
			}
			cmd := startOnPty(t, bin, p, "run", "--best-effort", tc.flag, "--", "/usr/bin/python3", "-c", ptytest.HostileProgram)
			out, _ := p.ReadUntil("terminal changes:", 30*time.Second)
			if i := bytes.Index(out, []byte("changes:")); i >= 0 && !bytes.Contains(out[i:], []byte("\n")) {
				more, _ := p.ReadUntil("\n", time.Second)
				out = append(out, more...)
			}
			if code := waitExit(t, cmd, p); code != 0 || !bytes.Contains(out, []byte(tc.want)) {
				t.Errorf("exit %d, the program printed %q; want 0 and %q", code, out, tc.want)
			}
			p.CheckState(t, before)
			p.CheckWorks(t)
		})
	}
}
