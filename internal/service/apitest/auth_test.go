package apitest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAuthAnswers: a request without the key, or with a wrong one, is 401
// with its challenge, and one from a foreign Host or Origin is 403, as the
// document says, for every kind of operation; the probes need no key.
func TestAuthAnswers(t *testing.T) {
	sp := mustSpec(t)
	s := startServer(t)
	resp, body := sp.do(t, s.url, jsonCall("POST", "/v1/sessions", `{}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/sessions with the key: %s %s", resp.Status, body)
	}
	var sess struct{ ID string }
	json.Unmarshal(body, &sess)
	base := "/v1/sessions/" + sess.ID

	wrong := http.Header{"Authorization": {"Bearer not-" + apiKey}}
	for _, c := range []struct {
		call   call
		status int
	}{
		{call{method: "POST", path: "/v1/runs", header: http.Header{"Content-Type": {"application/json"}}, body: []byte(`{"command":["true"]}`), noKey: true}, 401},
		{call{method: "POST", path: "/v1/runs", header: http.Header{"Content-Type": {"application/json"}, "Authorization": wrong["Authorization"]}, body: []byte(`{"command":["true"]}`)}, 401},
		{call{method: "GET", path: base, noKey: true}, 401},
		{call{method: "GET", path: base + "/files?path=x", header: wrong}, 401},
		{call{method: "GET", path: base + "/ports/8000/index.html", noKey: true}, 401},
		{call{method: "GET", path: "/metrics", noKey: true}, 401},
		{call{method: "GET", path: base, host: "sandbox.example.com"}, 403},
		{call{method: "POST", path: "/v1/runs", header: http.Header{"Content-Type": {"application/json"}, "Origin": {"https://evil.example"}}, body: []byte(`{"command":["true"]}`)}, 403},
		{call{method: "GET", path: "/healthz", noKey: true}, 200},
		{call{method: "GET", path: "/readyz", noKey: true}, 200},
		{call{method: "GET", path: base}, 200},
	} {
		resp, body := sp.do(t, s.url, c.call)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s (no key %v, host %q): %s, want %d: %s", c.call.method, c.call.path, c.call.noKey, c.call.host, resp.Status, c.status, clip(body))
		}
		if c.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s: 401 with WWW-Authenticate %q, want a Bearer challenge", c.call.method, c.call.path, resp.Header.Get("WWW-Authenticate"))
		}
	}
}
