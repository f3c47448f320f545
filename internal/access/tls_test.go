package access

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/access/accesstest"
)

// TestClientCertificates serves TLS with a test CA: a client certificate
// of that CA authenticates as its common name, one of another CA is
// refused in the handshake, a key still works without one, and a renewed
// server certificate is served without a restart.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, other := accesstest.NewCA(t, "test CA"), accesstest.NewCA(t, "other CA")
	place := func(from, name string) string {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, name+".new")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, name)
	}
	scert, skey := ca.Issue(t, "server", true)
	keys := filepath.Join(dir, "keys")
	writeKeys(t, keys, "bob "+HashKey("bob-key"))
	url, _, _ := serve(t, Config{TLSCert: place(scert, "cert"), TLSKey: place(skey, "key"), ClientCA: ca.File,
		APIKeys: keys, ReloadInterval: 50 * time.Millisecond})

	ccert, ckey := ca.Issue(t, "alice", false)
	if s, b := call(t, accesstest.Client(t, ca, ccert, ckey), url); s != 200 || b != "alice" {
		t.Errorf("a client certificate for alice: %d %q, want 200 alice", s, b)
	}
	if s, b := call(t, accesstest.Client(t, ca, "", ""), url, "Authorization: Bearer bob-key"); s != 200 || b != "bob" {
		t.Errorf("no certificate, bob's key: %d %q, want 200 bob", s, b)
	}
	if s, _ := call(t, accesstest.Client(t, ca, "", ""), url); s != 401 {
		t.Errorf("no certificate, no key: %d, want 401", s)
	}
	ocert, okey := other.Issue(t, "alice", false)
	req, _ := http.NewRequest("GET", url, nil)
	if resp, err := accesstest.Client(t, ca, ocert, okey).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of another CA: %s, want the handshake refused", resp.Status)
	}

	// Renewal: new files, a new certificate served to new connections.
	scert2, skey2 := ca.Issue(t, "server", true)
	place(skey2, "key")
	place(scert2, "cert")
	data, _ := os.ReadFile(scert2)
	block, _ := pem.Decode(data)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	eventually(t, "the renewed certificate is served", func() bool {
		c, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool})
		if err != nil {
			return false
		}
		defer c.Close()
		return string(c.ConnectionState().PeerCertificates[0].Raw) == string(block.Bytes)
	})
}
