package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// More than one replica: a session lives on the replica that created it,
// and a request for it sent to another replica is forwarded there.

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startReplicas starts two servers on loopback that reach each other by
// -peer-url. Each is named by its port, so that one template,
// http://127.0.0.1:{replica}, is every replica's URL, as
// http://{replica}.toolserver-peers:8080 is in a cluster.
func startReplicas(t *testing.T) (a, b *testServer) {
	t.Helper()
	pa, pb := freePort(t), freePort(t)
	start := func(port int) *testServer {
		return startServer(t, "-addr", "127.0.0.1:"+strconv.Itoa(port), "-replica", strconv.Itoa(port), "-peer-url", "http://127.0.0.1:{replica}")
	}
	return start(pa), start(pb)
}

// TestForwardToOwner: a session created on replica A is reached through
// replica B (its description, a run, a stream, files, DELETE), and a
// request for it after A was drained gets 404 saying so.
func TestForwardToOwner(t *testing.T) {
	a, b := startReplicas(t)
	id := a.newSession(t, `{}`)
	owner, _, _ := strings.Cut(id, ".")
	if !strings.HasSuffix(a.url, ":"+owner) {
		t.Fatalf("session id %s does not name replica A (%s)", id, a.url)
	}
	base := "/v1/sessions/" + id

	r := b.call(t, "GET", base, nil)
	var s sessionAnswer
	r.json(t, &s)
	if r.status != http.StatusOK || s.ID != id || s.Replica != owner {
		t.Fatalf("GET the session through B: %v, want A's session", r)
	}
	if r := b.call(t, "PUT", base+"/files?path=note.txt", []byte("through B")); r.status != http.StatusNoContent {
		t.Fatalf("PUT a file through B: %v", r)
	}
	if r := a.call(t, "GET", base+"/files?path=note.txt", nil); string(r.body) != "through B" {
		t.Errorf("the file put through B, read on A: %v", r)
	}
	if got := b.runIn(t, id, `{"command":["cat","note.txt"]}`); got.Stdout != "through B" {
		t.Errorf("a run through B: %+v", got.short())
	}

	// A stream through B comes as it is written: its first line before
	// the run ends, at its timeout.
	req, _ := http.NewRequestWithContext(context.Background(), "POST", b.url+base+"/runs",
		strings.NewReader(`{"command":["sh","-c","echo one; sleep 1000"],"stream":true,"limits":{"timeout":"3s"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	st := &stream{resp: resp, dec: json.NewDecoder(resp.Body)}
	if l := st.next(t); l.Data != "one\n" || l.Result != nil {
		t.Errorf("the stream's first line through B: %+v, want the output before the result", l)
	}
	if out, _, res := st.rest(t); out != "" || res.Cause != "timeout" {
		t.Errorf("the rest of the stream through B: %q %+v, want the run's timeout", out, res.short())
	}
	resp.Body.Close()

	if n := len(a.events("rejected")) + len(b.events("rejected")); n != 0 {
		t.Errorf("%d requests refused on the way", n)
	}

	// A replica drained: its sessions end with it, and B says so.
	other := a.newSession(t, `{}`)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	r = b.call(t, "GET", "/v1/sessions/"+other, nil)
	r.json(t, &s)
	if r.status != http.StatusNotFound || s.Field != "id" || !strings.Contains(s.Error, "drained") || !strings.Contains(s.Error, "create a new session") {
		t.Errorf("a session of a drained replica, through B: %v, want 404 saying it ended with its replica", r)
	}
}

// TestForwardDelete: DELETE through another replica ends the session on
// its owner, and a later request through either gets 404.
func TestForwardDelete(t *testing.T) {
	a, b := startReplicas(t)
	id := a.newSession(t, `{}`)
	if r := b.call(t, "DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE through B: %v", r)
	}
	for _, ts := range []*testServer{a, b} {
		if r := ts.call(t, "GET", "/v1/sessions/"+id, nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "deleted") {
			t.Errorf("GET the deleted session: %v, want 404 saying it was deleted", r)
		}
	}
	if m := a.metrics(t); m["toolserver_sessions"] != 0 || m["toolserver_sessions_ended_total"] != 1 {
		t.Errorf("A's sessions: live %v, ended %v; want 0, 1", m["toolserver_sessions"], m["toolserver_sessions_ended_total"])
	}
}
