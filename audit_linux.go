//go:build linux

package sandbox

import (
	"time"

	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
)

// auditFacts takes from a run's Exit what its audit reports besides the
// Result: the refusals the supervisor listed (Spec.SeccompEvents).
func auditFacts(exit wire.Exit) runFacts {
	var f runFacts
	for _, d := range exit.DenialEvents {
		f.denials = append(f.denials, denialEvent{syscall: seccomp.Name(uint32(d[0])), errno: int(d[1]), pid: int(d[2]), at: time.Unix(0, d[3])})
	}
	return f
}
