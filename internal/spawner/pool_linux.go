//go:build linux

package spawner

import (
	"sync"
	"time"

	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
)

// owner is what the spawner keeps for one Sandbox of its caller: the
// teardown of its ended runs, and its pool of prepared sandboxes
// (Pool).
//
// A prepared sandbox is an init launched with a Spec and no Program
// (Config.Prepare): it has built everything a cold init builds before the
// program is known (namespaces, cgroup with its limits, root, hostname,
// loopback, rlimits) and waits. A start whose Spec is Equal to the pool's
// takes one and hands it the start's Program; it then goes on exactly as a
// cold init would.
// Each serves one run, and the pool is refilled in the background.
type owner struct {
	teardown sysutil.Tracker // launches of this owner not yet torn down
	warn     func(string)    // to the Sandbox's Logger
	// warnSetup tells the Sandbox's Logger of a failure of the launcher's,
	// which the caller explains as it explains a Run's.
	warnSetup func(text string, se *wire.SetupError)

	mu        sync.Mutex
	changed   *sync.Cond       // on mu: a preparation ended, or the pool was drained
	cfg       *wire.Config     // the Spec prepared, without a program
	size      int              // how many to keep ready
	ready     []*launch.Handle // prepared, waiting
	preparing int              // preparations under way
	closed    bool             // drained: prepare no more
	failure   *wire.SetupError // the last preparation's failure; refills wait for a cold start to succeed
}

// useLocked makes the pool one of size sandboxes prepared from spec,
// destroying what was prepared from another Spec.
func (o *owner) useLocked(spec *wire.Spec, size int) {
	if o.cfg == nil || !spec.Equal(&o.cfg.Spec) {
		// What was prepared is another sandbox than this run's.
		o.discardLocked()
		o.cfg, o.failure = &wire.Config{Spec: *spec, Prepare: true}, nil
	}
	o.size = size
}

// refillDelay is how long into a run of a pooled Sandbox the refill of its
// pool waits, at most: it starts when the run has been reported (see
// serveStart).
const refillDelay = 10 * time.Millisecond

// take returns a sandbox prepared from cfg's Spec, or nil when none is
// ready. The pool becomes one for that Spec and size; refill fills it.
func (o *owner) take(cfg *wire.Config, size int) *launch.Handle {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.useLocked(&cfg.Spec, size)
	n := len(o.ready)
	if n == 0 {
		return nil
	}
	h := o.ready[n-1]
	if !h.Take(cfg.Program) {
		// A program too large for the init's block runs cold, and h
		// waits for the next.
		return nil
	}
	o.ready = o.ready[:n-1]
	return h
}

// fill fills the pool for spec to size and waits until it is full, or a
// preparation failed.
func (o *owner) fill(spec *wire.Spec, size int) *wire.SetupError {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.useLocked(spec, size)
		o.refillLocked()
	}
	for {
		switch {
		case o.failure != nil:
			return o.failure
		case o.closed:
			return &wire.SetupError{Stage: "pool", Op: "fill", Text: "the Sandbox is closed"}
		case len(o.ready) >= o.size:
			return nil
		}
		o.changed.Wait()
	}
}

// coldStarted tells the pool a cold start of its Spec worked, so a
// preparation that failed before may be tried again.
func (o *owner) coldStarted() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failure != nil {
		o.failure = nil
		o.refillLocked()
	}
}

// refill starts preparations up to size.
func (o *owner) refill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refillLocked()
}

// refillLocked starts preparations up to size.
func (o *owner) refillLocked() {
	for !o.closed && o.failure == nil && o.cfg != nil && len(o.ready)+o.preparing < o.size {
		o.preparing++
		// Counted before the goroutine runs, so that a drain
		// cannot miss a preparation about to launch.
		o.teardown.Add(1)
		go o.prepare(o.cfg)
	}
}

// prepare launches one prepared sandbox and adds it to the pool.
func (o *owner) prepare(cfg *wire.Config) {
	defer o.teardown.Done()
	h, se := launch.Prepare(cfg, &o.teardown, o.warn)
	if se == nil {
		se = h.AwaitPrepared()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.changed.Broadcast()
	o.preparing--
	switch {
	case se != nil:
		if h != nil {
			h.Destroy()
		}
		if cfg == o.cfg { // not prepared from a Spec since replaced
			o.failure = se
			o.warnSetup("preparing a pooled sandbox failed; runs start cold until one of them succeeds", se)
		}
	case o.closed || cfg != o.cfg:
		h.Destroy()
	default:
		o.ready = append(o.ready, h)
	}
	if cfg != o.cfg {
		// Prepared from a Spec since replaced, and counted in preparing
		// until now: its place goes to the Spec now wanted, which a fill
		// may be waiting for.
		o.refillLocked()
	}
}

// discardLocked destroys the prepared sandboxes that are ready.
func (o *owner) discardLocked() {
	for _, h := range o.ready {
		h.Destroy()
	}
	o.ready = nil
}

// drain destroys the pool and waits until every run and preparation of
// the owner is torn down.
func (o *owner) drain() {
	o.mu.Lock()
	o.closed = true
	o.discardLocked()
	o.changed.Broadcast()
	o.mu.Unlock()
	o.teardown.Wait()
}

// owners are the spawner's owners by name.
type owners struct {
	mu   sync.Mutex
	m    map[string]*owner
	warn func(owner, text string, se *wire.SetupError) // to the Logger of the Sandbox named owner
}

func (r *owners) get(name string) *owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*owner{}
	}
	o := r.m[name]
	if o == nil {
		o = &owner{
			warn:      func(text string) { r.warn(name, text, nil) },
			warnSetup: func(text string, se *wire.SetupError) { r.warn(name, text, se) },
		}
		o.changed = sync.NewCond(&o.mu)
		r.m[name] = o
	}
	return o
}

// remove forgets name once it is drained.
func (r *owners) remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, name)
}

// all returns every owner.
func (r *owners) all() []*owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	var l []*owner
	for _, o := range r.m {
		l = append(l, o)
	}
	return l
}
