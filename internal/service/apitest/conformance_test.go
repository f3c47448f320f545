package apitest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestRunAnswers: the answers of /v1/runs other than a plain success (a
// program that fails, a timeout, refusals of every kind, a stream) are
// what the document says.
func TestRunAnswers(t *testing.T) {
	sp := mustSpec(t)
	s := startServer(t, "-max-memory", "256M")
	for _, c := range []struct {
		call   call
		status int
	}{
		{jsonCall("POST", "/v1/runs", `{"command":["sh","-c","echo out; echo err >&2; exit 3"]}`), 200},
		{jsonCall("POST", "/v1/runs", `{"command":["sleep","1000"],"limits":{"timeout":"3s"}}`), 200},
		{jsonCall("POST", "/v1/runs", `{"command":["sh","-c","head -c 100000 /dev/zero"],"limits":{"output":"1K"}}`), 200},
		{jsonCall("POST", "/v1/runs", `{"command":["no-such-program"]}`), 200},
		{jsonCall("POST", "/v1/runs", `{"command":["echo","`+strings.Repeat("x", 200<<10)+`"]}`), 400},
		{call: withInvalid(jsonCall("POST", "/v1/runs", `{"command":["sh"],"limits":{"memory":"1G"}}`)), status: 400},
		{call: withInvalid(jsonCall("POST", "/v1/runs", `{"command":["sh"],"colour":"red"}`)), status: 400},
		{call: withInvalid(jsonCall("POST", "/v1/runs", `command=sh`)), status: 400},
		{call: jsonCall("POST", "/v1/runs", `{"command":["sh"],"stdin":"`+strings.Repeat("x", 1<<20)+`"}`), status: 413},
		{call: withInvalid(call{method: "POST", path: "/v1/runs", header: http.Header{"Content-Type": {"text/plain"}}, body: []byte(`{"command":["true"]}`)}), status: 415},
	} {
		resp, body := sp.do(t, s.url, c.call)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s %s: %s, want %d: %s", c.call.method, c.call.path, clip(c.call.body), resp.Status, c.status, clip(body))
		}
	}

	// A method the route does not take: the document cannot list every
	// other method, so the answer is held to its response for them.
	req, _ := http.NewRequest(http.MethodPut, s.url+"/v1/runs", strings.NewReader(`{"command":["true"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("PUT /v1/runs: %s Allow %q, want 405 and Allow: POST", resp.Status, resp.Header.Get("Allow"))
	}
	sp.checkComponent(t, "MethodNotAllowed", resp, body)

	// A stream, asked for by the Accept header.
	c := jsonCall("POST", "/v1/runs", `{"command":["sh","-c","echo out; echo err >&2"]}`)
	c.header.Set("Accept", "application/x-ndjson")
	resp, body = sp.do(t, s.url, c)
	if ls := lines(body); resp.StatusCode != http.StatusOK || len(ls) < 3 || !strings.Contains(ls[len(ls)-1], `"result"`) {
		t.Errorf("a stream: %s\n%s, want output lines and the result last", resp.Status, body)
	}
}

func withInvalid(c call) call {
	c.invalid = true
	return c
}

// TestFullAnswers: 429, with its Retry-After, is what the document says,
// and so is the stream of the run that holds the only slot.
func TestFullAnswers(t *testing.T) {
	sp := mustSpec(t)
	s := startServer(t, "-max-concurrent", "1", "-max-queue", "0")
	c := jsonCall("POST", "/v1/runs", `{"command":["sh","-c","echo running; sleep 1000"],"stream":true,"limits":{"timeout":"5s"}}`)
	ex := sp.send(t, context.Background(), s.url, c)
	r := bufio.NewReader(ex.resp.Body)
	first, err := r.ReadBytes('\n')
	if err != nil || !strings.Contains(string(first), "running") {
		t.Fatalf("the first line of the stream: %q, %v", first, err)
	}

	resp, body := sp.do(t, s.url, jsonCall("POST", "/v1/runs", `{"command":["true"]}`))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("with the slot busy: %s Retry-After %q: %s; want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"), body)
	}

	rest, err := io.ReadAll(r)
	ex.resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	all := append(first, rest...)
	sp.check(t, ex, all)
	if ls := lines(all); !slices.ContainsFunc(ls, func(l string) bool { return strings.Contains(l, `"cause":"timeout"`) }) {
		t.Errorf("the stream ended without its timeout's result:\n%s", all)
	}
}
