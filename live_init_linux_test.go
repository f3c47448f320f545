package sandbox

import (
	"strconv"
	"strings"
	"testing"
)

// TestLiveInitLastOOMChoice: every process a call starts in a live
// sandbox, and what it starts, has an oom_score_adj above its init's, so
// that the OOM killer takes them first at the memory limit, and a memory
// hog in the background is killed while the sandbox lives on.
func TestLiveInitLastOOMChoice(t *testing.T) {
	s, _ := liveTest(t, Options{})
	out := strings.Fields(runOK(t, s, "cat /proc/1/oom_score_adj /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"))
	if len(out) != 3 {
		t.Fatalf("oom_score_adj of the init, a call and its child: %q", out)
	}
	init, _ := strconv.Atoi(out[0])
	for _, v := range out[1:] {
		if n, _ := strconv.Atoi(v); n <= init || n != 1000 {
			t.Errorf("oom_score_adj of a call's process %s, the init's %d; want 1000, above the init's", v, init)
		}
	}
}
