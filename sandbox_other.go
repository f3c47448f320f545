//go:build !linux

package sandbox

import (
	"context"
	"net"
	"os"
	"runtime"
)

func unsupported() error {
	return &UnsupportedError{Feature: "sandbox", Reason: "needs Linux namespaces; this is " + runtime.GOOS,
		Hint: "run on Linux"}
}

func (s *Sandbox) startRun(ctx context.Context, cmd *Cmd, p *Process) error { return unsupported() }

// Probe reports that no layer is available on this system.
func Probe() (*ProbeReport, error) { return &ProbeReport{}, nil }
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
