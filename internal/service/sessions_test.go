package service

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// Sessions: live sandboxes kept across requests, seen from the client,
// from inside the sandbox, and from the host.

// reply is an answer to a session request, its body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the reply's body into v, failing the test if it cannot.
func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", r.status, err, r.body)
	}
}

func (r reply) String() string { return fmt.Sprintf("%d %.500s", r.status, r.body) }

// call sends a request to the server and reads its answer. A body that
// starts with '{' goes as JSON, any other as bytes.
func (ts *testServer) call(t *testing.T, method, path string, body []byte) reply {
	t.Helper()
	return ts.callAs(t, "", method, path, body)
}

// callAs is call with key, if not empty, as the request's bearer API key.
func (ts *testServer) callAs(t *testing.T, key, method, path string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if bytes.HasPrefix(body, []byte("{")) {
		req.Header.Set("Content-Type", "application/json")
	} else if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// sessionAnswer is what the server says about a session.
type sessionAnswer struct {
	ID      string `json:"id"`
	Replica string `json:"replica"`
	Error   string `json:"error"`
	Field   string `json:"field"`
}

// newSession creates a session with body and returns its id.
func (ts *testServer) newSession(t *testing.T, body string) string {
	t.Helper()
	r := ts.call(t, "POST", "/v1/sessions", []byte(body))
	var s sessionAnswer
	r.json(t, &s)
	if r.status != http.StatusCreated || s.ID == "" || r.header.Get("Location") != "/v1/sessions/"+s.ID {
		t.Fatalf("POST /v1/sessions %s: %v, want 201 with an id and its Location", body, r)
	}
	return s.ID
}

// runIn runs body in the session and wants a run's answer.
func (ts *testServer) runIn(t *testing.T, id, body string) *answer {
	t.Helper()
	r := ts.call(t, "POST", "/v1/sessions/"+id+"/runs", []byte(body))
	var a answer
	r.json(t, &a)
	if r.status != http.StatusOK || a.Outcome == "" {
		t.Fatalf("run %s in session %s: %v, want 200 and a result", body, id, r)
	}
	return &a
}

// hostState is what the server has on the host at one moment: its
// processes and the run cgroups they made.
type hostState struct {
	procs   []proc
	cgroups []string
}

func (ts *testServer) hostState() hostState {
	procs := tree(ts.cmd.Process.Pid)
	return hostState{procs: procs, cgroups: runCgroups(procs)}
}

// madeSince lists the processes and run cgroups of the server that were
// not there in before: what it made since.
func madeSince(ts *testServer, before hostState) (procs []proc, cgroups []string) {
	now := ts.hostState()
	for _, p := range now.procs {
		if !slices.Contains(before.procs, p) {
			procs = append(procs, p)
		}
	}
	for _, c := range now.cgroups {
		if !slices.Contains(before.cgroups, c) {
			cgroups = append(cgroups, c)
		}
	}
	return procs, cgroups
}

// assertNothingSince waits until nothing the server made since before is
// left, and fails the test if that does not happen.
func assertNothingSince(t *testing.T, ts *testServer, before hostState, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		procs, cgroups := madeSince(ts, before)
		if len(procs) == 0 && len(cgroups) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: left behind: processes %+v, cgroups %q", what, procs, cgroups)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionKeepsProcesses: a process started in the background by one
// run is alive at the next, seen from inside and from the host; DELETE
// ends it, and when its answer comes nothing of the session is left.
func TestSessionKeepsProcesses(t *testing.T) {
	ts := startServer(t)
	before := ts.hostState()
	id := ts.newSession(t, `{"limits":{"memory":"128M"}}`)
	token := newToken()
	if a := ts.runIn(t, id, `{"command":["sh","-c","(sleep 1000 `+token+` &); echo started"]}`); !a.success() || a.Stdout != "started\n" {
		t.Fatalf("the first run: %+v", a.short())
	}
	host := waitToken(t, token)
	// From inside: the next run sees the sleep among the sandbox's processes.
	a := ts.runIn(t, id, `{"command":["sh","-c","cat /proc/[0-9]*/cmdline | tr '\\0' ' '"]}`)
	if !a.success() || !strings.Contains(a.Stdout, "sleep 1000 "+token) {
		t.Errorf("the second run does not see the first one's sleep among the session's processes: %+v", a.short())
	}
	if procs, cgroups := madeSince(ts, before); len(procs) == 0 || (noCgroup == "" && len(cgroups) == 0) {
		t.Fatalf("the session's processes %v and cgroups %q are not where the test looks for them", procs, cgroups)
	}

	if r := ts.call(t, "DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %v, want 204", r)
	}
	if left := withToken(token); len(left) > 0 {
		t.Errorf("the background sleep (host pids %v, then %v) still runs after DELETE answered", host, left)
	}
	assertNothingSince(t, ts, before, "after DELETE")
	r := ts.call(t, "GET", "/v1/sessions/"+id, nil)
	var s sessionAnswer
	r.json(t, &s)
	if r.status != http.StatusNotFound || s.Field != "id" || !strings.Contains(s.Error, "deleted") {
		t.Errorf("GET a deleted session: %v, want 404 saying it was deleted", r)
	}
}

// TestSessionFiles: files put are what the session's programs read, files
// they write come back, as single files, listings and tars.
func TestSessionFiles(t *testing.T) {
	ts := startServer(t)
	id := ts.newSession(t, `{}`)
	base := "/v1/sessions/" + id
	data := []byte("line one\n\x00\xff binary too\n")
	if r := ts.call(t, "PUT", base+"/files?path="+url.QueryEscape("src/in.bin"), data); r.status != http.StatusNoContent {
		t.Fatalf("PUT a file: %v", r)
	}
	a := ts.runIn(t, id, `{"command":["sh","-c","od -An -c src/in.bin | head -c 20; mkdir -p out && printf made > out/made.txt && ln -s made.txt out/link"]}`)
	if !a.success() || !strings.Contains(a.Stdout, "l   i   n   e") {
		t.Errorf("the program reading the file put: %+v", a.short())
	}
	if r := ts.call(t, "GET", base+"/files?path="+url.QueryEscape("src/in.bin"), nil); r.status != http.StatusOK || !bytes.Equal(r.body, data) {
		t.Errorf("GET the file put: %v, want its bytes back", r)
	}
	if r := ts.call(t, "GET", base+"/files?path="+url.QueryEscape("out/made.txt"), nil); r.status != http.StatusOK || string(r.body) != "made" {
		t.Errorf("GET the file the program made: %v", r)
	}

	var dir struct {
		Entries []struct{ Name, Type, Target string }
	}
	r := ts.call(t, "GET", base+"/dir?path=out", nil)
	r.json(t, &dir)
	if r.status != http.StatusOK || len(dir.Entries) != 2 || dir.Entries[0].Name != "link" || dir.Entries[0].Type != "symlink" ||
		dir.Entries[0].Target != "made.txt" || dir.Entries[1].Name != "made.txt" || dir.Entries[1].Type != "file" {
		t.Errorf("GET dir out: %v, want the link and the file", r)
	}

	r = ts.call(t, "GET", base+"/tar", nil)
	var names []string
	tr := tar.NewReader(bytes.NewReader(r.body))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/"))
	}
	for _, want := range []string{"src/in.bin", "out/made.txt", "out/link"} {
		if !slices.Contains(names, want) {
			t.Errorf("the tar of the workspace holds %q, not %s", names, want)
		}
	}
	if r := ts.call(t, "PUT", base+"/tar?path=copy", r.body); r.status != http.StatusNoContent {
		t.Fatalf("PUT the tar: %v", r)
	}
	if a := ts.runIn(t, id, `{"command":["cat","copy/out/made.txt"]}`); a.Stdout != "made" {
		t.Errorf("the tar extracted, read from inside: %+v", a.short())
	}

	for _, c := range []struct {
		method, path string
		status       int
		field        string
	}{
		{"GET", base + "/files?path=nothing", 404, "path"},
		{"GET", base + "/files", 400, "path"},
		{"GET", base + "/files?path=" + url.QueryEscape("../../etc/passwd"), 400, "path"},
		{"GET", base + "/files?path=out", 400, "path"},
		{"GET", "/v1/sessions/" + strings.Split(id, ".")[0] + ".NOSUCHSESSION/files?path=a", 404, "id"},
	} {
		r := ts.call(t, c.method, c.path, nil)
		var e sessionAnswer
		r.json(t, &e)
		if r.status != c.status || e.Field != c.field || e.Error == "" {
			t.Errorf("%s %s: %v, want %d naming %s", c.method, c.path, r, c.status, c.field)
		}
	}
}

// TestSessionSnapshots: a snapshot restored brings back the files it
// held; reset empties the workspace; both end the session's processes.
func TestSessionSnapshots(t *testing.T) {
	ts := startServer(t)
	id := ts.newSession(t, `{}`)
	base := "/v1/sessions/" + id
	ts.runIn(t, id, `{"command":["sh","-c","echo v1 > f"]}`)
	r := ts.call(t, "POST", base+"/snapshots", nil)
	var snap struct{ Snapshot string }
	r.json(t, &snap)
	if r.status != http.StatusCreated || snap.Snapshot == "" {
		t.Fatalf("POST a snapshot: %v", r)
	}
	token := newToken()
	ts.runIn(t, id, `{"command":["sh","-c","echo v2 > f; (sleep 1000 `+token+` &)"]}`)
	waitToken(t, token)
	if r := ts.call(t, "POST", base+"/restore", []byte(`{"snapshot":"`+snap.Snapshot+`"}`)); r.status != http.StatusNoContent {
		t.Fatalf("restore: %v", r)
	}
	if left := withToken(token); len(left) > 0 {
		t.Errorf("a background process still runs after restore: host pids %v", left)
	}
	if a := ts.runIn(t, id, `{"command":["cat","f"]}`); a.Stdout != "v1\n" {
		t.Errorf("after restore: %+v, want the snapshot's v1", a.short())
	}
	if r := ts.call(t, "POST", base+"/reset", nil); r.status != http.StatusNoContent {
		t.Fatalf("reset: %v", r)
	}
	if a := ts.runIn(t, id, `{"command":["ls","-A"]}`); !a.success() || a.Stdout != "" {
		t.Errorf("after reset: %+v, want an empty workspace", a.short())
	}
	if r := ts.call(t, "POST", base+"/restore", []byte(`{"snapshot":"99"}`)); r.status != http.StatusNotFound || !strings.Contains(string(r.body), `"snapshot"`) {
		t.Errorf("restore of no snapshot: %v, want 404 naming snapshot", r)
	}
	if r := ts.call(t, "DELETE", base+"/snapshots/"+snap.Snapshot, nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE the snapshot: %v", r)
	}
}

// TestSessionRunRefusesSandboxFields: a run in a session cannot change
// the session's limits or network; the refusal names the field.
func TestSessionRunRefusesSandboxFields(t *testing.T) {
	ts := startServer(t)
	id := ts.newSession(t, `{}`)
	for _, c := range []struct{ body, field string }{
		{`{"command":["true"],"limits":{"memory":"64M"}}`, "limits.memory"},
		{`{"command":["true"],"limits":{"pids":5}}`, "limits.pids"},
		{`{"command":["true"],"network":"none"}`, "network"},
		{`{"command":["true"],"seccomp_kill":true}`, "seccomp_kill"},
	} {
		r := ts.call(t, "POST", "/v1/sessions/"+id+"/runs", []byte(c.body))
		var e sessionAnswer
		r.json(t, &e)
		if r.status != http.StatusBadRequest || e.Field != c.field || !strings.Contains(e.Error, "POST /v1/sessions") {
			t.Errorf("%s: %v, want 400 naming %s and where to give it", c.body, r, c.field)
		}
	}
	for _, c := range []struct{ body, field string }{
		{`{"idle_timeout":"2h"}`, "idle_timeout"},
		{`{"max_lifetime":0.5}`, "max_lifetime"},
		{`{"limits":{"timeout":"5s"}}`, "limits.timeout"},
		{`{"limits":{"memory":"100G"}}`, "limits.memory"},
	} {
		r := ts.call(t, "POST", "/v1/sessions", []byte(c.body))
		var e sessionAnswer
		r.json(t, &e)
		if r.status != http.StatusBadRequest || e.Field != c.field {
			t.Errorf("POST /v1/sessions %s: %v, want 400 naming %s", c.body, r, c.field)
		}
	}
}

// TestMaxSessions: past -max-sessions, creating one gets 429 with
// Retry-After and the error body of every 429; deleting one makes room.
func TestMaxSessions(t *testing.T) {
	ts := startServer(t, "-max-sessions", "1")
	id := ts.newSession(t, `{}`)
	r := ts.call(t, "POST", "/v1/sessions", []byte(`{}`))
	var e answer
	r.json(t, &e)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || e.ID == "" || !strings.Contains(e.Error, "-max-sessions") {
		t.Fatalf("a second session past -max-sessions 1: %v, want 429 with Retry-After, an id and an error naming the bound", r)
	}
	var body map[string]any
	r.json(t, &body)
	for k := range body {
		if k != "id" && k != "error" {
			t.Errorf("the 429's body has %q: want only what a run's 429 has (id, error)", k)
		}
	}
	if r := ts.call(t, "DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %v", r)
	}
	ts.newSession(t, `{}`)
	off := startServer(t, "-max-sessions", "0")
	if r := off.call(t, "POST", "/v1/sessions", []byte(`{}`)); r.status != http.StatusNotImplemented || !strings.Contains(string(r.body), "-max-sessions=0") {
		t.Errorf("a session from a server with -max-sessions=0: %v, want 501 saying so", r)
	}
	if m := ts.metrics(t); m["sandbox_serve_sessions"] != 1 || m["sandbox_serve_sessions_created_total"] != 2 || m["sandbox_serve_sessions_ended_total"] != 1 {
		t.Errorf("session metrics: live %v, created %v, ended %v; want 1, 2, 1", m["sandbox_serve_sessions"], m["sandbox_serve_sessions_created_total"], m["sandbox_serve_sessions_ended_total"])
	}
}

// TestSessionExpiry: a session idle for its idle_timeout ends, and so does
// one at its max_lifetime, whatever runs in it; nothing of either is left,
// and requests for them get 404 saying why.
func TestSessionExpiry(t *testing.T) {
	ts := startServer(t)
	before := ts.hostState()
	idle := ts.newSession(t, `{"idle_timeout":"2s"}`)
	old := ts.newSession(t, `{"max_lifetime":4}`)
	idleToken, oldToken := newToken(), newToken()
	ts.runIn(t, idle, `{"command":["sh","-c","(sleep 1000 `+idleToken+` &)"]}`)
	waitToken(t, idleToken)
	ts.runIn(t, old, `{"command":["sh","-c","(sleep 1000 `+oldToken+` &)"]}`)
	waitToken(t, oldToken)
	// Kept busy with requests, the second one still ends at its lifetime;
	// the first one's end is watched from the host, since a request in it
	// would keep it alive.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				http.Get(ts.url + "/v1/sessions/" + old)
			}
		}
	}()
	for _, c := range []struct{ id, token, why string }{{idle, idleToken, "idle_timeout"}, {old, oldToken, "max_lifetime"}} {
		deadline := time.Now().Add(wait)
		for len(withToken(c.token)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("session %s did not end at its %s: its background sleep still runs", c.id, c.why)
			}
			time.Sleep(50 * time.Millisecond)
		}
		r := ts.call(t, "GET", "/v1/sessions/"+c.id, nil)
		if r.status != http.StatusNotFound || !strings.Contains(string(r.body), c.why) {
			t.Errorf("GET a session ended at its %s: %v, want 404 saying so", c.why, r)
		}
	}
	assertNothingSince(t, ts, before, "after expiry")
}

// TestSessionBackground: a background process started through the API
// serves HTTP through the port proxy, is listed, its output is kept
// bounded, and a signal ends it.
func TestSessionBackground(t *testing.T) {
	ts := startServer(t)
	id := ts.newSession(t, `{}`)
	base := "/v1/sessions/" + id
	if r := ts.call(t, "PUT", base+"/files?path=page.html", []byte("<p>from the session</p>")); r.status != http.StatusNoContent {
		t.Fatalf("PUT: %v", r)
	}
	r := ts.call(t, "POST", base+"/processes", []byte(`{"command":["python3","-m","http.server","8000","--bind","127.0.0.1"]}`))
	var srv struct {
		Pid     int
		Running bool
	}
	r.json(t, &srv)
	if r.status != http.StatusCreated || srv.Pid < 1 || !srv.Running {
		t.Fatalf("start python3 -m http.server: %v", r)
	}
	deadline := time.Now().Add(wait)
	for {
		r = ts.call(t, "GET", base+"/ports/8000/page.html?x=1", nil)
		if r.status != http.StatusBadGateway || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.status != http.StatusOK || string(r.body) != "<p>from the session</p>" {
		t.Errorf("GET page.html through the port proxy: %v", r)
	}
	if r := ts.call(t, "GET", base+"/ports/8001/", nil); r.status != http.StatusBadGateway || !strings.Contains(string(r.body), `"port"`) {
		t.Errorf("a port nothing listens on: %v, want 502 naming port", r)
	}

	flood := ts.call(t, "POST", base+"/processes", []byte(`{"command":["sh","-c","head -c 200000 /dev/zero | tr '\\0' x; echo; echo END"]}`))
	var fl struct{ Pid int }
	flood.json(t, &fl)
	if flood.status != http.StatusCreated {
		t.Fatalf("start the flood: %v", flood)
	}

	var list struct {
		Processes []struct {
			Pid  int
			Args []string
		}
		Background []struct {
			Pid int
		}
	}
	r = ts.call(t, "GET", base+"/processes", nil)
	r.json(t, &list)
	if !slices.ContainsFunc(list.Processes, func(p struct {
		Pid  int
		Args []string
	}) bool {
		return p.Pid == srv.Pid && slices.Contains(p.Args, "http.server")
	}) || len(list.Background) != 2 {
		t.Errorf("GET processes: %v, want the server among them and two background processes", r)
	}

	var out struct {
		Running         bool
		Stdout          string
		StdoutTruncated bool `json:"stdout_truncated"`
		Result          *answer
	}
	deadline = time.Now().Add(wait)
	for {
		r = ts.call(t, "GET", fmt.Sprintf("%s/processes/%d", base, fl.Pid), nil)
		r.json(t, &out)
		if !out.Running || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out.Running || len(out.Stdout) != backgroundOutput || !strings.HasSuffix(out.Stdout, "\nEND\n") || !out.StdoutTruncated ||
		out.Result == nil || !out.Result.success() {
		t.Errorf("the flood: running %t, %d bytes kept ending %q, truncated %t, result %+v; want it ended, its last %d bytes kept",
			out.Running, len(out.Stdout), out.Stdout[max(0, len(out.Stdout)-10):], out.StdoutTruncated, out.Result, backgroundOutput)
	}

	if r := ts.call(t, "POST", fmt.Sprintf("%s/processes/%d/signal", base, srv.Pid), []byte(`{"signal":"TERM"}`)); r.status != http.StatusNoContent {
		t.Fatalf("signal TERM: %v", r)
	}
	deadline = time.Now().Add(wait)
	for {
		r = ts.call(t, "GET", fmt.Sprintf("%s/processes/%d", base, srv.Pid), nil)
		r.json(t, &out)
		if !out.Running || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out.Running || out.Result == nil || out.Result.Cause != "signaled" {
		t.Errorf("the server after SIGTERM: %v, want it ended by the signal", r)
	}
	if r := ts.call(t, "POST", fmt.Sprintf("%s/processes/%d/signal", base, srv.Pid), []byte(`{"signal":"BOGUS"}`)); r.status != http.StatusBadRequest {
		t.Errorf("signal BOGUS: %v, want 400", r)
	}
}

// TestShutdownEndsSessions: SIGTERM ends every session, a request in one
// and its background processes included; the server exits 0 and nothing
// of the sessions is left.
func TestShutdownEndsSessions(t *testing.T) {
	ts := startServer(t)
	idle, busy := ts.newSession(t, `{}`), ts.newSession(t, `{}`)
	idleToken, busyToken := newToken(), newToken()
	ts.runIn(t, idle, `{"command":["sh","-c","(trap '' TERM INT HUP; sleep 1000 `+idleToken+` &)"]}`)
	r := ts.call(t, "POST", "/v1/sessions/"+busy+"/processes", []byte(`{"command":["sleep","1000","`+busyToken+`"]}`))
	if r.status != http.StatusCreated {
		t.Fatalf("start a background sleep: %v", r)
	}
	waitToken(t, idleToken)
	waitToken(t, busyToken)
	req, _ := http.NewRequest("POST", ts.url+"/v1/sessions/"+busy+"/runs", strings.NewReader(`{"command":["sh","-c","echo started; sleep 1000"],"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	st := &stream{resp: resp, dec: json.NewDecoder(resp.Body)}
	if l := st.next(t); l.Data != "started\n" {
		t.Fatalf("the run in a session: first line %+v", l)
	}
	procs := tree(ts.cmd.Process.Pid)

	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	if _, _, a := st.rest(t); a.Cause != "canceled" || !strings.Contains(a.Error, "shutting down") {
		t.Errorf("the run in a session at shutdown: %+v, want canceled by the shutdown", a.short())
	}
	for _, token := range []string{idleToken, busyToken} {
		if pids := withToken(token); len(pids) > 0 {
			t.Errorf("a session's sleep %s still runs after the server exited: pids %v", token, pids)
		}
	}
	assertGone(t, procs)
	if n := len(ts.events("session ended")); n != 2 {
		t.Errorf("%d session ended events, want 2:\n%s", n, ts.logText())
	}
}
