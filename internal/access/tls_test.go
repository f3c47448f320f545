package access

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

// testCA makes certificates signed by one key.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for cn (a server's when server) as PEM
// certificate and key.
func (ca *testCA) issue(t *testing.T, cn string, serial int64, server bool) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func client(t *testing.T, ca *testCA, cert, key []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	c := &tls.Config{RootCAs: pool}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names, as a hostile client would.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c, DisableKeepAlives: true}}
}

// TestClientCertificates serves TLS with a test CA: a client certificate
// of that CA authenticates as its common name, one of another CA is
// refused in the handshake, a key still works without one, and a renewed
// server certificate is served without a restart.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "test CA"), newTestCA(t, "other CA")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	scert, skey := ca.issue(t, "server", 100, true)
	keys := write("keys", []byte("bob "+HashKey("bob-key")+"\n"))
	url, _, _ := serve(t, Config{TLSCert: write("cert", scert), TLSKey: write("key", skey), ClientCA: write("ca", ca.pem),
		APIKeys: keys, ReloadInterval: 50 * time.Millisecond})

	ccert, ckey := ca.issue(t, "alice", 7, false)
	if s, b := call(t, client(t, ca, ccert, ckey), url); s != 200 || b != "alice" {
		t.Errorf("a client certificate for alice: %d %q, want 200 alice", s, b)
	}
	if s, b := call(t, client(t, ca, nil, nil), url, "Authorization: Bearer bob-key"); s != 200 || b != "bob" {
		t.Errorf("no certificate, bob's key: %d %q, want 200 bob", s, b)
	}
	if s, _ := call(t, client(t, ca, nil, nil), url); s != 401 {
		t.Errorf("no certificate, no key: %d, want 401", s)
	}
	ocert, okey := other.issue(t, "alice", 8, false)
	req, _ := http.NewRequest("GET", url, nil)
	if resp, err := client(t, ca, ocert, okey).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of another CA: %s, want the handshake refused", resp.Status)
	}

	// Renewal: new files, a new serial served to new connections.
	scert2, skey2 := ca.issue(t, "server", 101, true)
	write("cert.new", scert2)
	write("key.new", skey2)
	os.Rename(filepath.Join(dir, "key.new"), filepath.Join(dir, "key"))
	os.Rename(filepath.Join(dir, "cert.new"), filepath.Join(dir, "cert"))
	eventually(t, "the renewed certificate is served", func() bool {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.pem)
		c, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64() == 101
	})
}
