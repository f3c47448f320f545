package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox/internal/report"
)

// TestRepliesFit: the caller reads each of the spawner's replies into
// MaxReply bytes. An Exit at its bounds (450 distinct syscalls refused, of
// long names, each with one of the longest errno names) fits, and so do
// events up to EventsPerReply by their Size, whatever bytes the program
// put in their paths.
func TestRepliesFit(t *testing.T) {
	e := Exit{Status: math.MaxUint32, UserNS: math.MaxInt64, SysNS: math.MaxInt64, MaxRSSKiB: math.MaxInt64,
		CgroupCPUNS: math.MaxInt64, MemoryPeak: math.MaxInt64, OOMKills: math.MaxUint64, PidsMax: math.MaxUint64,
		DefaultSignal: 64, Pooled: true, Violation: strings.Repeat("v", 24), Execs: math.MaxInt, EventsUnsent: math.MaxInt}
	for range 4 {
		e.Limits = append(e.Limits, report.Limit{Name: "memory", Value: strings.Repeat("9", 40) + " bytes", Enforced: true, By: strings.Repeat("b", 64)})
	}
	for i := range 450 {
		e.Denials = append(e.Denials, report.Denial{Syscall: fmt.Sprintf("syscall_%016d", i), Errno: syscall.EPROTONOSUPPORT, Count: math.MaxInt})
	}
	fits(t, "an Exit at its bounds", Reply{ID: math.MaxUint64, Kind: Exited, Exit: &e})

	ev := Event{Exec: true, Syscall: "execveat", Errno: 4095, Pid: math.MaxInt32, Time: math.MaxInt64,
		Path: strings.Repeat("\x01", MaxEventPath), Dirfd: math.MaxInt32}
	r := Reply{ID: math.MaxUint64, Kind: Events}
	for size := 0; size+ev.Size() <= EventsPerReply; size += ev.Size() {
		r.Events = append(r.Events, ev)
	}
	fits(t, fmt.Sprintf("%d events of escaped paths", len(r.Events)), r)
}

func fits(t *testing.T, what string, r Reply) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxReply {
		t.Errorf("%s: %d bytes, more than the caller reads of a reply (MaxReply, %d)", what, len(b), MaxReply)
	}
}
