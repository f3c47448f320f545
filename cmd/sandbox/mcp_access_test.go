package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// apiKeys writes a key file with a new key for each tenant and returns
// its path and the keys.
func apiKeys(t *testing.T, tenants ...string) (string, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var lines strings.Builder
	for _, tenant := range tenants {
		key := rand.Text()
		sum := sha256.Sum256([]byte(key))
		keys[tenant] = key
		fmt.Fprintf(&lines, "%s sha256:%s\n", tenant, hex.EncodeToString(sum[:]))
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, keys
}

// withHeaders is a RoundTripper that sets headers on every request.
type withHeaders map[string]string

func (h withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectWith connects the SDK's client to url, sending headers.
func connectWith(t *testing.T, url string, headers map[string]string) (*mcp.ClientSession, error) {
	t.Helper()
	return connectClient(t, url, &http.Client{Transport: withHeaders(headers)})
}

// connectClient connects the SDK's client to url through hc.
func connectClient(t *testing.T, url string, hc *http.Client) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// rawPost posts one JSON-RPC message to url with headers (and, if cs is
// not nil, its session's) and returns the status, the response's headers
// and its body.
func rawPost(t *testing.T, url string, cs *mcp.ClientSession, headers map[string]string, msg string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if cs != nil {
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	}
	resp, err := withHeaders(headers).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

const initializeMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// writeFileMsg is a tools/call of write_file that writes path.
func writeFileMsg(path string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"` + path + `","content":"x"}}}`
}

// TestMCPHTTPHostOrigin checks that a request with a foreign Origin, the
// Origin "null" or a foreign Host is refused with 403 before its tool
// runs, and that an Origin given to -allow-origin passes.
func TestMCPHTTPHostOrigin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	url, stderr, _ := startHTTP(t, cliBinary(t), "--allow-origin", "http://ok.example")
	cs, err := connectHTTP(t, url)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"a foreign Origin", map[string]string{"Origin": "http://evil.example"}},
		{"the Origin null", map[string]string{"Origin": "null"}},
		{"a foreign Host", map[string]string{"Host": "evil.example"}},
	} {
		file := strings.ReplaceAll(tc.name, " ", "_") + ".txt"
		status, _, body := rawPost(t, url, cs, tc.headers, writeFileMsg(file))
		if status != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", tc.name, status, body)
		}
		callErr(t, cs, "read_file", map[string]any{"path": file}, "")
	}
	status, _, body := rawPost(t, url, nil, map[string]string{"Origin": "http://ok.example"}, initializeMsg)
	if status != http.StatusOK {
		t.Errorf("initialize from an allowed Origin: %d %q, want 200", status, body)
	}
}

// TestMCPHTTPAPIKey checks a client with a bearer API key: it calls
// tools; without a key or with a wrong one it is refused with 401 whose
// WWW-Authenticate names the protected resource metadata, which is
// served; another tenant presenting its session's id is refused and its
// call does not run. The log and the audit trail name the tenant, and
// the trail the refusals.
func TestMCPHTTPAPIKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	keyFile, keys := apiKeys(t, "alice", "bob")
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	url, stderr, _ := startHTTP(t, cliBinary(t), "--api-keys", keyFile, "--audit", trail)

	alice, err := connectWith(t, url, map[string]string{"Authorization": "Bearer " + keys["alice"]})
	if err != nil {
		t.Fatalf("connect with alice's key: %v\nstderr:\n%s", err, stderr)
	}
	var run runOutput
	callOK(t, alice, "run", map[string]any{"argv": []string{"echo", "hi"}}, &run)
	if string(run.Stdout) != "hi\n" {
		t.Errorf("run echo hi: %+v", run)
	}
	callOK(t, alice, "write_file", map[string]any{"path": "a.txt", "content": "alice's"}, nil)
	var got struct {
		Content string `json:"content"`
	}
	callOK(t, alice, "read_file", map[string]any{"path": "a.txt"}, &got)
	if got.Content != "alice's" {
		t.Errorf("read_file a.txt: %q", got.Content)
	}

	prmURL := strings.TrimSuffix(url, "/mcp") + "/.well-known/oauth-protected-resource/mcp"
	wantAuth := `resource_metadata="` + prmURL + `"`
	for name, headers := range map[string]map[string]string{
		"no key":      nil,
		"a wrong key": {"Authorization": "Bearer " + rand.Text()},
		"not bearer":  {"Authorization": "Basic " + keys["alice"]},
	} {
		status, h, body := rawPost(t, url, nil, headers, initializeMsg)
		if status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), wantAuth) {
			t.Errorf("%s: %d WWW-Authenticate %q %q, want 401 naming %s", name, status, h.Get("WWW-Authenticate"), body, wantAuth)
		}
		if name == "no key" && !strings.Contains(body, "send Authorization: Bearer") {
			t.Errorf("no key: the 401 says %q, want it to say what to send", body)
		}
	}
	if _, err := connectWith(t, url, nil); err == nil {
		t.Errorf("the SDK's client connected without a key")
	}

	for _, u := range []string{prmURL, strings.TrimSuffix(url, "/mcp") + "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var prm struct {
			Resource string   `json:"resource"`
			Bearer   []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&prm)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || prm.Resource != url || len(prm.Bearer) != 1 || prm.Bearer[0] != "header" {
			t.Errorf("GET %s: %d %+v %v, want resource %s, bearer_methods_supported [header]", u, resp.StatusCode, prm, err, url)
		}
	}

	status, _, body := rawPost(t, url, alice, map[string]string{"Authorization": "Bearer " + keys["bob"]}, writeFileMsg("bob.txt"))
	if status != http.StatusNotFound {
		t.Errorf("bob with alice's session id: %d %q, want 404, as for a session that does not exist", status, body)
	}
	callErr(t, alice, "read_file", map[string]any{"path": "bob.txt"}, "")

	if !regexp.MustCompile(`session started.*tenant=alice`).MatchString(stderr.String()) {
		t.Errorf("the log does not say alice's session started:\n%s", stderr)
	}
	events, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\{.*"tenant":"alice".*"echo"`).Match(events) {
		t.Errorf("no audit event of alice's run with its tenant:\n%s", events)
	}
	if !strings.Contains(string(events), "authentication refused") {
		t.Errorf("the refused authentications are not in the audit trail:\n%s", events)
	}
	for _, key := range keys {
		if strings.Contains(stderr.String()+string(events), key) {
			t.Errorf("a key is in the log or the audit trail")
		}
	}
}

// TestMCPHTTPNoAuthRemote checks that -insecure-no-auth lets --http listen
// beyond loopback, with a warning in the log, and serves a client as
// tenant default.
func TestMCPHTTPNoAuthRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	url, stderr, _ := startHTTP(t, cliBinary(t), "--http", "0.0.0.0:0", "--insecure-no-auth")
	if !regexp.MustCompile(`(?i)level=WARN.*(auth|insecure)`).MatchString(stderr.String()) {
		t.Errorf("no warning of -insecure-no-auth in the log:\n%s", stderr)
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := connectHTTP(t, "http://127.0.0.1:"+u.Port()+"/mcp")
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	callOK(t, cs, "run", map[string]any{"argv": []string{"true"}}, nil)
	if !strings.Contains(stderr.String(), "tenant=default") {
		t.Errorf("the session's log lines do not name tenant default:\n%s", stderr)
	}
}
