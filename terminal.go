package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Terminal is the terminal a Cmd asks for (Cmd.Terminal).
type Terminal struct {
	// Rows and Cols are the window size, in characters; zero means
	// 24 rows and 80 columns.
	Rows, Cols uint16
}

// Default window size of a Terminal.
const (
	DefaultTerminalRows = 24
	DefaultTerminalCols = 80
)

// size is t's window size with the defaults filled in.
func (t *Terminal) size() (rows, cols uint16) {
	return orDefault(t.Rows, DefaultTerminalRows), orDefault(t.Cols, DefaultTerminalCols)
}

// ttyState is the caller's end of a running Cmd's terminal.
type ttyState struct {
	mu     sync.Mutex
	master *os.File // the pty's master while the program runs
	ended  bool
}

// ErrNotRunning is matched by the error of Cmd.Resize outside a run with a
// terminal: before the program starts, after its run, or without
// Cmd.Terminal.
var ErrNotRunning = errors.New("the program is not running on a terminal")

// Resize sets the window size of the program's terminal (Cmd.Terminal)
// to rows by cols characters; the program gets SIGWINCH. It is safe to
// call from another goroutine while Run runs. Before the program has
// started, after its run has ended, or without a Terminal it returns an
// error.
func (c *Cmd) Resize(rows, cols uint16) error {
	c.tty.mu.Lock()
	defer c.tty.mu.Unlock()
	switch {
	case c.Terminal == nil:
		return fmt.Errorf("sandbox: resize: %w: Cmd.Terminal is not set", ErrNotRunning)
	case c.tty.ended:
		return fmt.Errorf("sandbox: resize: %w: its run has ended", ErrNotRunning)
	case c.tty.master == nil:
		return fmt.Errorf("sandbox: resize: %w: it has not started", ErrNotRunning)
	}
	if err := setWinsize(c.tty.master, rows, cols); err != nil {
		return fmt.Errorf("sandbox: resize: TIOCSWINSZ: %w", err)
	}
	return nil
}

// setMaster records the master of the running program's pty.
func (s *ttyState) setMaster(f *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.master = f
}

// end closes the master, if any, once the run is over.
func (s *ttyState) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.master != nil {
		s.master.Close()
		s.master = nil
	}
	s.ended = true
}
