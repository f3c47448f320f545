package sandboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

// The seams the tests in sandboxtest_test use, as in net/http's
// export_test.go: a probe to inject, a run to replace, and the pure parts.

func NewWithProbe(tb testing.TB, opts sandbox.Options, probe func() (*sandbox.ProbeReport, error)) *Sandbox {
	tb.Helper()
	return newSandbox(tb, opts, probe)
}

func (s *Sandbox) SetRun(run func(sb *sandbox.Sandbox, ctx context.Context, cmd *sandbox.Cmd) (*sandbox.Result, error)) {
	s.run = run
}

func SkipReason(r *sandbox.ProbeReport, opts sandbox.Options) string { return skipReason(r, opts) }

func RunTimeout(timeout time.Duration, tb testing.TB, now time.Time) time.Duration {
	return runTimeout(timeout, tb, now)
}
