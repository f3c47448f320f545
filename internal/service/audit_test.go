package service

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAuditFlag: -audit appends the trail of every sandbox to a file as
// JSON lines: a request's run is there from its start to its end, with
// its refused syscall, after what the file held.
func TestAuditFlag(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(trail, []byte(`{"msg":"earlier"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, "-audit", trail)
	a := ts.run(t, `{"command":["sh","-c","setarch -R true; echo audited"]}`)
	if !a.success() || a.Stdout != "audited\n" {
		t.Fatalf("answer %+v", a)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	var events []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("a line of the trail is not JSON: %v: %s", err, sc.Bytes())
		}
		events = append(events, ev)
	}
	if len(events) == 0 || events[0]["msg"] != "earlier" {
		t.Fatalf("the trail does not start with what the file held:\n%s", b)
	}
	// The request's run: its start, then its events, then its end.
	var run []string
	var id any
	for _, ev := range events {
		if argv, _ := ev["argv"].([]any); len(argv) == 3 && argv[2] == "setarch -R true; echo audited" {
			id = ev["run"]
		}
		if id != nil && ev["run"] == id {
			run = append(run, ev["msg"].(string))
			if ev["msg"] == "run end" && (ev["outcome"] != "exited" || ev["exit_code"] != 0.0) {
				t.Errorf("run end %v", ev)
			}
		}
	}
	if len(run) < 3 || run[0] != "run start" || run[len(run)-1] != "run end" || !slices.Contains(run, "denial") {
		t.Errorf("the request's run in the trail: %q, want its start, a denial, its end:\n%s", run, b)
	}
}
