//go:build linux

package sandbox

import (
	"time"

	"github.com/fumehood/sandbox/internal/wire"
)

// events queues what the run's supervisor saw, as it arrives: from the
// spawner's read loop, or the run's own goroutine when it is its own
// launcher. It never waits.
func (ra *runAudit) events(evs []wire.Event) {
	if ra == nil {
		return
	}
	for _, e := range evs {
		at := time.Unix(0, e.Time)
		if e.Exec {
			ra.exec(at, e.Syscall, e.Path, e.Dirfd, e.Pid)
		} else {
			ra.denial(at, e.Syscall, e.Errno, e.Pid)
		}
	}
}

// onEvents is events as a launch.Handle's OnEvents, or nil without a
// trail.
func (ra *runAudit) onEvents() func([]wire.Event) {
	if ra == nil {
		return nil
	}
	return ra.events
}
