//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkGroup is the per-run cost of a run's cgroup without a process:
// create with limits, read usage, delete.
func BenchmarkGroup(b *testing.B) {
	l := Limits{Memory: 512 << 20, CPUQuota: 100000, CPUPeriod: 100000, Pids: 256}
	var create, usage, del time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		g, err := New("", fmt.Sprintf("%sbench-%d-%d", NamePrefix, os.Getpid(), i), l)
		if err != nil {
			b.Skipf("no cgroup: %v", err)
		}
		t1 := time.Now()
		g.Usage()
		t2 := time.Now()
		if err := g.Delete(); err != nil {
			b.Fatal(err)
		}
		create, usage, del = create+t1.Sub(t0), usage+t2.Sub(t1), del+time.Since(t2)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64(create/n)/1e3, "create-µs")
	b.ReportMetric(float64(usage/n)/1e3, "usage-µs")
	b.ReportMetric(float64(del/n)/1e3, "delete-µs")
}
