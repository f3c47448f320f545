package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/access/accesstest"
)

// TestMCPHTTPClientCert checks a client that authenticates with a client
// certificate and no bearer token: it calls tools, and another tenant's
// certificate naming its session is refused and its call does not run.
func TestMCPHTTPClientCert(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	ca := accesstest.NewCA(t, "test CA")
	srvCert, srvKey := ca.Issue(t, "server", true)
	url, stderr, _ := startHTTP(t, cliBinary(t), "--tls-cert", srvCert, "--tls-key", srvKey,
		"--client-ca", ca.File)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the server's URL %s is not https", url)
	}
	aliceCert, aliceKey := ca.Issue(t, "alice", false)
	aliceHTTP := accesstest.Client(t, ca, aliceCert, aliceKey)
	alice, err := connectClient(t, url, aliceHTTP)
	if err != nil {
		t.Fatalf("connect with alice's certificate: %v\nstderr:\n%s", err, stderr)
	}
	callOK(t, alice, "write_file", map[string]any{"path": "a.txt", "content": "alice's"}, nil)

	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(writeFileMsg("bob.txt")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", alice.ID())
	req.Header.Set("Mcp-Protocol-Version", alice.InitializeResult().ProtocolVersion)
	bobCert, bobKey := ca.Issue(t, "bob", false)
	resp, err := accesstest.Client(t, ca, bobCert, bobKey).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's certificate with alice's session id: %d, want 404, as for a session that does not exist", resp.StatusCode)
	}
	callErr(t, alice, "read_file", map[string]any{"path": "bob.txt"}, "")
	if !strings.Contains(stderr.String(), "tenant=alice") {
		t.Errorf("the log does not name alice's session's tenant:\n%s", stderr)
	}
}
