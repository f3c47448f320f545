//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"github.com/fumehood/sandbox/internal/workspace"
	"golang.org/x/sys/unix"
)

// session is a Sandbox's workspace state (see session.go).
type session struct {
	// mu is read-held by every Run and file operation, and write-held
	// by the operations that reshape the workspace, and by Close.
	mu     sync.RWMutex
	closed bool

	// start guards what is made lazily: the keeper, and the file root.
	start    sync.Mutex
	kc       *keeperClient
	startErr error
	root     *workspace.Root
	// spare is a workspace mount the keeper cloned ahead for the next
	// Run (fetchSpare). A clone shows the live workspace until a
	// reshape replaces the keeper's mount; reshape and Close drop it.
	spare *os.File
	// owner names the Sandbox to the spawner, which keeps its pool and
	// tracks its runs' teardown under it; spawned says a Run went there.
	owner   string
	spawned atomic.Bool
	// teardown counts the InProcess runs not yet reaped, and the pool
	// fill New starts.
	teardown sysutil.Tracker
}

// keeperFlat, when set, says whether the keeper of the session named
// owner is to keep one tmpfs and copy for snapshots even where overlays
// work. Nothing in the package sets it: the tests do, to cover that
// layout on every kernel.
var keeperFlat func(owner string) bool

// ownerSeq numbers the Sandboxes of this process, for their owner names.
var ownerSeq atomic.Uint64

func newSession() *session {
	return &session{owner: fmt.Sprintf("%d-%d", os.Getpid(), ownerSeq.Add(1))}
}

// logTo sends what the spawner reports about this session's runs and pool
// to log, if it is not nil, until Close.
func (ss *session) logTo(log *slog.Logger) {
	if log != nil {
		ownerLogs.Store(ss.owner, log)
	}
}

// kept says whether the session's workspace lives in a keeper: neither a
// host directory nor a fresh tmpfs per Run.
func (o *resolved) kept() bool { return o.Workspace == "" && !o.FreshWorkspace }

// fileOwner is the host uid/gid that files the caller creates are given:
// the runs' host ids, so the program can change them; -1 where the
// caller's own ids are those already.
func (o *resolved) fileOwner() (int, int) {
	if os.Geteuid() != 0 {
		return -1, -1
	}
	return o.HostIDs()
}

// keeper returns the session's keeper, starting it the first time.
func (ss *session) keeper(o *resolved) (*keeperClient, error) {
	ss.start.Lock()
	defer ss.start.Unlock()
	if ss.kc == nil && ss.startErr == nil {
		uid, gid := o.HostIDs()
		flat := keeperFlat != nil && keeperFlat(ss.owner)
		ss.kc, ss.startErr = startKeeperProcess(orDefault(o.WorkspaceSize, DefaultWorkspaceSize), uid, gid, o.WorkspaceFrom, flat)
	}
	return ss.kc, ss.startErr
}

// forRun read-locks the session for one Run and returns the mount the
// Run's /workspace is to be (nil: the init makes its own), the release
// to call when the Run is over and, with SessionWorkspace.TrackChanges, what lists
// the Run's changes before the release (else nil).
func (s *Sandbox) forRun() (*os.File, func(), func() ([]Change, int), error) {
	ss := s.ws
	ss.mu.RLock()
	if ss.closed {
		ss.mu.RUnlock()
		return nil, nil, nil, fmt.Errorf("sandbox: run: %w", ErrClosed)
	}
	f, after, err := s.sessionMount()
	if err != nil {
		ss.mu.RUnlock()
		return nil, nil, nil, err
	}
	var list func() ([]Change, int)
	forget := func() {}
	if s.cfg.TrackChanges && s.cfg.kept() {
		// The program has not started: the record is the workspace
		// as the Run finds it. sessionMount started the keeper.
		kc, _ := ss.keeper(&s.cfg)
		list, forget = s.runChanges(kc)
	}
	return f, func() {
		forget()
		ss.mu.RUnlock()
		after()
	}, list, nil
}

// sessionMount returns the mount a sandbox's /workspace is to be (nil:
// the init makes its own), and what to do once the sandbox has it. The
// caller holds the session's read lock.
func (s *Sandbox) sessionMount() (*os.File, func(), error) {
	ss := s.ws
	if !s.cfg.kept() {
		return nil, func() {}, nil
	}
	kc, err := ss.keeper(&s.cfg)
	var f *os.File
	if err == nil {
		if f = ss.takeSpare(kc); f == nil {
			_, f, err = kc.call(wire.KeeperRequest{Op: wire.KeeperMount})
		}
	}
	if err != nil {
		// The keeper is the first process a session clones; where
		// that failed for want of user namespaces, say so as Run
		// would.
		if exe, xerr := selfExe(); xerr == nil {
			var ue *UnsupportedError
			if perr := probeClone(exe, 0); errors.As(perr, &ue) {
				return nil, nil, ue
			}
		}
		return nil, nil, &SetupError{Stage: "workspace", Op: "start the session's workspace", Err: err}
	}
	return f, func() { go ss.fetchSpare(kc) }, nil
}

// takeSpare returns the workspace mount fetched ahead, if there is one
// and its keeper kc lives: a Run after the keeper's death fails as it
// would without one, rather than run in a workspace no one keeps.
func (ss *session) takeSpare(kc *keeperClient) *os.File {
	ss.start.Lock()
	defer ss.start.Unlock()
	f := ss.spare
	ss.spare = nil
	select {
	case <-kc.reaped:
		if f != nil {
			f.Close()
		}
		return nil
	default:
		return f
	}
}

// fetchSpare asks kc for the next Run's workspace mount once a Run is
// over, so that the next one need not wait for the keeper (a fifth of a
// millisecond of a pooled Run here). A failure is left for that Run to
// meet and report.
func (ss *session) fetchSpare(kc *keeperClient) {
	ss.mu.RLock() // a reshape or Close waits, and then drops it
	defer ss.mu.RUnlock()
	ss.start.Lock()
	skip := ss.closed || ss.spare != nil
	ss.start.Unlock()
	if skip {
		return
	}
	_, f, err := kc.call(wire.KeeperRequest{Op: wire.KeeperMount})
	if err != nil {
		return
	}
	ss.start.Lock()
	defer ss.start.Unlock()
	if ss.spare != nil {
		f.Close()
		return
	}
	ss.spare = f
}

// dropSpare closes the workspace mount fetched ahead; the session is
// write-locked.
func (ss *session) dropSpare() {
	if ss.spare != nil {
		ss.spare.Close()
		ss.spare = nil
	}
}

// files read-locks the session for one file operation and returns its
// root.
func (s *Sandbox) files(op string) (*workspace.Root, func(), error) {
	if s.err != nil {
		return nil, nil, s.err
	}
	ss := s.ws
	ss.mu.RLock()
	fail := func(err error) (*workspace.Root, func(), error) {
		ss.mu.RUnlock()
		return nil, nil, fmt.Errorf("sandbox: %s: %w", op, err)
	}
	if ss.closed {
		return fail(ErrClosed)
	}
	if s.cfg.FreshWorkspace {
		return fail(optionErr("Options.Workspace (FreshWorkspace)", "set", "each Run has a workspace of its own, gone when it ends; there is none to %s", op))
	}
	var kc *keeperClient
	if s.cfg.kept() {
		var err error
		if kc, err = ss.keeper(&s.cfg); err != nil {
			return fail(err)
		}
	}
	ss.start.Lock()
	defer ss.start.Unlock()
	if ss.root == nil {
		uid, gid := s.cfg.fileOwner()
		if kc == nil {
			r, err := workspace.Open(s.cfg.Workspace, uid, gid)
			if err != nil {
				return fail(err)
			}
			ss.root = r
		} else {
			_, f, err := kc.call(wire.KeeperRequest{Op: wire.KeeperRoot})
			if err != nil {
				return fail(err)
			}
			// The Root takes an fd of its own; f's is closed with f.
			fd, err := unix.Dup(int(f.Fd()))
			f.Close()
			if err != nil {
				return fail(err)
			}
			ss.root = workspace.FromFD(fd, DefaultDir, uid, gid)
			// All layers together hold at most the cap; WriteTar writes
			// no more file content than that.
			ss.root.SetSize(orDefault(s.cfg.WorkspaceSize, DefaultWorkspaceSize))
		}
	}
	return ss.root, ss.mu.RUnlock, nil
}

// reshape write-locks the session for Snapshot, Restore and Reset, which
// need its keeper, and drops the file root the keeper will replace.
func (s *Sandbox) reshape(op string, fn func(kc *keeperClient) error) error {
	if s.err != nil {
		return s.err
	}
	ss := s.ws
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return fmt.Errorf("sandbox: %s: %w", op, ErrClosed)
	}
	switch {
	case s.cfg.FreshWorkspace:
		return fmt.Errorf("sandbox: %s: %w", op, optionErr("Options.Workspace (FreshWorkspace)", "set", "each Run has a workspace of its own; there is none to %s", op))
	case s.cfg.Workspace != "":
		return fmt.Errorf("sandbox: %s: %w", op, &UnsupportedError{Feature: op, Reason: "the workspace is the host directory " + s.cfg.Workspace + " (Options.Workspace, a HostWorkspace)",
			Hint: "leave Options.Workspace nil for a session workspace (seed it with SessionWorkspace.From)"})
	}
	kc, err := ss.keeper(&s.cfg)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", op, err)
	}
	if ss.root != nil {
		ss.root.Close()
		ss.root = nil
	}
	ss.dropSpare()
	if s.live != nil {
		// Its processes would write on while the workspace is taken
		// or replaced beneath it: the next call starts a new one.
		s.live.stop(nil)
	}
	if err := fn(kc); err != nil {
		return fmt.Errorf("sandbox: %s: %w", op, err)
	}
	return nil
}

// Snapshot keeps the workspace's content as it is now. With the default
// session workspace it copies nothing: the current changes become a
// read-only layer and new changes go to a fresh one. Snapshots count
// towards SessionWorkspace.Size while the workspace stands on them.
func (s *Sandbox) Snapshot() (*Snapshot, error) {
	var snap *Snapshot
	err := s.reshape("snapshot", func(kc *keeperClient) error {
		rep, _, err := kc.call(wire.KeeperRequest{Op: wire.KeeperSnapshot})
		if err == nil {
			snap = &Snapshot{s: s, id: rep.ID}
		}
		return err
	})
	return snap, err
}

// Restore makes the workspace what it was when snap was taken: content,
// modes, symlinks and modification times. snap stays valid.
func (s *Sandbox) Restore(snap *Snapshot) error {
	if snap == nil || snap.s != s {
		return fmt.Errorf("sandbox: restore: %w", optionErr("snapshot", fmt.Sprint(snap), "was not taken by this Sandbox"))
	}
	return s.reshape("restore", func(kc *keeperClient) error {
		_, _, err := kc.call(wire.KeeperRequest{Op: wire.KeeperRestore, ID: snap.id})
		return err
	})
}

// Reset returns the workspace to its initial content: empty, or a copy of
// SessionWorkspace.From as it was when the session began.
func (s *Sandbox) Reset() error {
	return s.reshape("reset", func(kc *keeperClient) error {
		_, _, err := kc.call(wire.KeeperRequest{Op: wire.KeeperRestore, ID: 0})
		return err
	})
}

// Release frees what the snapshot holds; it can no longer be restored.
func (snap *Snapshot) Release() error {
	if snap == nil || snap.id == 0 {
		return nil
	}
	return snap.s.reshape("release snapshot", func(kc *keeperClient) error {
		_, _, err := kc.call(wire.KeeperRequest{Op: wire.KeeperDrop, ID: snap.id})
		return err
	})
}

// Close ends the session: it waits for the Runs and file operations in
// flight, then removes the workspace and its snapshots (the helper process
// holding them exits). A host Options.Workspace directory is left as it
// is. Close is idempotent; later calls on the Sandbox fail with ErrClosed.
func (s *Sandbox) Close() error {
	s.stopImagePulls()
	if s.live != nil {
		// First, so that the calls Close waits for end.
		s.live.stop(fmt.Errorf("sandbox: %w", ErrClosed))
	}
	err := s.ws.close()
	// Once every run has ended: the trail's last events are queued.
	s.audit.close()
	// After the runs, whose proxies used it.
	s.secrets.close()
	// After the runs and the pool, whose roots it is.
	s.closeImage()
	return err
}

func (ss *session) close() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil
	}
	ss.closed = true
	// What the runs left to finish after returning (their cgroups), and
	// the spawner's prepared sandboxes, are gone before Close returns.
	ss.teardown.Wait()
	if ss.spawned.Load() {
		if sp := currentSpawner(); sp != nil {
			sp.sync(ss.owner)
		}
	}
	ownerLogs.Delete(ss.owner)
	ss.start.Lock()
	defer ss.start.Unlock()
	if ss.root != nil {
		ss.root.Close()
		ss.root = nil
	}
	ss.dropSpare()
	if ss.kc != nil {
		ss.kc.close()
		ss.kc = nil
	}
	return nil
}

// WriteFile writes data to the workspace file name with permission bits
// perm, creating missing directories. A symlink at name is replaced, not
// followed; readers never see half a file. name is relative to /workspace,
// or an absolute path beneath it; one that is the workspace itself or
// above it is refused with ErrOutsideWorkspace.
func (s *Sandbox) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return s.withFiles("write file", name, func(r *workspace.Root, rel string) error {
		return r.WriteFile(rel, bytes.NewReader(data), perm)
	})
}

// ReadFile returns the content of the regular workspace file name.
// Symlinks on the way resolve inside the workspace.
func (s *Sandbox) ReadFile(name string) ([]byte, error) {
	var data []byte
	err := s.withFiles("read file", name, func(r *workspace.Root, rel string) error {
		f, err := r.ReadFile(rel)
		if err != nil {
			return err
		}
		defer f.Close()
		data, err = io.ReadAll(f)
		return err
	})
	return data, err
}

// ReadDir lists the workspace directory name, sorted by name. It holds
// at most eight descriptors at once whatever the directory's depth.
func (s *Sandbox) ReadDir(name string) ([]WorkspaceEntry, error) {
	var out []WorkspaceEntry
	err := s.withFiles("read dir", name, func(r *workspace.Root, rel string) error {
		es, err := r.List(rel)
		for _, e := range es {
			out = append(out, WorkspaceEntry(e))
		}
		return err
	})
	return out, err
}

// Stat describes the workspace entry name; a final symlink is described,
// not followed.
func (s *Sandbox) Stat(name string) (WorkspaceEntry, error) {
	var out WorkspaceEntry
	err := s.withFiles("stat", name, func(r *workspace.Root, rel string) error {
		e, err := r.Stat(rel)
		out = WorkspaceEntry(e)
		return err
	})
	return out, err
}

// MkdirAll creates the workspace directory name and its missing parents.
func (s *Sandbox) MkdirAll(name string) error {
	return s.withFiles("mkdir", name, func(r *workspace.Root, rel string) error { return r.MkdirAll(rel) })
}

// RemoveAll removes the workspace entry name and everything beneath it,
// never following a symlink; a missing name is not an error. A name that
// is the workspace itself (".", "/workspace", "a/..") empties it, like
// rm -rf /workspace/* with the dot files: the directory itself stays
// (the sandbox's /workspace is mounted on it). It works for every kind
// of workspace, a host Options.Workspace too, which Reset does not
// support. A name
// above the workspace ("..", "a/../..", "/workspace/..") is refused with
// ErrOutsideWorkspace, and the empty name with fs.ErrInvalid, and nothing
// is removed. It holds at most eight descriptors at once at any depth,
// and memory for one path and a small frame per level.
func (s *Sandbox) RemoveAll(name string) error {
	if name == "" {
		// An unset name must not empty the workspace.
		return fmt.Errorf("sandbox: remove: an empty name; to empty the workspace, name it: \".\" or %q: %w", DefaultDir, fs.ErrInvalid)
	}
	return s.withFiles("remove", name, func(r *workspace.Root, rel string) error { return r.RemoveAll(rel) })
}

// WriteTar writes the workspace tree at dir to w as a tar stream:
// directories, regular files and symlinks with their modes and times,
// named relative to dir. Devices, FIFOs and sockets are left out. A file
// with several hard links goes out once, its other names as tar hard
// links to the first; a sparse file as its data (GNU's PAX sparse format
// 1.0), not its holes. Whatever the program left, it holds at most eight
// descriptors at once at any depth, memory for one path and a frame per
// level, writes no entry name longer than MaxTarPath (a longer
// one stops it with an error matching syscall.ENAMETOOLONG) and no more
// file content than SessionWorkspace.Size (a session workspace; a host
// Options.Workspace: its file system's size).
func (s *Sandbox) WriteTar(w io.Writer, dir string) error {
	return s.withFiles("write tar", dir, func(r *workspace.Root, rel string) error { return r.WriteTar(w, rel) })
}

// ExtractTar writes the directories, regular files, hard links and
// symlinks of the tar stream r beneath the workspace directory dir; zero
// blocks (a sparse file's holes) stay holes. An entry whose name leaves
// dir, or a file entry that would replace the workspace itself, is
// refused (ErrOutsideWorkspace), as is any other type of entry; the entries
// before it stay written.
//
// It runs in the caller's process, and what it costs is bounded by the
// length of r and the workspace's size, whatever sizes the stream
// declares: a file entry is checked before its content is read, and one
// that would take the stream's files past SessionWorkspace.Size (a host
// Options.Workspace: its file system's size) is refused with an error
// matching syscall.EFBIG that names the entry, its size and the limit.
// A sparse entry's holes count at their full size, since archive/tar
// reads them back as zeros. Cancelling ctx stops it before its next read
// of r or of an entry's content, with ctx's error.
func (s *Sandbox) ExtractTar(ctx context.Context, r io.Reader, dir string) error {
	return s.withFiles("extract tar", dir, func(root *workspace.Root, rel string) error { return root.ExtractTar(ctx, r, rel) })
}

func (s *Sandbox) withFiles(op, name string, fn func(r *workspace.Root, rel string) error) error {
	rel, err := workspacePath(name)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", op, err)
	}
	r, release, err := s.files(op)
	if err != nil {
		return err
	}
	defer release()
	if err := fn(r, rel); err != nil {
		return fmt.Errorf("sandbox: %s: %w", op, err)
	}
	return nil
}
