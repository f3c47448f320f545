package egress

import (
	"sync"
	"time"
)

// The proxy's CPU on a run's behalf is bounded by a work budget: a token
// bucket of CPU time that refills at CPUShare of the run's CPU limit and
// holds at most CPUBurst. Each piece of work the sandbox can cause is
// charged its cost as measured (below), and once the bucket is empty the
// proxy stops reading from the sandbox, and stops accepting its
// connections, until it has refilled: the sandbox's writes then block in
// its own kernel buffers, which is backpressure, not an error. So over a
// run of duration d limited to c CPUs the proxy spends about
// CPUBurst + CPUShare*c*d of CPU time for it, whatever it sends.
const (
	// CPUShare is the fraction of the run's CPU limit the budget refills
	// at: a run limited to 1 CPU may make the proxy spend 100 ms of CPU
	// time a second, once its burst is spent (about 28 MB/s through a
	// tunnel at the costs below).
	CPUShare = 0.10

	// CPUBurst is the CPU time the budget starts with and can save up:
	// enough for a package install or a clone to run at full speed (at
	// the costs below, about 140 MB relayed in 32 KiB reads, or about a
	// thousand requests with ordinary headers).
	CPUBurst = 500 * time.Millisecond
)

// Costs charged to the budget, in nanoseconds of the proxy's CPU time,
// measured on a 2-core x86-64 host (the caller's getrusage across runs
// that did nothing but the one kind of work, and the package's
// benchmarks), rounded up. They are estimates: a loaded host, or one
// much slower, spends more, which is why the bound is stated with a
// factor of two in the tests.
const (
	// acceptCost is one accepted connection: the accept, a session with
	// its buffers and goroutine, the close (about 160 µs measured for
	// connections opened and closed in a loop).
	acceptCost = 300_000
	// requestCost is one request: reading it, deciding, resolving,
	// dialing and recording it, beyond its header bytes.
	requestCost = 200_000
	// headerByteCost is one byte read while a request header is being
	// read: a header of many tiny fields costs its parser, and the
	// rewrite of a forwarded request, this much a byte (about 150 ns
	// measured for 250 KiB headers of 8-byte fields, forwarded).
	headerByteCost = 200
	// relayByteCost is one byte relayed either way between the sandbox
	// and upstream (about 1 ns measured for a tunnel at full speed).
	relayByteCost = 2
	// ioCost is one read or write on the sandbox's side that moved bytes:
	// the system calls and the goroutine switches around it, which a
	// program sending a byte at a time would otherwise have for free
	// (20 to 50 µs measured for reads of a few bytes on a busy host).
	ioCost = 50_000
)

// relayCost is what relaying n bytes in one read or write on the
// sandbox's side costs: the call and its bytes. Both are charged even for
// full 32 KiB reads, whose calls the per-byte figure measured on a quiet
// host already includes: on a host busy with other work the same relay
// measured two to three times that figure (smaller reads, more switches),
// and the bound must hold there too.
func relayCost(n int) int64 { return ioCost + int64(n)*relayByteCost }

// resumeAfter is how much refill a wait lets accumulate before the proxy
// reads again: waking for every buffer's worth would cost more in
// wake-ups than the copy, so an emptied budget pauses for a while.
const resumeAfter = 100 * time.Millisecond

// cpuBudget is one Proxy's token bucket of CPU time. A nil *cpuBudget charges
// nothing and never waits.
type cpuBudget struct {
	rate   float64 // nanoseconds of tokens per nanosecond of wall time
	burst  float64
	resume float64         // a wait ends with this many tokens
	done   <-chan struct{} // ends every wait (the proxy closed)

	mu     sync.Mutex
	tokens float64 // may be negative: work done before it was paid for
	last   time.Duration
}

// newCPUBudget returns the budget for a run limited to cpus CPUs, or nil for
// no budget (cpus <= 0).
func newCPUBudget(cpus float64, done <-chan struct{}) *cpuBudget {
	if cpus <= 0 {
		return nil
	}
	rate := CPUShare * cpus
	return &cpuBudget{rate: rate, burst: float64(CPUBurst), resume: min(float64(CPUBurst), rate*float64(resumeAfter)),
		tokens: float64(CPUBurst), last: sinceEpoch(), done: done}
}

// refill adds the tokens earned since the last refill. b.mu is held.
func (b *cpuBudget) refill() {
	now := sinceEpoch()
	b.tokens = min(b.burst, b.tokens+b.rate*float64(now-b.last))
	b.last = now
}

// charge takes cost nanoseconds from the bucket, going into debt if it
// must: the work was done already; the next wait pays for it.
func (b *cpuBudget) charge(cost int64) {
	if b == nil || cost <= 0 {
		return
	}
	b.mu.Lock()
	b.refill()
	b.tokens -= float64(cost)
	b.mu.Unlock()
}

// wait returns at once if the bucket is not in debt. Otherwise it blocks
// until the bucket holds resume tokens, the proxy closes, or stop (which
// may be nil) is closed. It sleeps for the time the refill needs; it
// never polls.
func (b *cpuBudget) wait(stop <-chan struct{}) {
	if b == nil {
		return
	}
	waiting := false
	for {
		b.mu.Lock()
		b.refill()
		if b.tokens >= 0 && (!waiting || b.tokens >= b.resume) {
			b.mu.Unlock()
			return
		}
		waiting = true
		short := b.resume - b.tokens
		b.mu.Unlock()
		t := time.NewTimer(time.Duration(short/b.rate) + time.Millisecond)
		select {
		case <-t.C:
		case <-b.done:
			t.Stop()
			return
		case <-stop:
			t.Stop()
			return
		}
	}
}
