//go:build linux

package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
	"golang.org/x/sys/unix"
)

// The tool's own terminal while a program runs on a terminal of its own
// (sandbox.Cmd.Terminal): raw, so that every key reaches the program's
// terminal as typed (Ctrl-C among them, which its line discipline turns
// into SIGINT for its foreground job), and put back exactly as it was.

// isTerminal says whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// ttySaved is the tool's terminal as it was before the run: fd 0's
// termios and the file status flags of 0, 1 and 2.
type ttySaved struct {
	termios *unix.Termios
	flags   [3]int // -1: not open
}

// makeRaw saves the state of the tool's terminal and puts fd 0 in raw
// mode, as cfmakeraw(3) does.
func makeRaw() (*ttySaved, error) {
	t, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	s := &ttySaved{termios: t}
	for fd := range s.flags {
		if s.flags[fd], err = unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil {
			s.flags[fd] = -1
		}
	}
	raw := *t
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(0, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return s, nil
}

// restore puts the terminal back as makeRaw found it. It is safe to call
// more than once, and from a signal's goroutine.
func (s *ttySaved) restore() {
	unix.IoctlSetTermios(0, unix.TCSETS, s.termios)
	for fd, fl := range s.flags {
		if fl >= 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
		}
	}
}

// windowSize is the size of the tool's terminal, from stdout, else stdin;
// zero if neither says.
func windowSize() (rows, cols uint16) {
	for _, fd := range []int{1, 0} {
		if w, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			return w.Row, w.Col
		}
	}
	return 0, 0
}

// relayResizes passes each change of the tool's window size (SIGWINCH)
// on to cmd's terminal until the returned function is called. One that
// comes before the program has started is passed on once it has.
func relayResizes(cmd *sandbox.Cmd) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		var retry <-chan time.Time
		for {
			select {
			case <-ch:
			case <-retry:
			case <-done:
				return
			}
			retry = nil
			if rows, cols := windowSize(); rows > 0 && cols > 0 && cmd.Resize(rows, cols) != nil {
				retry = time.After(50 * time.Millisecond)
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
