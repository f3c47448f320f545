//go:build !linux

package sandbox

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"sync"
)

type session struct{ teardown sync.WaitGroup }

func (ss *session) close() error { return nil }

func (ss *session) logTo(*slog.Logger) {}

// Snapshot is not available on this system.
func (s *Sandbox) Snapshot() (*Snapshot, error) { return nil, unsupported() }

// Restore is not available on this system.
func (s *Sandbox) Restore(snap *Snapshot) error { return unsupported() }

// Reset is not available on this system.
func (s *Sandbox) Reset() error { return unsupported() }

// Release does nothing on this system.
func (snap *Snapshot) Release() error { return nil }

// Close does nothing on this system.
func (s *Sandbox) Close() error { s.audit.close(); s.closeImage(); return nil }

// WriteFile is not available on this system.
func (s *Sandbox) WriteFile(name string, data []byte, perm fs.FileMode) error { return unsupported() }

// ReadFile is not available on this system.
func (s *Sandbox) ReadFile(name string) ([]byte, error) { return nil, unsupported() }

// ReadDir is not available on this system.
func (s *Sandbox) ReadDir(name string) ([]WorkspaceEntry, error) { return nil, unsupported() }

// Stat is not available on this system.
func (s *Sandbox) Stat(name string) (WorkspaceEntry, error) { return WorkspaceEntry{}, unsupported() }

// MkdirAll is not available on this system.
func (s *Sandbox) MkdirAll(name string) error { return unsupported() }

// RemoveAll is not available on this system.
func (s *Sandbox) RemoveAll(name string) error { return unsupported() }

// WriteTar is not available on this system.
func (s *Sandbox) WriteTar(w io.Writer, dir string) error { return unsupported() }

// ExtractTar is not available on this system.
func (s *Sandbox) ExtractTar(ctx context.Context, r io.Reader, dir string) error {
	return unsupported()
}
func newSession() *session { return &session{} }
