//go:build !linux

package sandbox

// Everything a sandbox needs from the kernel is Linux's: on other systems
// the package builds, so that programs importing it build on a laptop, and
// each method that would run or reach a sandbox returns an error wrapping
// ErrNotSupported. Options are still checked by New.

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/fumehood/sandbox/internal/image"
)

func unsupported() error {
	return &UnsupportedError{Feature: "sandbox", Reason: "needs Linux namespaces; this is " + runtime.GOOS,
		Hint: "run on Linux"}
}

// Probe reports that no layer is available on this system.
func Probe() (*ProbeReport, error) { return &ProbeReport{}, nil }

// The caller's side of a run.

func (s *Sandbox) startRun(ctx context.Context, cmd *Cmd, p *Process) error { return unsupported() }

func (s *Sandbox) fillPool() error { return unsupported() }

func setWinsize(*os.File, uint16, uint16) error { return unsupported() }

// liveSandbox is a live Sandbox's running sandbox, which needs Linux.
type liveSandbox struct{}

func (l *liveSandbox) stop(error) {}

func newLiveSandbox() *liveSandbox { return &liveSandbox{} }

func (s *Sandbox) processes(ctx context.Context) ([]ProcessInfo, error) { return nil, unsupported() }
func (s *Sandbox) signalInside(pid int, sig os.Signal) error            { return unsupported() }
func (s *Sandbox) dial(ctx context.Context, network, address string) (net.Conn, error) {
	return nil, unsupported()
}

// The checks New makes of the host, which have nothing to check where no
// sandbox runs.

func checkWritableBy(option, p string, uid, gid int) error { return nil }

func checkImageReachable(ref, root string, uid, gid int) error { return nil }

func overlayWorks(*image.Image, int, int, *slog.Logger) bool { return false }

func errnoName(e syscall.Errno) string { return fmt.Sprintf("errno %d", int(e)) }

// The workspace: a session's files and snapshots.

type session struct{ teardown sync.WaitGroup }

func newSession() *session { return &session{} }

func (ss *session) close() error { return nil }

func (ss *session) logTo(*slog.Logger) {}

// Close does nothing on this system.
func (s *Sandbox) Close() error { s.audit.close(); s.closeImage(); return nil }

// Snapshot is not available on this system.
func (s *Sandbox) Snapshot() (*Snapshot, error) { return nil, unsupported() }

// Restore is not available on this system.
func (s *Sandbox) Restore(snap *Snapshot) error { return unsupported() }

// Reset is not available on this system.
func (s *Sandbox) Reset() error { return unsupported() }

// Release does nothing on this system.
func (snap *Snapshot) Release() error { return nil }

// Changes is not available on this system.
func (s *Sandbox) Changes(since *Snapshot) ([]Change, int, error) { return nil, 0, unsupported() }

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
