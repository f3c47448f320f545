package sysutil

import "sync"

// Tracker counts work in flight, such as runs whose teardown is not yet
// done, and waits for it: a sync.WaitGroup whose Add may also come while a
// Wait is under way. Close waits on one while the spawner may still be
// finishing runs that the caller, in another process, has seen end; the
// race detector cannot see that order, and a WaitGroup forbids it.
type Tracker struct {
	mu   sync.Mutex
	n    int
	zero *sync.Cond
}

// Add adds delta to the count.
func (t *Tracker) Add(delta int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += delta
	if t.n == 0 && t.zero != nil {
		t.zero.Broadcast()
	}
}

// Done ends one unit of work.
func (t *Tracker) Done() { t.Add(-1) }

// Wait returns once the count is zero.
func (t *Tracker) Wait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.zero == nil {
		t.zero = sync.NewCond(&t.mu)
	}
	for t.n > 0 {
		t.zero.Wait()
	}
}
