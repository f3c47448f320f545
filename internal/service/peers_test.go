package service

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica A's log:\n%s\nreplica B's log:\n%s", a.logText(), b.logText())
		}
	})
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
	if m := a.metrics(t); m["sandbox_serve_sessions"] != 0 || m["sandbox_serve_sessions_ended_total"] != 1 {
		t.Errorf("A's sessions: live %v, ended %v; want 0, 1", m["sandbox_serve_sessions"], m["sandbox_serve_sessions_ended_total"])
	}
}

// TestProxyStreamOutlivesRequestBody: an answer that a backend streams as
// soon as it has read the request's body comes through serveProxy whole,
// though the server would drain and close that body once the answer's
// header goes out, while the proxy's transport still reads it. The
// transport's last read of the body (the one past Content-Length) is held
// until the header has gone out, which is when the race is lost.
func TestProxyStreamOutlivesRequestBody(t *testing.T) {
	second := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, "one\n")
		http.NewResponseController(w).Flush()
		<-second
		io.WriteString(w, "two\n")
	}))
	defer backend.Close()
	// Before Close, which waits for the handler, also when the test
	// stops early.
	sendSecond := sync.OnceFunc(func() { close(second) })
	defer sendSecond()
	target, _ := url.Parse(backend.URL)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		FlushInterval: -1,
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw := &flushSignal{ResponseWriter: w, flushed: make(chan struct{})}
		r.Body = &heldBody{ReadCloser: r.Body, left: r.ContentLength, hold: fw.flushed}
		serveProxy(rp, fw, r)
	}))
	defer front.Close()

	resp, err := http.Post(front.URL, "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	if l, err := lines.ReadString('\n'); l != "one\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	sendSecond()
	if rest, err := io.ReadAll(lines); string(rest) != "two\n" || err != nil {
		t.Errorf("the rest of the answer: %q, %v; want the second line and its end", rest, err)
	}
}

// flushSignal closes flushed at the first Flush of the ResponseWriter it
// wraps, after which the server has written the answer's header.
type flushSignal struct {
	http.ResponseWriter
	once    sync.Once
	flushed chan struct{}
}

func (f *flushSignal) Flush() {
	http.NewResponseController(f.ResponseWriter).Flush()
	f.once.Do(func() { close(f.flushed) })
}

func (f *flushSignal) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// heldBody is a request body whose reads after its first left bytes wait
// for hold.
type heldBody struct {
	io.ReadCloser
	left int64
	hold <-chan struct{}
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		<-b.hold
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), max(b.left, 1))])
	b.left -= int64(n)
	return n, err
}
