package apitest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestSessionAnswers: the sessions' refusals (400, 404, 409, 413, 429) and
// a request forwarded from one replica to another are what the document
// says.
func TestSessionAnswers(t *testing.T) {
	sp := mustSpec(t)
	// Two replicas named by their ports, so that one -peer-url template
	// reaches either on loopback.
	pa, pb := freePort(t), freePort(t)
	a := startServer(t, "-addr", "127.0.0.1:"+strconv.Itoa(pa), "-replica", strconv.Itoa(pa), "-peer-url", "http://127.0.0.1:{replica}", "-max-sessions", "1")
	b := startServer(t, "-addr", "127.0.0.1:"+strconv.Itoa(pb), "-replica", strconv.Itoa(pb), "-peer-url", "http://127.0.0.1:{replica}")

	resp, body := sp.do(t, a.url, jsonCall("POST", "/v1/sessions", `{}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %s %s", resp.Status, body)
	}
	var sess struct{ ID string }
	json.Unmarshal(body, &sess)
	base := "/v1/sessions/" + sess.ID
	other := "/v1/sessions/" + strconv.Itoa(pa) + ".NOSUCHSESSIONXYZ"

	for _, c := range []struct {
		server string
		call   call
		status int
	}{
		{a.url, jsonCall("POST", "/v1/sessions", `{}`), 429},
		{a.url, withInvalid(jsonCall("POST", "/v1/sessions", `{"idle_timeout":"1h","max_lifetime":"5h"}`)), 400},
		{a.url, withInvalid(jsonCall("POST", "/v1/sessions", `{"limits":{"memory":"lots"}}`)), 400},
		{a.url, jsonCall("POST", "/v1/sessions", `{"limits":{"timeout":"5s"}}`), 400},
		{a.url, jsonCall("POST", base+"/runs", `{"command":["true"],"limits":{"memory":"64M"}}`), 400},
		{a.url, call{method: "GET", path: other}, 404},
		{a.url, call{method: "GET", path: base + "/processes/99999"}, 404},
		{a.url, jsonCall("POST", base+"/processes/1/signal", `{"signal":"KILL"}`), 400},
		{a.url, call{method: "GET", path: base + "/files?path=nothing"}, 404},
		{a.url, call{method: "GET", path: base + "/files?path=" + url.QueryEscape("../x")}, 400},
		{a.url, call{method: "PUT", path: base + "/files?path=big", header: http.Header{"Content-Type": {"application/octet-stream"}},
			body: make([]byte, 16<<20+1)}, 413},
		{a.url, jsonCall("POST", base+"/restore", `{"snapshot":"7"}`), 404},
		{a.url, call{method: "GET", path: base + "/ports/9/index.html"}, 502},
		// Through the other replica: forwarded to the owner, answered as
		// if asked there.
		{b.url, call{method: "GET", path: base}, 200},
		{b.url, jsonCall("POST", base+"/runs", `{"command":["echo","forwarded"],"stream":true}`), 200},
		{b.url, call{method: "GET", path: other}, 404},
	} {
		resp, body := sp.do(t, c.server, c.call)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %s, want %d: %s", c.call.method, c.call.path, resp.Status, c.status, clip(body))
		}
	}

	// A request for the session of a replica that is gone.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	resp, body = sp.do(t, b.url, call{method: "GET", path: base})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "drained") {
		t.Errorf("the session of a stopped replica: %s %s, want 404 saying it ended with its replica", resp.Status, body)
	}
}

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
