//go:build linux

package sandbox

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkAuditExec measures what Options.Audit.Exec adds to each exec: a
// shell loop that runs /bin/true 1,000 times, in a Sandbox with an audit
// trail (to a handler that drops what it gets) with and without AuditExec,
// and without a trail. The figure is µs/exec, the run's wall time over the
// execs.
func BenchmarkAuditExec(b *testing.B) {
	requireSandbox(b)
	const execs = 1000
	for _, mode := range []string{"none", "audit", "audit+exec"} {
		b.Run("trail="+mode, func(b *testing.B) {
			opts := Options{}
			if mode != "none" {
				opts.Audit = &Audit{Handler: countingHandler{}, Exec: mode == "audit+exec"}
			}
			s := newTest(b, opts)
			var wall time.Duration
			for range b.N {
				res, err := s.Run(context.Background(), Command("sh", "-c", "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done"))
				if err != nil || !res.Success() {
					b.Fatalf("%v %v %s", err, res.Err(), res.Stderr)
				}
				wall += res.WallTime
			}
			b.ReportMetric(float64(wall.Microseconds())/float64(b.N*execs), "µs/exec")
		})
	}
}

// countingHandler takes every record and keeps nothing.
type countingHandler struct{}

func (countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (countingHandler) Handle(context.Context, slog.Record) error { return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h countingHandler) WithGroup(string) slog.Handler           { return h }
