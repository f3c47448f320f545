package apitest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEveryOperation walks the whole API as a client would, sending the
// document's request examples (each checked against the document first),
// and checks every answer; at the end, every operation of the document
// must have been answered and checked.
func TestEveryOperation(t *testing.T) {
	sp := mustSpec(t)
	s := startServer(t)
	want := func(resp *http.Response, body []byte, status int, what string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("%s: %s, want %d: %s", what, resp.Status, status, clip(body))
		}
	}

	for _, ex := range sp.examples(t, "/v1/runs", "post") {
		resp, body := sp.do(t, s.url, jsonCall("POST", "/v1/runs", ex))
		want(resp, body, 200, "POST /v1/runs "+ex)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, body := sp.do(t, s.url, call{method: "GET", path: path})
		want(resp, body, 200, "GET "+path)
	}

	// Sessions: one per example; the last one is walked through.
	var id string
	for _, ex := range sp.examples(t, "/v1/sessions", "post") {
		resp, body := sp.do(t, s.url, jsonCall("POST", "/v1/sessions", ex))
		want(resp, body, 201, "POST /v1/sessions "+ex)
		if id != "" {
			resp, body := sp.do(t, s.url, call{method: "DELETE", path: "/v1/sessions/" + id})
			want(resp, body, 204, "DELETE a session")
		}
		var sess struct{ ID string }
		json.Unmarshal(body, &sess)
		id = sess.ID
	}
	base := "/v1/sessions/" + id
	resp, body := sp.do(t, s.url, call{method: "GET", path: base})
	want(resp, body, 200, "GET the session")
	for _, ex := range sp.examples(t, "/v1/sessions/{id}/runs", "post") {
		resp, body := sp.do(t, s.url, jsonCall("POST", base+"/runs", ex))
		want(resp, body, 200, "POST runs "+ex)
	}

	// Files in and out.
	put := call{method: "PUT", path: base + "/files?path=" + url.QueryEscape("dir/hello.txt"),
		header: http.Header{"Content-Type": {"application/octet-stream"}}, body: []byte("hello\n")}
	resp, body = sp.do(t, s.url, put)
	want(resp, body, 204, "PUT a file")
	put.path = base + "/files?path=index.txt"
	resp, body = sp.do(t, s.url, put)
	want(resp, body, 204, "PUT a file")
	resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/files?path=" + url.QueryEscape("dir/hello.txt")})
	want(resp, body, 200, "GET a file")
	if string(body) != "hello\n" {
		t.Errorf("GET the file put: %q", body)
	}
	resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/dir?path=dir"})
	want(resp, body, 200, "GET a directory")
	resp, tarball := sp.do(t, s.url, call{method: "GET", path: base + "/tar?path=dir"})
	want(resp, tarball, 200, "GET a tar")
	resp, body = sp.do(t, s.url, call{method: "PUT", path: base + "/tar?path=copy",
		header: http.Header{"Content-Type": {"application/x-tar"}}, body: tarball})
	want(resp, body, 204, "PUT a tar")
	resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/files?path=" + url.QueryEscape("copy/hello.txt")})
	want(resp, body, 200, "GET a file the tar held")

	// Background processes: the examples' HTTP server, reached through
	// the port proxy, and a loop that is signaled.
	var pids []int
	for _, ex := range sp.examples(t, "/v1/sessions/{id}/processes", "post") {
		resp, body := sp.do(t, s.url, jsonCall("POST", base+"/processes", ex))
		want(resp, body, 201, "POST processes "+ex)
		var p struct{ Pid int }
		json.Unmarshal(body, &p)
		pids = append(pids, p.Pid)
	}
	resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/processes"})
	want(resp, body, 200, "GET processes")
	resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/processes/" + strconv.Itoa(pids[0])})
	want(resp, body, 200, "GET a process")

	port := ""
	for _, ex := range sp.examples(t, "/v1/sessions/{id}/processes", "post") {
		if strings.Contains(ex, "http.server") {
			var r struct{ Command []string }
			json.Unmarshal([]byte(ex), &r)
			port = r.Command[slices.Index(r.Command, "http.server")+1]
		}
	}
	if port == "" {
		t.Fatal("no example starts python3 -m http.server PORT")
	}
	deadline := time.Now().Add(wait)
	for {
		resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/ports/" + port + "/index.txt"})
		if resp.StatusCode != http.StatusBadGateway || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the server is starting
	}
	want(resp, body, 200, "GET through the port proxy")
	if string(body) != "hello\n" {
		t.Errorf("GET index.txt through the port proxy: %q, want the file put", body)
	}
	resp, body = sp.do(t, s.url, call{method: "GET", path: base + "/ports/" + port + "/" + url.PathEscape("dir/hello.txt")})
	want(resp, body, 200, "GET a deeper path through the port proxy, its slash escaped")
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		// python's http.server answers 501 to these: what it says comes
		// back as it is.
		resp, body = sp.do(t, s.url, call{method: m, path: base + "/ports/" + port + "/index.txt",
			header: http.Header{"Content-Type": {"text/plain"}}, body: []byte("x")})
		want(resp, body, http.StatusNotImplemented, m+" through the port proxy")
	}

	for _, ex := range sp.examples(t, "/v1/sessions/{id}/processes/{pid}/signal", "post") {
		resp, body = sp.do(t, s.url, jsonCall("POST", base+"/processes/"+strconv.Itoa(pids[1])+"/signal", ex))
		want(resp, body, 204, "POST signal "+ex)
	}

	// Snapshots, restore, reset: a snapshot waits for no background
	// process started through the API, so the server's is refused first.
	resp, body = sp.do(t, s.url, call{method: "POST", path: base + "/snapshots"})
	want(resp, body, http.StatusConflict, "POST a snapshot while a background process runs")
	resp, body = sp.do(t, s.url, jsonCall("POST", base+"/processes/"+strconv.Itoa(pids[0])+"/signal", `{"signal":"KILL"}`))
	want(resp, body, 204, "POST signal KILL")
	deadline = time.Now().Add(wait)
	for {
		resp, body = sp.do(t, s.url, call{method: "POST", path: base + "/snapshots"})
		if resp.StatusCode != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the processes are ending
	}
	want(resp, body, 201, "POST a snapshot")
	for _, ex := range sp.examples(t, "/v1/sessions/{id}/restore", "post") {
		resp, body = sp.do(t, s.url, jsonCall("POST", base+"/restore", ex))
		want(resp, body, 204, "POST restore "+ex)
	}
	resp, body = sp.do(t, s.url, call{method: "POST", path: base + "/reset"})
	want(resp, body, 204, "POST reset")
	resp, body = sp.do(t, s.url, call{method: "DELETE", path: base + "/snapshots/1"})
	want(resp, body, 204, "DELETE a snapshot")

	resp, body = sp.do(t, s.url, call{method: "DELETE", path: base})
	want(resp, body, 204, "DELETE the session")
	resp, body = sp.do(t, s.url, call{method: "GET", path: base})
	want(resp, body, 404, "GET the deleted session")

	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, path := range sp.doc.Paths.InMatchingOrder() {
		for method, op := range sp.doc.Paths.Value(path).Operations() {
			if !sp.exercised[op.OperationID] {
				t.Errorf("%s %s (%s) was never answered in the walk", method, path, op.OperationID)
			}
		}
	}
}
