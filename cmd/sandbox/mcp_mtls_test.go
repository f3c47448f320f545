package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, dir: t.TempDir()}
	writePEM(t, filepath.Join(ca.dir, "ca.pem"), "CERTIFICATE", der)
	return ca
}

// issue makes a certificate named cn (a server's for 127.0.0.1, or a
// client's) and returns the paths of its PEM files.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, cn+".pem"), filepath.Join(ca.dir, cn+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsClient is an HTTP client that trusts ca and presents the client
// certificate of cn.
func (ca *testCA) client(t *testing.T, cn string) *http.Client {
	t.Helper()
	certFile, keyFile := ca.issue(t, cn, false)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
}

// TestMCPHTTPClientCert checks a client that authenticates with a client
// certificate and no bearer token: it calls tools, and another tenant's
// certificate naming its session is refused and its call does not run.
func TestMCPHTTPClientCert(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, "server", true)
	url, stderr, _ := startHTTP(t, cliBinary(t), "--tls-cert", srvCert, "--tls-key", srvKey,
		"--client-ca", filepath.Join(ca.dir, "ca.pem"))
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the server's URL %s is not https", url)
	}
	aliceHTTP := ca.client(t, "alice")
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
	resp, err := ca.client(t, "bob").Do(req)
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
