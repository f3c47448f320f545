package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLiveKeepsProcessesAndFiles: the calls of a live Sandbox share one
// running sandbox: a background process started by one call runs on after
// it, and the next call sees it, its pid namespace and its /tmp.
func TestLiveKeepsProcessesAndFiles(t *testing.T) {
	requireSandbox(t)
	marker := fmt.Sprintf("sbxtest-live-%d", time.Now().UnixNano())
	s := newTest(t, Options{Live: true, Env: []string{"MARK=" + marker}})
	ctx := context.Background()
	res, err := s.Run(ctx, Command("sh", "-c", "echo kept > /tmp/f; sleep 1000 >/dev/null 2>&1 & echo $! > /tmp/bg; echo $$"))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("first call: %v %+v", err, res)
	}
	first := strings.TrimSpace(string(res.Stdout))
	if first == "1" {
		t.Errorf("the first call's shell is pid 1 of its sandbox; it should have entered a live one")
	}
	res, err = s.Run(ctx, Command("sh", "-c", "cat /tmp/f; kill -0 $(cat /tmp/bg) && echo alive; echo $$"))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("second call: %v %+v stderr %q", err, res, res.Stderr)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "kept\n") || !strings.Contains(out, "alive\n") {
		t.Errorf("second call saw %q; want the first call's /tmp file and its background process alive", out)
	}
	if len(ownProcesses(marker)) == 0 {
		t.Errorf("no process of the live sandbox on the host between calls")
	}
	s.Close()
	requireNothingLeft(t, marker)
	if _, err := s.Run(ctx, Command("true")); err == nil {
		t.Errorf("a call after Close succeeded")
	}
	_ = time.Second
}
