package egress

import (
	"sync"
	"time"
)

// The proxy's CPU on a run's behalf is bounded by a work budget: a token
// bucket of CPU time that refills at CPUShare of the run's CPU limit and
// holds at most CPUBurst. Each piece of work the sandbox can cause is
// charged its cost as measured on a typical x86-64 host, and once the
// bucket is empty the proxy stops reading from the sandbox (and stops
// accepting its connections) until it has refilled: the sandbox's writes
// then block in its own kernel buffers, which is backpressure, not an
// error.
const (
	// CPUShare is the fraction of the run's CPU limit the budget refills
	// at: a run limited to 1 CPU may make the proxy spend 50 ms of CPU
	// time a second, once its burst is spent.
	CPUShare = 0.05

	// CPUBurst is the CPU time the budget starts with and can save up:
	// enough for a package install or a clone (about 200 MB relayed, or a
	// few thousand requests of ordinary size) to run at full speed.
	CPUBurst = 250 * time.Millisecond
)

// Costs charged to the budget, in nanoseconds of the proxy's CPU time.
// They were measured with the package's benchmarks (BenchmarkConnect,
// BenchmarkHTTPRequest, BenchmarkHTTPLargeHeader, BenchmarkThroughput) as
// the proxy's CPU time net of the benchmark's own ends, rounded up.
const (
	// acceptCost is one accepted connection: the accept, a session and
	// its goroutine, the close and the record of a refused one.
	acceptCost = 60_000
	// requestCost is one request: reading it, deciding, resolving,
	// dialing and recording it, beyond its header bytes.
	requestCost = 150_000
	// headerByteCost is one byte read while a request header is being
	// read: a header of many tiny fields costs its parser (and the
	// rewrite of a forwarded request) this much a byte.
	headerByteCost = 160
	// relayByteCost is one byte relayed either way between the sandbox
	// and upstream.
	relayByteCost = 2
)

// budget is one Proxy's token bucket of CPU time. A nil *budget charges
// nothing and never waits.
type budget struct {
	rate  float64 // nanoseconds of tokens per nanosecond of wall time
	burst float64
	done  <-chan struct{} // ends every wait (the proxy closed)

	mu     sync.Mutex
	tokens float64 // may be negative: work done before it was paid for
	last   time.Duration
}

// newBudget returns the budget for a run limited to cpus CPUs, or nil for
// no budget (cpus <= 0).
func newBudget(cpus float64, done <-chan struct{}) *budget {
	if cpus <= 0 {
		return nil
	}
	return &budget{rate: CPUShare * cpus, burst: float64(CPUBurst), tokens: float64(CPUBurst), last: sinceEpoch(), done: done}
}

// refill adds the tokens earned since the last refill. b.mu is held.
func (b *budget) refill() {
	now := sinceEpoch()
	b.tokens = min(b.burst, b.tokens+b.rate*float64(now-b.last))
	b.last = now
}

// charge takes cost nanoseconds from the bucket, going into debt if it
// must: the work was done already; the next wait pays for it.
func (b *budget) charge(cost int64) {
	if b == nil || cost <= 0 {
		return
	}
	b.mu.Lock()
	b.refill()
	b.tokens -= float64(cost)
	b.mu.Unlock()
}

// wait blocks until the bucket is out of debt, or the proxy closes. It
// sleeps for the time the refill needs; it never polls.
func (b *budget) wait() {
	if b == nil {
		return
	}
	for {
		b.mu.Lock()
		b.refill()
		debt := -b.tokens
		b.mu.Unlock()
		if debt <= 0 {
			return
		}
		t := time.NewTimer(time.Duration(debt/b.rate) + time.Millisecond)
		select {
		case <-t.C:
		case <-b.done:
			t.Stop()
			return
		}
	}
}
