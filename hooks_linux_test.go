//go:build linux

package sandbox

import (
	"sync"
	"sync/atomic"
)

// What the tests observe of a Sandbox through the package's hooks
// (runStarted, keeperFlat), by its owner name, so that no production type
// carries a field only tests read.

// runCounts are the Runs of one Sandbox that started a program, and those
// of them that took a prepared sandbox.
type runCounts struct{ runs, pooled atomic.Int64 }

var (
	counted sync.Map // owner name → *runCounts
	flat    sync.Map // owner name → struct{}: its keeper is to be flat
)

func init() {
	runStarted = func(owner string, pooled bool) {
		c, _ := counted.LoadOrStore(owner, &runCounts{})
		c.(*runCounts).runs.Add(1)
		if pooled {
			c.(*runCounts).pooled.Add(1)
		}
	}
	keeperFlat = func(owner string) bool {
		_, ok := flat.Load(owner)
		return ok
	}
}

// runsOf returns how many Runs of s started a program, and how many of
// them took a prepared sandbox.
func runsOf(s *Sandbox) (runs, pooled int64) {
	c, ok := counted.Load(s.ws.owner)
	if !ok {
		return 0, 0
	}
	return c.(*runCounts).runs.Load(), c.(*runCounts).pooled.Load()
}

// keepFlat makes the keeper of s, when it starts, keep one tmpfs and copy
// for snapshots even where overlays work.
func keepFlat(s *Sandbox) { flat.Store(s.ws.owner, struct{}{}) }
