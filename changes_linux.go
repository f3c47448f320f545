//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/fumehood/sandbox/internal/wire"
	"github.com/fumehood/sandbox/internal/workspace"
)

// Changes lists the workspace paths that differ between snapshot since and
// now, sorted by path, at most MaxChanges of them, and how many more
// there were. A nil since means the workspace's initial content: empty,
// or SessionWorkspace.From's copy, as the session began or its last
// Reset left it.
//
// It compares content, not history: a file changed and changed back is
// not listed. Entries are compared by type and mode, symlinks by target,
// regular files by size and modification time and, when those are equal,
// by reading both (so it reads up to twice SessionWorkspace.Size). It
// holds a small record per entry of the snapshot and the workspace, in
// the session's keeper process, while it runs: a workspace whose record
// would pass 32 MiB (see Sessions in the package documentation) gets an
// error instead.
//
// With Options.Workspace (a host directory, which has no snapshots) it
// returns an error matching ErrNotSupported; with FreshWorkspace,
// an *OptionError.
func (s *Sandbox) Changes(since *Snapshot) ([]Change, int, error) {
	if since != nil && since.s != s {
		return nil, 0, fmt.Errorf("sandbox: changes: %w", optionErr("snapshot", fmt.Sprint(since), "was not taken by this Sandbox"))
	}
	if s.cfg.Workspace != "" {
		return nil, 0, fmt.Errorf("sandbox: changes: %w", &UnsupportedError{Feature: "changes",
			Reason: "the workspace is the host directory " + s.cfg.Workspace + " (Options.Workspace, a HostWorkspace), which has no snapshots to compare with",
			Hint:   "leave Options.Workspace nil for a session workspace (seed it with SessionWorkspace.From)"})
	}
	id := 0
	if since != nil {
		id = since.id
	}
	var out []Change
	var dropped int
	err := s.withKeeper("changes", func(kc *keeperClient) error {
		var err error
		out, dropped, err = kc.changes(wire.KeeperRequest{Op: wire.KeeperChangesSince, ID: id, Limit: MaxChanges})
		return err
	})
	return out, dropped, err
}

// withKeeper read-locks the session for one request to its keeper.
func (s *Sandbox) withKeeper(op string, fn func(kc *keeperClient) error) error {
	if s.err != nil {
		return s.err
	}
	ss := s.ws
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	switch {
	case ss.closed:
		return fmt.Errorf("sandbox: %s: %w", op, ErrClosed)
	case s.cfg.FreshWorkspace:
		return fmt.Errorf("sandbox: %s: %w", op, optionErr("Options.Workspace (FreshWorkspace)", "set", "each Run has a workspace of its own; there is none to list %s of", op))
	}
	kc, err := ss.keeper(&s.cfg)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", op, err)
	}
	if err := fn(kc); err != nil {
		return fmt.Errorf("sandbox: %s: %w", op, err)
	}
	return nil
}

// changes sends req, a KeeperRunChanges or KeeperChangesSince, and reads
// the list its reply's memfd holds.
func (c *keeperClient) changes(req wire.KeeperRequest) ([]Change, int, error) {
	_, f, err := c.call(req)
	if err != nil {
		return nil, 0, err
	}
	if f == nil {
		return nil, 0, fmt.Errorf("workspace keeper: %w: no list of changes in its reply", ErrSpawner)
	}
	defer f.Close()
	return readChanges(f)
}

// maxChangesFile bounds what is read of a list: MaxChanges entries of a
// path as long as the kernel allows, in base64, with their fields.
const maxChangesFile = MaxChanges * (4096*4/3 + 256)

func readChanges(f *os.File) ([]Change, int, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	var kcs wire.KeeperChanges
	if err := json.NewDecoder(io.LimitReader(f, maxChangesFile)).Decode(&kcs); err != nil {
		return nil, 0, fmt.Errorf("read the list of changes: %w", err)
	}
	if len(kcs.Changes) > MaxChanges {
		return nil, 0, fmt.Errorf("read the list of changes: %d entries, more than %d", len(kcs.Changes), MaxChanges)
	}
	out := make([]Change, len(kcs.Changes))
	for i, c := range kcs.Changes {
		out[i] = Change{Path: string(c.Path), Kind: ChangeKind(c.Kind), Size: c.Size, Mode: workspace.ModeOf(c.Mode)}
	}
	return out, kcs.Dropped, nil
}

// runChanges records the workspace as a Run with SessionWorkspace.TrackChanges
// finds it, and returns what lists the Run's changes once it is over and
// what forgets the record if it was never listed. The session is
// read-locked until then. A record that fails (a workspace too large to
// record, a directory another Run moved meanwhile) fails the list, not
// the Run.
func (s *Sandbox) runChanges(kc *keeperClient) (list func() ([]Change, int), forget func()) {
	rep, _, err := kc.call(wire.KeeperRequest{Op: wire.KeeperMark})
	if err != nil {
		s.log.Warn("sandbox: the workspace could not be recorded for the run's changes", "error", err)
		return func() ([]Change, int) { return nil, -1 }, func() {}
	}
	var once sync.Once
	take := func() ([]Change, int, error) {
		var cs []Change
		var dropped int
		err := fmt.Errorf("listed already")
		once.Do(func() {
			cs, dropped, err = kc.changes(wire.KeeperRequest{Op: wire.KeeperRunChanges, ID: rep.ID, Limit: MaxChanges})
		})
		return cs, dropped, err
	}
	list = func() ([]Change, int) {
		cs, dropped, err := take()
		if err != nil {
			s.log.Warn("sandbox: the run's workspace changes could not be listed", "error", err)
			return nil, -1
		}
		return cs, dropped
	}
	forget = func() { take() }
	return list, forget
}
