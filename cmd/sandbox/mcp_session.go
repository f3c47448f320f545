package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fumehood/sandbox"
)

// Bounds of what a session keeps for the model between calls.
const (
	// maxBackground is the most background processes a session
	// remembers; the oldest that ended is forgotten first, and a start
	// beyond it while all run is refused.
	maxBackground = 16
	// backgroundTail is how much of each of a background process's
	// stdout and stderr is kept: the last bytes it wrote.
	backgroundTail = 16 << 10
	// maxSnapshots is the most named snapshots a session holds.
	maxSnapshots = 32
)

// mcpSession is the sandbox session of one MCP session.
type mcpSession struct {
	sb *sandbox.Sandbox
	// ctx lives as long as the session: background processes are
	// started with it, since a Start's ctx bounds the process's life.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	snapshots  map[string]*sandbox.Snapshot
	nextSnap   int
	background []*backgroundProcess // in the order they started
	closeOnce  sync.Once
}

func newMCPSession(opts sandbox.Options) *mcpSession {
	ctx, cancel := context.WithCancel(context.Background())
	return &mcpSession{sb: sandbox.New(opts), ctx: ctx, cancel: cancel, snapshots: map[string]*sandbox.Snapshot{}}
}

// close kills what runs in the session and removes its workspace.
func (s *mcpSession) close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.sb.Close()
	})
}

// backgroundProcess is a process start_process left running.
type backgroundProcess struct {
	pid     int
	argv    []string
	started time.Time
	proc    *sandbox.Process
	stdout  *tailBuffer
	stderr  *tailBuffer

	mu    sync.Mutex
	ended bool
	res   *sandbox.Result
	err   error
}

// startBackground starts cmd in the session's live sandbox and keeps it.
func (s *mcpSession) startBackground(cmd *sandbox.Cmd) (*backgroundProcess, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.background) >= maxBackground {
		i := slices.IndexFunc(s.background, func(b *backgroundProcess) bool { return b.hasEnded() })
		if i < 0 {
			return nil, fmt.Errorf("the session already runs %d background processes: signal one to end it first", maxBackground)
		}
		s.background = slices.Delete(s.background, i, i+1)
	}
	b := &backgroundProcess{argv: cmd.Args, started: time.Now(),
		stdout: newTailBuffer(backgroundTail), stderr: newTailBuffer(backgroundTail)}
	cmd.Stdout, cmd.Stderr = b.stdout, b.stderr
	p, err := s.sb.Start(s.ctx, cmd)
	if err != nil {
		return nil, err
	}
	b.proc, b.pid = p, p.Pid()
	s.background = append(s.background, b)
	go func() {
		res, err := p.Wait()
		b.mu.Lock()
		b.ended, b.res, b.err = true, res, err
		b.mu.Unlock()
	}()
	return b, nil
}

func (b *backgroundProcess) hasEnded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// backgroundList returns the background processes, oldest first.
func (s *mcpSession) backgroundList() []*backgroundProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.background)
}

// snapshot takes a snapshot and keeps it under name, or a name of its own.
func (s *mcpSession) snapshot(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		for {
			s.nextSnap++
			name = fmt.Sprintf("snapshot-%d", s.nextSnap)
			if s.snapshots[name] == nil {
				break
			}
		}
	}
	old := s.snapshots[name]
	if old == nil && len(s.snapshots) >= maxSnapshots {
		return "", fmt.Errorf("the session holds %d snapshots, the most it keeps: reuse a name to replace one", maxSnapshots)
	}
	snap, err := s.sb.Snapshot()
	if err != nil {
		return "", err
	}
	s.snapshots[name] = snap
	if old != nil {
		old.Release()
	}
	return name, nil
}

// snapshotNamed returns the snapshot kept under name.
func (s *mcpSession) snapshotNamed(name string) (*sandbox.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snapshots[name]
	if snap == nil {
		names := make([]string, 0, len(s.snapshots))
		for n := range s.snapshots {
			names = append(names, n)
		}
		slices.Sort(names)
		if len(names) == 0 {
			return nil, fmt.Errorf("no snapshot %q: this session has taken none yet (call snapshot first)", name)
		}
		return nil, fmt.Errorf("no snapshot %q: this session has %s", name, quoteList(names))
	}
	return snap, nil
}

func quoteList(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", n)
	}
	return out
}

// tailBuffer keeps the last bytes written to it and counts them all.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		// Copied down, so that the array does not grow with the total.
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// tail returns what is kept and whether earlier bytes were dropped.
func (t *tailBuffer) tail() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf), t.total > int64(len(t.buf))
}
