package service

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The server around the runs: validation, the concurrency bound, metrics,
// logs and shutdown.

func TestValidation(t *testing.T) {
	ts := startServer(t, "-egress", "example.com,*.pythonhosted.org:443", "-max-memory", "256M", "-max-timeout", "1m")
	cases := []struct {
		body, field, says string
	}{
		{`{"command":["sh"],"limits":{"memory":"1G"}}`, "limits.memory", "maximum 256M"},
		{`{"command":["sh"],"limits":{"memory":"lots"}}`, "limits.memory", "lots"},
		{`{"command":["sh"],"limits":{"memory":"1M"}}`, "limits.memory", "at least 16M"},
		{`{"command":["sh"],"limits":{"memory":true}}`, "limits.memory", "true"},
		{`{"command":["sh"],"limits":{"timeout":"2m"}}`, "limits.timeout", "maximum 1m0s"},
		{`{"command":["sh"],"limits":{"timeout":-1}}`, "limits.timeout", "more than 0"},
		{`{"command":["sh"],"limits":{"cpus":2}}`, "limits.cpus", "maximum 1"},
		{`{"command":["sh"],"limits":{"pids":100000}}`, "limits.pids", "maximum 256"},
		{`{"command":["sh"],"limits":{"pids":"many"}}`, "limits.pids", "number"},
		{`{"command":["sh"],"limits":{"output":"2M"}}`, "limits.output", "maximum 1M"},
		{`{"command":["sh"],"colour":"red"}`, "colour", "unknown field"},
		{`{"command":["sh"],"limits":{"swap":"1G"}}`, "swap", "unknown field"},
		{`{"command":"sh"}`, "command", "array"},
		{`{}`, "command", "missing"},
		{`{"command":["","x"]}`, "command[0]", "non-empty"},
		{`{"code":"echo hi"}`, "language", "missing"},
		{`{"code":"echo hi","language":"cobol"}`, "language", "cobol"},
		{`{"language":"sh"}`, "code", "missing"},
		{`{"command":["sh"],"code":"echo","language":"sh"}`, "command", "not both"},
		{`{"command":["sh"],"env":{"A=B":"c"}}`, "env", "A=B"},
		{`{"command":["sh"],"network":"host"}`, "network", "host"},
		{`{"command":["sh"],"network":"allow"}`, "egress", "missing"},
		{`{"command":["sh"],"network":"allow","egress":["evil.example.org"]}`, "egress[0]", "-egress list"},
		{`{"command":["sh"],"network":"allow","egress":["example.com","pypi.org"]}`, "egress[1]", "pypi.org"},
		{`{"command":["sh"],"egress":["example.com"]}`, "egress", "allow"},
		{`command=sh`, "body", "JSON"},
		{`{"command":["sh"]} {"command":["sh"]}`, "body", "more than one"},
	}
	for _, c := range cases {
		resp, a := ts.post(t, c.body)
		if resp.StatusCode != http.StatusBadRequest || a.Field != c.field || !strings.Contains(a.Error, c.says) {
			t.Errorf("POST %s: %s %+v, want 400 with field %s saying %q", c.body, resp.Status, a, c.field, c.says)
		}
	}
	refused := len(cases)

	resp, a := ts.post(t, `{"command":["sh"],"stdin":"`+strings.Repeat("x", maxBody)+`"}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || a.Field != "body" {
		t.Errorf("a body too large: %s %+v, want 413 naming the body", resp.Status, a)
	}
	resp, a = ts.do(t, http.MethodPut, "application/json", `{"command":["true"]}`)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || a.Error == "" {
		t.Errorf("PUT: %s %+v, want 405, Allow: POST", resp.Status, a)
	}
	resp, a = ts.do(t, http.MethodPost, "text/plain", `{"command":["true"]}`)
	if resp.StatusCode != http.StatusUnsupportedMediaType || a.Field != "Content-Type" {
		t.Errorf("text/plain: %s %+v, want 415 naming Content-Type", resp.Status, a)
	}
	refused += 3

	// What is within the maxima runs.
	if a := ts.run(t, `{"command":["true"],"network":"allow","egress":["example.com"],"limits":{"memory":"256M","timeout":60,"cpus":0.5,"pids":10,"output":"1M"}}`); !a.success() {
		t.Errorf("a request within the maxima: %+v", a)
	}
	m := ts.metrics(t)
	if got := m[`sandbox_serve_rejected_total{reason="invalid"}`]; got != float64(refused) {
		t.Errorf("rejected as invalid: %v, want %d", got, refused)
	}
	if got := m[`sandbox_serve_runs_total{cause="exited"}`]; got != 1 {
		t.Errorf("runs: %v, want 1", got)
	}
}

// TestConcurrencyLimit: with one slot and a queue of one, a third request
// gets 429; the client of the running one going away cancels it, and the
// queued one runs.
func TestConcurrencyLimit(t *testing.T) {
	ts := startServer(t, "-max-concurrent", "1", "-max-queue", "1")
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	first := ts.stream(t, ctx, `{"command":["sh","-c","echo running; sleep 1000"]}`)
	if l := first.next(t); l.Data != "running\n" {
		t.Fatalf("first line %+v", l)
	}
	queued := ts.postAsync(t, `{"command":["echo","queued"]}`)
	ts.waitMetric(t, "sandbox_serve_runs_queued", 1)

	resp, a := ts.post(t, `{"command":["echo","third"]}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || a.Error == "" {
		t.Errorf("with the slot and the queue full: %s Retry-After %q %+v, want 429 with Retry-After and an error",
			resp.Status, resp.Header.Get("Retry-After"), a)
	}

	leave()
	if a := <-queued; !a.success() || a.Stdout != "queued\n" {
		t.Errorf("the queued request: %+v, want it run once the first one's client left", a)
	}
	m := ts.metrics(t)
	for series, want := range map[string]float64{
		`sandbox_serve_rejected_total{reason="full"}`: 1,
		`sandbox_serve_runs_total{cause="canceled"}`:  1,
		`sandbox_serve_runs_total{cause="exited"}`:    1,
		"sandbox_serve_runs_in_flight":                0,
		"sandbox_serve_runs_queued":                   0,
	} {
		if m[series] != want {
			t.Errorf("%s %v, want %v", series, m[series], want)
		}
	}
}

// TestMetricsMatchRuns: the counters, the histogram and the log count the
// runs made, one log event per run.
func TestMetricsMatchRuns(t *testing.T) {
	ts := startServer(t)
	causes := map[string]string{} // by run id
	for _, body := range []string{
		`{"command":["true"]}`,
		`{"command":["sh","-c","exit 3"]}`,
		// Long enough for the sandbox to start on a loaded host: a
		// timeout that ends the start fails the request instead.
		`{"command":["sleep","1000"],"limits":{"timeout":"3s"}}`,
	} {
		a := ts.run(t, body)
		causes[a.ID] = a.Cause
	}
	resp, bad := ts.post(t, `{"command":[]}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an empty command: %s", resp.Status)
	}

	m := ts.metrics(t)
	want := map[string]float64{
		`sandbox_serve_runs_total{cause="exited"}`:             2,
		`sandbox_serve_runs_total{cause="timeout"}`:            1,
		`sandbox_serve_runs_total{cause="signaled"}`:           0,
		`sandbox_serve_runs_total{cause="canceled"}`:           0,
		`sandbox_serve_runs_total{cause="out_of_memory"}`:      0,
		`sandbox_serve_runs_total{cause="seccomp_kill"}`:       0,
		`sandbox_serve_runs_total{cause="error"}`:              0,
		"sandbox_serve_run_duration_seconds_count":             3,
		`sandbox_serve_run_duration_seconds_bucket{le="+Inf"}`: 3,
		"sandbox_serve_runs_in_flight":                         0,
		"sandbox_serve_runs_queued":                            0,
		`sandbox_serve_rejected_total{reason="invalid"}`:       1,
		`sandbox_serve_rejected_total{reason="full"}`:          0,
		`sandbox_serve_rejected_total{reason="shutting_down"}`: 0,
	}
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present: %t), want %v", series, got, ok, v)
		}
	}
	if m["sandbox_serve_run_duration_seconds_sum"] < 1 {
		t.Errorf("duration sum %v, want at least the 1s timeout", m["sandbox_serve_run_duration_seconds_sum"])
	}
	// Buckets are cumulative: each counts at least what the one below it does.
	prev := 0.0
	for _, le := range durationBuckets {
		got := m[fmt.Sprintf("sandbox_serve_run_duration_seconds_bucket{le=%q}", fmt.Sprint(le))]
		if got < prev || got > 3 {
			t.Errorf("bucket le=%v: %v after %v", le, got, prev)
		}
		prev = got
	}

	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	runs := ts.events("run")
	if len(runs) != len(causes) {
		t.Errorf("%d run events, want one per run (%d):\n%s", len(runs), len(causes), ts.logText())
	}
	for _, ev := range runs {
		id, _ := ev["id"].(string)
		if cause, ok := causes[id]; !ok || ev["cause"] != cause || ev["duration"] == nil || ev["usage"] == nil {
			t.Errorf("run event %v: want one of the runs %v, with its cause, duration and usage", ev, causes)
		}
		delete(causes, id)
	}
	if rej := ts.events("rejected"); len(rej) != 1 || rej[0]["id"] != bad.ID || rej[0]["field"] != "command" {
		t.Errorf("rejected events %v, want one for %s naming command", rej, bad.ID)
	}
}

// TestShutdownLeavesNothing: SIGTERM with runs in flight, each of which
// started a double-forked daemon that ignores signals, and one request in
// the queue. The runs are answered as canceled, the queued request is
// turned away, the server exits 0, and nothing of theirs is left.
func TestShutdownLeavesNothing(t *testing.T) {
	ts := startServer(t, "-max-concurrent", "2", "-max-queue", "1")
	daemon := func(token string) string {
		return `(trap '' TERM INT HUP; sleep 1000 ` + token + ` &); echo started; sleep 1000`
	}
	streamed, answered := newToken(), newToken()
	s := ts.stream(t, context.Background(), `{"command":["sh","-c","`+daemon(streamed)+`"]}`)
	if l := s.next(t); l.Data != "started\n" {
		t.Fatalf("first line %+v", l)
	}
	inJSON := ts.postAsync(t, `{"command":["sh","-c","`+daemon(answered)+`"]}`)
	waitToken(t, streamed)
	waitToken(t, answered)
	ts.waitMetric(t, "sandbox_serve_runs_in_flight", 2)
	queued := ts.postAsync(t, `{"command":["true"]}`)
	ts.waitMetric(t, "sandbox_serve_runs_queued", 1)

	procs := tree(ts.cmd.Process.Pid)
	if noCgroup == "" && len(runCgroups(procs)) < 2 {
		t.Fatalf("the runs' cgroups are not where the test looks for them: %q", runCgroups(procs))
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}

	_, _, res := s.rest(t)
	if res.Cause != "canceled" || !strings.Contains(res.Error, "shutting down") {
		t.Errorf("the streamed run: %+v, want canceled by the shutdown", res.short())
	}
	if a := <-inJSON; a.Cause != "canceled" || !strings.Contains(a.Error, "shutting down") {
		t.Errorf("the run in JSON mode: %+v, want canceled by the shutdown", a.short())
	}
	if a := <-queued; a.status != http.StatusServiceUnavailable || !strings.Contains(a.Error, "shutting down") {
		t.Errorf("the queued request: %d %+v, want 503", a.status, a)
	}
	// The library kills every process of a run before Run returns, and
	// the server answers after that: nothing may be left now.
	for _, token := range []string{streamed, answered} {
		if pids := withToken(token); len(pids) > 0 {
			t.Errorf("daemon %s still runs after the server exited: pids %v", token, pids)
		}
	}
	assertGone(t, procs)
	if len(ts.events("stopped")) != 1 {
		t.Errorf("no stopped event in the log:\n%s", ts.logText())
	}
}
