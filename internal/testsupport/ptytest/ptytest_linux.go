//go:build linux

// Package ptytest opens host pty pairs for tests, and reads the state of a
// terminal that a test compares before and after a run: what a caller's
// terminal must keep, whatever a program did to its own descriptors.
package ptytest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Pair is a pty of the host, opened by the test.
type Pair struct {
	// Master is non-blocking, so reads take deadlines.
	Master *os.File
	// Peer is blocking, as a terminal on a shell's fd 0 usually is, and
	// not the test's controlling terminal.
	Peer     *os.File
	PeerPath string

	pending []byte // read from Master by Expect, after its last match
}

// Open opens a pty pair of the host's /dev/ptmx, closed when t ends.
func Open(t testing.TB) *Pair {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("no host pty to drive the test from: open /dev/ptmx: %v", err)
	}
	master := os.NewFile(uintptr(m), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("TIOCGPTN: %v", err)
	}
	path := "/dev/pts/" + strconv.Itoa(n)
	// Not through os.OpenFile, which would make it non-blocking.
	pfd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open pty peer: %v", err)
	}
	peer := os.NewFile(uintptr(pfd), path)
	t.Cleanup(func() { peer.Close() })
	return &Pair{Master: master, Peer: peer, PeerPath: path}
}

// State is what a program must not change of a caller's terminal.
type State struct {
	Termios unix.Termios
	Winsize unix.Winsize
	Ldisc   int
	Excl    int // TIOCGEXCL: exclusive mode
	Flags   int // the file status flags of the descriptor (O_NONBLOCK)
}

// Snapshot reads the state of the terminal f and of f's descriptor,
// without changing f's flags.
func Snapshot(f *os.File) (State, error) {
	var s State
	rc, err := f.SyscallConn()
	if err != nil {
		return s, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		t, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		if err != nil {
			serr = fmt.Errorf("TCGETS: %w", err)
			return
		}
		w, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
		if err != nil {
			serr = fmt.Errorf("TIOCGWINSZ: %w", err)
			return
		}
		s.Termios, s.Winsize = *t, *w
		if s.Ldisc, serr = unix.IoctlGetInt(int(fd), unix.TIOCGETD); serr != nil {
			return
		}
		if s.Excl, serr = unix.IoctlGetInt(int(fd), unix.TIOCGEXCL); serr != nil {
			return
		}
		s.Flags, serr = unix.FcntlInt(fd, unix.F_GETFL, 0)
	})
	if err == nil {
		err = serr
	}
	return s, err
}

// Drain reads what the master holds for up to d, and returns it.
func (p *Pair) Drain(d time.Duration) []byte {
	var out []byte
	buf := make([]byte, 4096)
	p.Master.SetReadDeadline(time.Now().Add(d))
	defer p.Master.SetReadDeadline(time.Time{})
	for {
		n, err := p.Master.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out
		}
	}
}

// ReadUntil reads the master until what it read holds want, or d passes.
func (p *Pair) ReadUntil(want string, d time.Duration) ([]byte, bool) {
	var out []byte
	buf := make([]byte, 4096)
	p.Master.SetReadDeadline(time.Now().Add(d))
	defer p.Master.SetReadDeadline(time.Time{})
	for !bytes.Contains(out, []byte(want)) {
		n, err := p.Master.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, false
		}
	}
	return out, true
}

// Expect reads the master until want comes, within d, and returns what
// came before it; what came after it is kept for the next Expect.
func (p *Pair) Expect(want string, d time.Duration) ([]byte, bool) {
	buf := make([]byte, 4096)
	p.Master.SetReadDeadline(time.Now().Add(d))
	defer p.Master.SetReadDeadline(time.Time{})
	for {
		if i := bytes.Index(p.pending, []byte(want)); i >= 0 {
			before := p.pending[:i]
			p.pending = p.pending[i+len(want):]
			return before, true
		}
		n, err := p.Master.Read(buf)
		p.pending = append(p.pending, buf[:n]...)
		if err != nil {
			return p.pending, false
		}
	}
}

// CheckState checks that the peer's terminal state is before's, byte
// for byte.
func (p *Pair) CheckState(t testing.TB, before State) {
	t.Helper()
	after, err := Snapshot(p.Peer)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the terminal's state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// CheckWorks checks that the terminal still carries input and output: a
// fresh open of the peer succeeds (exclusive mode would refuse it), a line
// written to the master is read on the peer, and one written on the peer
// comes out of the master.
func (p *Pair) CheckWorks(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(p.PeerPath, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Errorf("a fresh open of %s: %v", p.PeerPath, err)
	} else {
		f.Close()
	}
	p.Drain(50 * time.Millisecond)
	if _, err := p.Master.Write([]byte("ping\n")); err != nil {
		t.Errorf("write to the master: %v", err)
		return
	}
	rc, err := p.Peer.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 5000); n != 1 {
			return
		}
		buf := make([]byte, 64)
		n, _ := unix.Read(int(fd), buf)
		got = buf[:max(n, 0)]
	})
	if string(got) != "ping\n" {
		t.Errorf("the peer read %q after the run, want %q", got, "ping\n")
	}
	if _, err := p.Peer.Write([]byte("pong\n")); err != nil {
		t.Errorf("write to the peer: %v", err)
		return
	}
	if out, ok := p.ReadUntil("pong", 5*time.Second); !ok {
		t.Errorf("the master read %q after the run, want pong", out)
	}
}

// HostileProgram is a python3 program that changes all it can of every
// descriptor it holds, and counts the terminal changes that took: termios (echo and canonical
// mode off), O_NONBLOCK, TIOCEXCL and the window size, then the line
// discipline (N_NULL) and flow control (TCOOFF) last, since after them
// nothing it prints would come out.
const HostileProgram = `import fcntl, os, struct, sys, termios
took = 0
def attempt(f, fd):
    global took
    try:
        f(fd)
        took += 1
    except (OSError, termios.error):
        pass
def raw(fd):
    a = termios.tcgetattr(fd)
    a[3] &= ~(termios.ECHO | termios.ICANON)
    termios.tcsetattr(fd, termios.TCSANOW, a)
for fd in range(3):
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    except OSError:
        pass
    attempt(raw, fd)
    attempt(lambda fd: fcntl.ioctl(fd, termios.TIOCEXCL), fd)
    attempt(lambda fd: fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 3, 7, 0, 0)), fd)
os.write(2, b"terminal changes: %d\n" % took)
for fd in range(3):
    attempt(lambda fd: fcntl.ioctl(fd, termios.TIOCSETD, struct.pack("i", 27)), fd)
    attempt(lambda fd: termios.tcflow(fd, termios.TCOOFF), fd)
`
