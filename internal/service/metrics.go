package service

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fumehood/sandbox"
)

// durationBuckets are the upper bounds, in seconds, of the run duration
// histogram: from a pooled start (a few ms) to -max-timeout's default.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// rejectReasons label sandbox_serve_rejected_total.
var rejectReasons = []string{"forbidden", "full", "invalid", "not_found", "quota", "shutting_down", "unauthenticated"}

// metrics are the server's counters, in the Prometheus text format 0.0.4,
// written by hand to keep the example free of dependencies.
type metrics struct {
	inFlight, queued atomic.Int64
	// sessions live, and counted as they are created and end.
	sessions, sessionsCreated, sessionsEnded atomic.Int64
	// conns counts the client connections; nil until the server listens.
	conns *cappedListener

	mu       sync.Mutex
	causes   []string         // every cause, in the order they are written
	runs     map[string]int64 // by cause
	rejected map[string]int64 // by reason
	buckets  []int64          // buckets[i] counts the runs of at most durationBuckets[i] seconds
	// By tenant label (tenantLabel): runs by cause, quota refusals by
	// quota, live sessions.
	tenantRuns     map[[2]string]int64
	tenantRejected map[[2]string]int64
	tenantSessions map[string]int64
	count          int64
	sum            float64 // seconds
}

func newMetrics() *metrics {
	m := &metrics{runs: map[string]int64{}, rejected: map[string]int64{}, buckets: make([]int64, len(durationBuckets)),
		tenantRuns: map[[2]string]int64{}, tenantRejected: map[[2]string]int64{}, tenantSessions: map[string]int64{}}
	// Every cause is written from the start, at 0, so that rates work
	// from the first scrape.
	for o := sandbox.Exited; o.String() != "unknown"; o++ {
		m.causes = append(m.causes, strings.ReplaceAll(o.String(), " ", "_"))
	}
	m.causes = append(m.causes, "error")
	return m
}

// observe counts a finished run of the tenant labelled tenant.
func (m *metrics) observe(tenant, cause string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[cause]++
	m.tenantRuns[[2]string{tenant, cause}]++
	m.count++
	m.sum += d.Seconds()
	for i, le := range durationBuckets {
		if d.Seconds() <= le {
			m.buckets[i]++
		}
	}
}

// reject counts a refused request.
func (m *metrics) reject(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejected[reason]++
}

// rejectQuota counts a refusal for the quota of the tenant labelled tenant.
func (m *metrics) rejectQuota(tenant, quota string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tenantRejected[[2]string{tenant, quota}]++
}

func (m *metrics) sessionCreated(tenant string) {
	m.sessions.Add(1)
	m.sessionsCreated.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tenantSessions[tenant]++
}

func (m *metrics) sessionEnded(tenant string) {
	m.sessions.Add(-1)
	m.sessionsEnded.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tenantSessions[tenant]--
}

// total is the number of runs finished.
func (m *metrics) total() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	m.mu.Lock()
	header(&b, "sandbox_serve_runs_total", "counter", "Runs finished, by how they ended.")
	for _, c := range m.causes {
		fmt.Fprintf(&b, "sandbox_serve_runs_total{cause=%q} %d\n", c, m.runs[c])
	}
	header(&b, "sandbox_serve_run_duration_seconds", "histogram", "Duration of runs, sandbox set-up and removal included.")
	for i, le := range durationBuckets {
		fmt.Fprintf(&b, "sandbox_serve_run_duration_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(le, 'g', -1, 64), m.buckets[i])
	}
	fmt.Fprintf(&b, "sandbox_serve_run_duration_seconds_bucket{le=\"+Inf\"} %d\n", m.count)
	fmt.Fprintf(&b, "sandbox_serve_run_duration_seconds_sum %s\n", strconv.FormatFloat(m.sum, 'g', -1, 64))
	fmt.Fprintf(&b, "sandbox_serve_run_duration_seconds_count %d\n", m.count)
	header(&b, "sandbox_serve_rejected_total", "counter", "Requests refused, by reason.")
	for _, r := range rejectReasons {
		fmt.Fprintf(&b, "sandbox_serve_rejected_total{reason=%q} %d\n", r, m.rejected[r])
	}
	// The tenants' series are beside the totals rather than labels of
	// them, so that a query of the totals (the autoscaler's of sessions)
	// keeps one series a pod.
	header(&b, "sandbox_serve_tenant_runs_total", "counter", "Runs finished, by tenant and how they ended.")
	for _, k := range slices.SortedFunc(maps.Keys(m.tenantRuns), compareKeys) {
		fmt.Fprintf(&b, "sandbox_serve_tenant_runs_total{tenant=%q,cause=%q} %d\n", k[0], k[1], m.tenantRuns[k])
	}
	header(&b, "sandbox_serve_tenant_rejected_total", "counter", "Requests refused for a tenant's quota, by tenant and quota.")
	for _, k := range slices.SortedFunc(maps.Keys(m.tenantRejected), compareKeys) {
		fmt.Fprintf(&b, "sandbox_serve_tenant_rejected_total{tenant=%q,quota=%q} %d\n", k[0], k[1], m.tenantRejected[k])
	}
	header(&b, "sandbox_serve_tenant_sessions", "gauge", "Live sessions, by tenant.")
	for _, k := range slices.Sorted(maps.Keys(m.tenantSessions)) {
		fmt.Fprintf(&b, "sandbox_serve_tenant_sessions{tenant=%q} %d\n", k, m.tenantSessions[k])
	}
	m.mu.Unlock()
	header(&b, "sandbox_serve_runs_in_flight", "gauge", "Runs holding a slot.")
	fmt.Fprintf(&b, "sandbox_serve_runs_in_flight %d\n", m.inFlight.Load())
	header(&b, "sandbox_serve_runs_queued", "gauge", "Requests waiting for a slot.")
	fmt.Fprintf(&b, "sandbox_serve_runs_queued %d\n", m.queued.Load())
	header(&b, "sandbox_serve_sessions", "gauge", "Live sessions.")
	fmt.Fprintf(&b, "sandbox_serve_sessions %d\n", m.sessions.Load())
	header(&b, "sandbox_serve_sessions_created_total", "counter", "Sessions created.")
	fmt.Fprintf(&b, "sandbox_serve_sessions_created_total %d\n", m.sessionsCreated.Load())
	header(&b, "sandbox_serve_sessions_ended_total", "counter", "Sessions ended: deleted, expired, or at shutdown.")
	fmt.Fprintf(&b, "sandbox_serve_sessions_ended_total %d\n", m.sessionsEnded.Load())

	if c := m.conns; c != nil {
		header(&b, "sandbox_serve_connections", "gauge", "Client connections open.")
		fmt.Fprintf(&b, "sandbox_serve_connections %d\n", c.open.Load())
		header(&b, "sandbox_serve_connections_refused_total", "counter", "Client connections beyond -max-connections, answered 503 and closed.")
		fmt.Fprintf(&b, "sandbox_serve_connections_refused_total %d\n", c.refused.Load())
	}

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(b.Bytes())
}

func compareKeys(a, b [2]string) int {
	return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
}

func header(b *bytes.Buffer, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}
