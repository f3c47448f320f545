package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestExitFitsAReply: the caller reads each of the spawner's replies into
// MaxReply bytes. An Exit at its bounds, every refusal listed (MaxDenialEvents,
// each number at its widest) over 450 distinct syscalls of long names, is
// smaller, whatever the program did.
func TestExitFitsAReply(t *testing.T) {
	e := Exit{Status: math.MaxUint32, UserNS: math.MaxInt64, SysNS: math.MaxInt64, MaxRSSKiB: math.MaxInt64,
		CgroupCPUNS: math.MaxInt64, MemoryPeak: math.MaxInt64, OOMKills: math.MaxUint64, PidsMax: math.MaxUint64,
		DefaultSignal: 64, Pooled: true, Violation: strings.Repeat("v", 24), DenialEventsDropped: math.MaxInt}
	for range 4 {
		e.Limits = append(e.Limits, Limit{Name: "memory", Value: strings.Repeat("9", 40) + " bytes", Enforced: true, By: strings.Repeat("b", 64)})
	}
	for i := range 450 {
		e.Denials = append(e.Denials, Denial{Syscall: fmt.Sprintf("syscall_%016d", i), Errno: 4095, Count: math.MaxInt})
	}
	for range MaxDenialEvents {
		e.DenialEvents = append(e.DenialEvents, DenialEvent{math.MaxUint32, 4095, math.MaxInt32, math.MaxInt64})
	}
	b, err := json.Marshal(Reply{ID: math.MaxUint64, Kind: Exited, Exit: &e})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxReply {
		t.Errorf("an Exit at its bounds is %d bytes, more than the caller reads of a reply (MaxReply, %d)", len(b), MaxReply)
	}
}
