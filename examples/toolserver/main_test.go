package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fumehood/sandbox"
)

// TestToolserver posts a command to the example's handler and checks that
// it ran in a sandbox: its own hostname and pid 1 namespace, not the host's.
func TestToolserver(t *testing.T) {
	sb := sandbox.New(sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}})
	defer sb.Close()
	if err := sb.Err(); errors.Is(err, sandbox.ErrNotSupported) {
		t.Skipf("this host cannot run sandboxes: %v", err)
	}
	srv := httptest.NewServer(handler(sb))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/run", "text/plain", strings.NewReader(`hostname; echo $$; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got sandbox.Result
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode: %v", resp.StatusCode, err)
	}
	if got.Outcome != sandbox.Exited || got.ExitCode != 3 || string(got.Stdout) != "sandbox\n1\n" || got.WallTime <= 0 || len(got.Limits) == 0 {
		t.Errorf("got %+v, want exit code 3, stdout \"sandbox\\n1\\n\" (the sandbox's hostname and pid), a wall time and the limits", got)
	}
}
