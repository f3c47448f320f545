//go:build linux

package cgroupdrivers

import (
	"testing"
	"time"

	"github.com/fumehood/sandbox/bench/cgroupdrivers/driver"
)

// TestUsage checks that each driver's group limits and counts what the
// comparison says it does, so that the benchmarks compare drivers doing
// the same work: a shell placed in the group forks past a pids limit of 4,
// burns CPU, and starts a dd that outgrows a 32 MiB memory limit.
// Every driver must report the CPU time, a memory peak, the refused forks
// and the OOM kill.
func TestUsage(t *testing.T) {
	need(t)
	// A shell, so that busybox's (in the VM) will do: it waits on stdin to
	// be placed (v1); a subshell forks three sleeps where the limit admits
	// two beside the shell and itself (a shell gives up at the first refused
	// fork, hence the subshell); the shell burns CPU meanwhile, then dd
	// reads into a 64 MiB buffer, which the OOM killer ends.
	l := driver.Limits{Memory: 32 << 20, CPUQuota: 100000, CPUPeriod: 100000, Pids: 4}
	const script = `read x
(sleep 0.05 & sleep 0.05 & sleep 0.05 & wait) 2>/dev/null
i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done
dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null
exit 0`
	for i, d := range drivers {
		t.Run(d.Name(), func(t *testing.T) {
			t.Cleanup(func() { leftover(name(1000 + i)) })
			u, _, err := lifecycle(d, name(1000+i), l, "/bin/sh", "-c", script)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", u)
			if u.CPU < 10*time.Millisecond {
				t.Errorf("CPU %v, want at least 10ms for the shell's loop", u.CPU)
			}
			if u.MemoryPeak < 16<<20 {
				t.Errorf("memory peak %d, want at least 16 MiB (dd grew to the 32 MiB limit)", u.MemoryPeak)
			}
			if u.PidsMax == 0 {
				t.Errorf("pids max events 0, want the forks past the limit of 4 counted")
			}
			if u.OOMKills == 0 {
				t.Errorf("OOM kills 0, want dd's")
			}
		})
	}
}
