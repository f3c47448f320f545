package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Secrets: the proxy puts a secret's value in place of its placeholder in
// the headers of requests to the secret's hosts, over plain HTTP and in
// TLS it terminates, and the sandbox's side never sees the value.

const (
	testValue       = "sk-live-0123456789abcdef-the-real-key"
	testPlaceholder = "sandbox-secret-API_KEY-00112233445566778899aabbccddeeff"
)

// upstreamCA is a CA of the test's that signs its upstream servers.
type upstreamCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newUpstreamCA(t testing.TB) *upstreamCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &upstreamCA{cert: cert, key: key}
}

func (ca *upstreamCA) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *upstreamCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// echoHeaders answers with the Authorization header it got, in a header
// and in the body, and what it was asked to add to the body.
var echoHeaders = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("Authorization")
	w.Header().Set("X-Echo", got)
	w.Header().Set("X-Accept-Encoding", r.Header.Get("Accept-Encoding"))
	if m := r.URL.Query().Get("more"); m != "" {
		w.Header().Set("X-Named-"+m, "1")
	}
	fmt.Fprintf(w, "got %q; %s", got, r.URL.Query().Get("more"))
})

// secretProxy starts a proxy for hosts (each to 127.0.0.1), with one
// secret bound to bound, and upstream servers verified against ca.
func secretProxy(t *testing.T, ca *upstreamCA, rules, bound []string, opts ...func(*Proxy)) *testProxy {
	t.Helper()
	hosts := map[string][]string{}
	for _, h := range []string{"api.secret.test", "other.allowed.test", "second.secret.test"} {
		hosts[h] = []string{"127.0.0.1"}
	}
	br, err := ParseRules(bound)
	if err != nil {
		t.Fatal(err)
	}
	br2, _ := ParseRules([]string{"second.secret.test:1-65535"})
	secrets := []Secret{
		{Name: "API_KEY", Placeholder: testPlaceholder, Value: testValue, Hosts: br},
		{Name: "OTHER_KEY", Placeholder: "sandbox-secret-OTHER_KEY-ffeeddccbbaa99887766554433221100", Value: "other-value-42", Hosts: br2},
	}
	auth, err := NewAuthority(secrets, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(auth.Close)
	return startProxy(t, rules, hosts, func(p *Proxy) {
		p.Secrets, p.Authority = secrets, auth
		if ca != nil {
			p.UpstreamRoots = ca.pool()
		}
		for _, o := range opts {
			o(p)
		}
	})
}

// sandboxClient is an HTTP client through tp that trusts tp's authority.
func sandboxClient(tp *testProxy) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(tp.Authority.Certificate())
	c, _ := tp.client(&tls.Config{RootCAs: pool})
	c.Transport.(*http.Transport).DisableKeepAlives = true
	return c
}

func getWith(t *testing.T, c *http.Client, url, auth string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+auth)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, string(body)
}

func TestSecretAdded(t *testing.T) {
	ca := newUpstreamCA(t)
	plain := httptest.NewServer(echoHeaders)
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(echoHeaders)
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.secret.test")}}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	pp, tp := port(t, plain.URL), port(t, tlsSrv.URL)
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c := sandboxClient(tpx)
	// The value is asked back in the body too, split in two: the
	// scrubber must find it whole.
	more := "?more=" + testValue[:10] + testValue[10:]
	for _, url := range []string{"http://api.secret.test:" + pp + "/" + more, "https://api.secret.test:" + tp + "/" + more} {
		resp, body := getWith(t, c, url, testPlaceholder)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
		}
		want := fmt.Sprintf("got %q; %s", "Bearer "+testPlaceholder, testPlaceholder)
		if body != want || resp.Header.Get("X-Echo") != "Bearer "+testPlaceholder {
			t.Errorf("%s: the sandbox saw %q, X-Echo %q; want the server to have got the value, and the sandbox the placeholder: %q",
				url, body, resp.Header.Get("X-Echo"), want)
		}
		if resp.Header.Get("X-Named-"+testPlaceholder) != "1" || resp.Header.Get("X-Named-"+testValue) != "" {
			t.Errorf("%s: a header named after the value reached the sandbox: %v", url, resp.Header)
		}
		if ae := resp.Header.Get("X-Accept-Encoding"); ae != "identity" {
			t.Errorf("%s: the server was asked for encoding %q, want identity", url, ae)
		}
	}
	// The plain request, the CONNECT, and the request inside it.
	rep := waitReport(t, tpx.Proxy, 3)
	terminated := 0
	for _, r := range rep {
		line := fmt.Sprintf("%+v", r)
		if strings.Contains(line, testValue) {
			t.Errorf("a record holds the value: %s", line)
		}
		if !r.Allowed || r.Status != 200 {
			t.Errorf("record %s", line)
		}
		if strings.Contains(r.Reason, "TLS terminated") {
			terminated++
		}
	}
	if terminated != 2 {
		t.Errorf("%d records say TLS was terminated, want 2 (the CONNECT and its request): %+v", terminated, rep)
	}
}

// TestSecretServerSawValue checks from the server's side that what
// arrived was the value, not the placeholder.
func TestSecretServerSawValue(t *testing.T) {
	ca := newUpstreamCA(t)
	got := make(chan string, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") })
	plain := httptest.NewServer(h)
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.secret.test")}}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c := sandboxClient(tpx)
	for _, url := range []string{"http://api.secret.test:" + port(t, plain.URL) + "/", "https://api.secret.test:" + port(t, tlsSrv.URL) + "/"} {
		getWith(t, c, url, testPlaceholder)
		if a := <-got; a != "Bearer "+testValue {
			t.Errorf("%s: the server got %q, want the value", url, a)
		}
	}
}

func TestSecretRefusedElsewhere(t *testing.T) {
	ca := newUpstreamCA(t)
	plain := httptest.NewServer(echoHeaders)
	defer plain.Close()
	second := httptest.NewUnstartedServer(echoHeaders)
	second.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "second.secret.test")}}
	second.StartTLS()
	defer second.Close()
	tpx := secretProxy(t, ca, []string{"*.secret.test:1-65535", "other.allowed.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c := sandboxClient(tpx)
	for _, url := range []string{
		"http://other.allowed.test:" + port(t, plain.URL) + "/",
		"http://127.0.0.1:" + port(t, plain.URL) + "/",
		"https://second.secret.test:" + port(t, second.URL) + "/",
	} {
		resp, body := getWith(t, c, url, testPlaceholder)
		if resp.StatusCode != 403 || !strings.Contains(body, "secret API_KEY") || strings.Contains(body, testValue) {
			t.Errorf("%s: %d %q, want 403 naming the secret", url, resp.StatusCode, body)
		}
	}
	// The report names the secret for each, never its value.
	var refused int
	for _, r := range waitReport(t, tpx.Proxy, 4) {
		if strings.Contains(fmt.Sprintf("%+v", r), testValue) {
			t.Errorf("a record holds the value: %+v", r)
		}
		if r.Status == 403 && !r.Allowed && strings.Contains(r.Reason, "placeholder of secret API_KEY") {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d refusals naming the secret recorded, want 3: %+v", refused, tpx.Report())
	}
}

// TestTunnelUntouched: a CONNECT to a host no secret is bound to reaches
// the real server's certificate.
func TestTunnelUntouched(t *testing.T) {
	ca := newUpstreamCA(t)
	srv := httptest.NewUnstartedServer(echoHeaders)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "other.allowed.test")}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the test hangs up after the handshake
	srv.StartTLS()
	defer srv.Close()
	tpx := secretProxy(t, ca, []string{"*.allowed.test:1-65535", "api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c, err := net.Dial("tcp", tpx.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT other.allowed.test:%s HTTP/1.1\r\n\r\n", port(t, srv.URL))
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "other.allowed.test", RootCAs: ca.pool()})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if got := tc.ConnectionState().PeerCertificates[0]; !bytes.Equal(got.Raw, srv.TLS.Certificates[0].Certificate[0]) {
		t.Errorf("the tunnel to a host without secrets showed %q issued by %q, not the server's own", got.Subject, got.Issuer)
	}
}

// TestInterceptSignsOnlyItsHost: inside a tunnel to a secret host, a TLS
// handshake for another name gets no certificate.
func TestInterceptSignsOnlyItsHost(t *testing.T) {
	ca := newUpstreamCA(t)
	srv := httptest.NewUnstartedServer(echoHeaders)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.secret.test")}}
	srv.StartTLS()
	defer srv.Close()
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c, err := net.Dial("tcp", tpx.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT api.secret.test:%s HTTP/1.1\r\n\r\n", port(t, srv.URL))
	if resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "www.bank.test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Errorf("a handshake for www.bank.test inside a tunnel to api.secret.test got certificate %q", tc.ConnectionState().PeerCertificates[0].DNSNames)
	}
	rep := waitReport(t, tpx.Proxy, 1)
	if !strings.Contains(rep[0].Error, "www.bank.test") {
		t.Errorf("record %+v does not say what was asked", rep[0])
	}
	if _, _, err := tpx.Authority.leaf("www.bank.test"); err == nil {
		t.Error("the authority made a leaf for www.bank.test")
	}
}

func TestAuthorityConstraints(t *testing.T) {
	exact, _ := ParseRules([]string{"api.example.com", "api.example.com:8443"})
	wild, _ := ParseRules([]string{"*.svc.example.org"})
	a, err := NewAuthority([]Secret{{Name: "A", Hosts: exact}, {Name: "B", Hosts: wild}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert := a.Certificate()
	if got := strings.Join(cert.PermittedDNSDomains, " "); got != "api.example.com .svc.example.org" || !cert.PermittedDNSDomainsCritical {
		t.Errorf("permitted %q critical %v", got, cert.PermittedDNSDomainsCritical)
	}
	if len(cert.ExcludedIPRanges) != 2 || !cert.IsCA || !cert.MaxPathLenZero || cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("certificate: excluded %v CA %v pathlen0 %v key %v", cert.ExcludedIPRanges, cert.IsCA, cert.MaxPathLenZero, cert.PublicKeyAlgorithm)
	}
	if d := time.Until(cert.NotAfter); d > time.Hour || d < 50*time.Minute {
		t.Errorf("valid for %v more, want about an hour", d)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for name, ok := range map[string]bool{"api.example.com": true, "a.svc.example.org": true, "x.y.svc.example.org": true,
		"svc.example.org": false, "example.com": false, "evil.test": false, "api.example.com.evil.test": false} {
		l, _, err := a.leaf(name)
		if (err == nil) != ok {
			t.Errorf("leaf(%s): %v, want made %v", name, err, ok)
		}
		// A certificate the key signed by mistake for a name outside
		// the constraints still verifies for none.
		key := a.leafKey
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Minute),
			NotAfter: time.Now().Add(time.Minute), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, cert, &key.PublicKey, a.key)
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := x509.ParseCertificate(der)
		if _, err := forged.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); (err == nil) != ok {
			t.Errorf("a certificate for %s verified: %v, want %v", name, err, ok)
		}
		if ok {
			leaf, _ := x509.ParseCertificate(l.Certificate[0])
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
				t.Errorf("leaf for %s: %v", name, err)
			}
		}
	}
	other, _ := NewAuthority([]Secret{{Name: "A", Hosts: exact}}, time.Hour)
	if bytes.Equal(other.Certificate().RawSubjectPublicKeyInfo, cert.RawSubjectPublicKeyInfo) {
		t.Error("two authorities share a key")
	}
	a.Close()
	if _, _, err := a.leaf("api.example.com"); err == nil {
		t.Error("a closed authority made a leaf")
	}
	nets, _ := ParseRules([]string{"10.0.0.0/8"})
	if _, err := NewAuthority([]Secret{{Name: "N", Hosts: nets}}, time.Hour); err == nil {
		t.Error("an authority for an address range was made")
	}
}

// scrubInPieces passes in through p's scrubber in pieces of size bytes,
// as reads would cut a stream, and returns what comes out.
func scrubInPieces(p *Proxy, in string, size int) string {
	sc := p.newScrubber()
	var out strings.Builder
	emit := func(b []byte) error { out.Write(b); return nil }
	for i := 0; i < len(in); i += size {
		sc.write(append(append([]byte{}, sc.carry...), in[i:min(i+size, len(in))]...), emit)
	}
	sc.flush(emit)
	return out.String()
}

// TestScrubberSplits: a value is found whatever the reads cut it into,
// and the bytes around it pass unchanged.
func TestScrubberSplits(t *testing.T) {
	p := &Proxy{Secrets: []Secret{{Value: "SECRET-VALUE", Placeholder: "<ph1>"}, {Value: "xy", Placeholder: "<ph2-long>"}}}
	in := "aSECRET-VALUESECRET-VALUExSECRET-VALxy SECRET-VALUE" + strings.Repeat("z", 40) + "SECRET-VALUE"
	want := "a<ph1><ph1>xSECRET-VAL<ph2-long> <ph1>" + strings.Repeat("z", 40) + "<ph1>"
	for size := 1; size <= len(in); size++ {
		if got := scrubInPieces(p, in, size); got != want {
			t.Errorf("pieces of %d: %q, want %q", size, got, want)
		}
	}
}

func TestUncovered(t *testing.T) {
	r, _ := ParseRules([]string{"api.example.com", "*.example.org", "x.example.net:8000-8100"})
	for entry, ok := range map[string]bool{"api.example.com": true, "api.example.com:443": true, "api.example.com:8443": false,
		"*.example.org": true, "*.a.example.org": true, "b.example.org": true, "example.org": false, "*.example.com": false,
		"x.example.net:8050": true, "x.example.net:7999-8000": false, "10.0.0.1": false} {
		o, err := ParseRules([]string{entry})
		if err != nil {
			t.Fatal(err)
		}
		if why := r.Uncovered(o); (why == "") != ok {
			t.Errorf("%s: %q, want covered %v", entry, why, ok)
		}
	}
}

// escapedForms are the forms in which v may stand in a text: as it is,
// and as Go's %q and %+q, JSON, and a JSON log of a text holding any of
// those would write it.
func escapedForms(v string) []string {
	inner := func(q string) string { return q[1 : len(q)-1] }
	j, _ := json.Marshal(v)
	forms := []string{v, inner(strconv.Quote(v)), inner(strconv.QuoteToASCII(v)), inner(string(j))}
	for _, f := range forms[:3] {
		jf, _ := json.Marshal(f)
		forms = append(forms, inner(string(jf)))
	}
	return forms
}

// awkwardValues are secrets' values that Go's quoting and JSON escape:
// a quote, a backslash, a tab, invalid UTF-8, and all of them.
var awkwardValues = []string{`sk-"quoted"-0123456789`, `sk-back\slash-0123456789`, "sk-tab\tbed-0123456789",
	"sk-bad-\xff\xfe-utf8-0123456789", "sk-\"all\\\t\xc3(-0123456789"}

// TestSecretNotInRecords: an upstream that sends the value back in a
// malformed response, which the proxy's error quotes, leaves only the
// placeholder in the record: of each value that quoting escapes, no
// form, raw or escaped, is in any record field or reaches the sandbox.
func TestSecretNotInRecords(t *testing.T) {
	ca := newUpstreamCA(t)
	answers := map[string]func(auth string) string{
		"status code":       func(a string) string { return "HTTP/1.1 " + a + " OK\r\n\r\n" },
		"status line":       func(a string) string { return "Bearer " + a + "\r\n\r\n" },
		"no colon":          func(a string) string { return "HTTP/1.1 200 OK\r\nX-Echo " + a + "\r\n\r\n" },
		"bad name":          func(a string) string { return "HTTP/1.1 200 OK\r\nX-Echo(" + a + "): 1\r\n\r\n" },
		"bad value":         func(a string) string { return "HTTP/1.1 200 OK\r\nX-Echo: " + a + "\x01\r\n\r\n" },
		"first line folded": func(a string) string { return "HTTP/1.1 200 OK\r\n " + a + "\r\n\r\n" },
		"folded":            func(a string) string { return "HTTP/1.1 200 OK\r\nX-Echo: a\r\n " + a + "\r\n\r\n" },
		"content length":    func(a string) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + a + "\r\n\r\n" },
		"transfer encoding": func(a string) string { return "HTTP/1.1 200 OK\r\nTransfer-Encoding: " + a + "\r\n\r\n" },
		"two transfer encodings": func(a string) string {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: " + a + "\r\n\r\n"
		},
		"content encoding": func(a string) string { return "HTTP/1.1 200 OK\r\nContent-Encoding: " + a + "\r\n\r\n" },
		"version":          func(a string) string { return "HTTP/" + a + " 200 OK\r\n\r\n" },
	}
	for _, value := range awkwardValues {
		tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"},
			withSecrets(t, Secret{Name: "API_KEY", Placeholder: testPlaceholder, Value: value}))
		c := sandboxClient(tpx)
		n := 0
		for what, answer := range answers {
			for _, url := range hostileURLs(t, ca, answer) {
				n++
				resp, body := getWith(t, c, url, testPlaceholder)
				if resp.StatusCode != 502 {
					t.Errorf("%q %s %s: %d, want 502", value, what, url[:5], resp.StatusCode)
				}
				for _, f := range escapedForms(value) {
					if strings.Contains(shown(resp, body), f) {
						t.Errorf("%q %s %s: the sandbox is shown %q:\n%s", value, what, url[:5], f, shown(resp, body))
					}
				}
			}
		}
		// A trailer section is parsed after the body was relayed, and
		// not scrubbed, as it is not relayed.
		for _, trailer := range []string{"X-Echo " + value, " " + value, "X-Echo: " + value + "\x01", "X-Echo(" + value + "): 1"} {
			for _, url := range hostileURLs(t, ca, func(a string) string {
				return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n" + strings.ReplaceAll(trailer, value, a) + "\r\n\r\n"
			}) {
				n++
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+testPlaceholder)
				// The body is cut short where the trailer failed.
				if resp, err := c.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
		rep := waitReport(t, tpx.Proxy, n+n/2) // each TLS one is a CONNECT and its request
		quoted := 0
		for _, r := range rep {
			for _, field := range []string{r.Host, r.Method, r.Reason, r.Addr, r.Error} {
				for _, f := range escapedForms(value) {
					if strings.Contains(field, f) {
						t.Errorf("%q: a record holds it as %q: %+v", value, f, r)
					}
				}
			}
			if strings.Contains(r.Error, testPlaceholder) {
				quoted++
			}
		}
		// The texts still say what the upstream sent, with the placeholder.
		if quoted < len(answers) {
			t.Errorf("%q: %d records quote the upstream's answer with the placeholder, want at least %d: %+v", value, quoted, len(answers), rep)
		}
	}
}

// TestInterceptMemory: a terminated tunnel holds at most MaxConnMemory and
// MaxInterceptMemory, whether it waits for its request or streams a
// scrubbed response that stalls.
func TestInterceptMemory(t *testing.T) {
	const conns = 12
	ca := newUpstreamCA(t)
	stall := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000000")
		w.Write(bytes.Repeat([]byte("b"+testValue), 4000))
		w.(http.Flusher).Flush()
		<-stall
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.secret.test")}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	defer close(stall) // before the server's Close, which waits for its handlers
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"},
		func(p *Proxy) { p.MaxConns = 3 * conns })
	pool := x509.NewCertPool()
	pool.AddCert(tpx.Authority.Certificate())
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	// The first leaf is made before measuring: it is the Authority's,
	// not a connection's.
	if _, _, err := tpx.Authority.leaf("api.secret.test"); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"waiting for its request", "scrubbing a stalled response"} {
		before := liveBytes()
		for range conns {
			c, err := net.Dial("tcp", tpx.addr)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			fmt.Fprintf(c, "CONNECT api.secret.test:%s HTTP/1.1\r\n\r\n", port(t, srv.URL))
			br := bufio.NewReader(c)
			if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %v %v", resp, err)
			}
			tc := tls.Client(c, &tls.Config{ServerName: "api.secret.test", RootCAs: pool})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			cs = append(cs, tc)
			if state == "scrubbing a stalled response" {
				fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: api.secret.test\r\nAuthorization: %s\r\n\r\n", testPlaceholder)
				tc.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(tc, make([]byte, 50000)); err != nil {
					t.Fatalf("response: %v", err)
				}
			}
		}
		waitSessions(t, tpx.Proxy, len(cs)/2)
		time.Sleep(100 * time.Millisecond)
		per := (liveBytes() - before) / conns
		t.Logf("%s: %d bytes per connection; bound %d", state, per, MaxConnMemory+MaxInterceptMemory)
		if per > MaxConnMemory+MaxInterceptMemory {
			t.Errorf("%s: %d bytes per connection, over MaxConnMemory+MaxInterceptMemory (%d)", state, per, MaxConnMemory+MaxInterceptMemory)
		}
	}
}

// BenchmarkInterceptHandshakes measures the handshakes of one terminated
// tunnel: the sandbox's with a leaf of the Authority, and the proxy's
// with a server whose chain it verifies. Both ends of each run here, so
// the proxy's share (handshakeCost) is about half of each op.
func BenchmarkInterceptHandshakes(b *testing.B) {
	ca := newUpstreamCA(b)
	hosts, _ := ParseRules([]string{"api.secret.test"})
	auth, err := NewAuthority([]Secret{{Name: "K", Hosts: hosts}}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	leaf, _, _ := auth.leaf("api.secret.test")
	up := ca.leaf(b, "api.secret.test")
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AddCert(auth.Certificate())
	pair := func(cert *tls.Certificate, roots *x509.CertPool) {
		c, s := net.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- tls.Server(s, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}}).Handshake()
		}()
		if err := tls.Client(c, &tls.Config{ServerName: "api.secret.test", RootCAs: roots, NextProtos: []string{"http/1.1"}}).Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		c.Close()
		s.Close()
	}
	cpu0 := cpuNow()
	for b.Loop() {
		pair(leaf, sandboxRoots)
		pair(&up, ca.pool())
	}
	b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkLeaf measures signing a leaf for a new host (leafCost).
func BenchmarkLeaf(b *testing.B) {
	hosts, _ := ParseRules([]string{"*.secret.test"})
	auth, err := NewAuthority([]Secret{{Name: "K", Hosts: hosts}}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	cpu0 := cpuNow()
	for b.Loop() {
		i++
		if _, _, err := auth.leaf(fmt.Sprintf("h%d.secret.test", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
}

// TestInterceptCharged: a terminated tunnel's handshakes and its leaf are
// charged to the CPU budget.
func TestInterceptCharged(t *testing.T) {
	ca := newUpstreamCA(t)
	srv := httptest.NewUnstartedServer(echoHeaders)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.secret.test")}}
	srv.StartTLS()
	defer srv.Close()
	// A budget that refills too slowly to matter during the test.
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"},
		func(p *Proxy) { p.CPUs = 1e-6 })
	getWith(t, sandboxClient(tpx), "https://api.secret.test:"+port(t, srv.URL)+"/", testPlaceholder)
	waitReport(t, tpx.Proxy, 2)
	tpx.cpu.mu.Lock()
	spent := float64(CPUBurst) - tpx.cpu.tokens
	tpx.cpu.mu.Unlock()
	if min := float64(handshakeCost + leafCost + acceptCost + 2*requestCost); spent < min {
		t.Errorf("the budget was charged %.0f ns for a terminated tunnel, want at least %.0f", spent, min)
	}
}

// TestScrubShortValue: a value that the placeholders themselves contain is
// replaced once, not again inside the placeholder put in its place.
func TestScrubShortValue(t *testing.T) {
	p := &Proxy{Secrets: []Secret{{Value: "secret", Placeholder: "sandbox-secret-K-00"}}}
	if got, err := p.scrubHeader([]byte("HTTP/1.1 200 secret\r\nX-Secret-Secret: secret\r\n\r\n"), maxHeaderBytes); err != nil ||
		string(got) != "HTTP/1.1 200 sandbox-secret-K-00\r\nX-sandbox-secret-K-00-sandbox-secret-K-00: sandbox-secret-K-00\r\n\r\n" {
		t.Errorf("header: %q %v", got, err)
	}
	if got := p.scrubText("a secret"); got != "a sandbox-secret-K-00" {
		t.Errorf("text: %q", got)
	}
	sc := p.newScrubber()
	var out bytes.Buffer
	emit := func(b []byte) error { out.Write(b); return nil }
	sc.write([]byte("secretsecret"), emit)
	sc.flush(emit)
	if out.String() != "sandbox-secret-K-00sandbox-secret-K-00" {
		t.Errorf("body: %q", out.String())
	}
}

// withSecrets makes secretProxy's proxy hold secrets, each bound to
// api.secret.test on every port, in place of its own.
func withSecrets(t *testing.T, secrets ...Secret) func(*Proxy) {
	t.Helper()
	hosts, err := ParseRules([]string{"api.secret.test:1-65535"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range secrets {
		secrets[i].Hosts = hosts
	}
	return func(p *Proxy) { p.Secrets = secrets }
}

// hostileServer serves on loopback, plain or over TLS with cert: it reads
// one request and writes answer(auth) as the raw response, auth being the
// request's Authorization without its "Bearer ", then closes.
func hostileServer(t *testing.T, cert *tls.Certificate, answer func(auth string) string) string {
	t.Helper()
	l := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		if cert != nil {
			c = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}})
		}
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			io.WriteString(c, answer(strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")))
		}
	})
	return port(t, l.Addr().String())
}

// hostileURLs starts hostileServer plain and over TLS for api.secret.test
// and returns their URLs.
func hostileURLs(t *testing.T, ca *upstreamCA, answer func(auth string) string) []string {
	t.Helper()
	leaf := ca.leaf(t, "api.secret.test")
	return []string{"http://api.secret.test:" + hostileServer(t, nil, answer) + "/",
		"https://api.secret.test:" + hostileServer(t, &leaf, answer) + "/"}
}

// gunzipped is data uncompressed, if it is gzip.
func gunzipped(data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(zr)
	return out
}

// TestSecretEncodedRefused: a response of a secret's host that says it is
// encoded anywhere (any Content-Encoding line, any element of a list, any
// case; a transfer coding but chunked) is refused with 502, since the
// scrubber cannot see into its body; the program never gets the value
// out of a compressed echo. An unencoded one passes, scrubbed.
func TestSecretEncodedRefused(t *testing.T) {
	ca := newUpstreamCA(t)
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c := sandboxClient(tpx)
	gz := func(s string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, s)
		zw.Close()
		return b.String()
	}
	var cases []string
	for _, name := range []string{"Content-Encoding", "content-encoding", "CONTENT-ENCODING", "cOnTeNt-EnCoDiNg"} {
		for _, lines := range [][]string{
			{"gzip"}, {"identity", "gzip"}, {"", "gzip"}, {"gzip", "identity"}, {"gzip", ""}, {"identity", "identity", "GZip"},
			{"identity, gzip"}, {"identity,gzip"}, {"IDENTITY , GZIP"}, {"identity\t,\tgzip"}, {", gzip"}, {"gzip, identity"},
			{"Identity", "x-gzip"}, {"br"}, {"deflate"}, {"identity", "chunked"},
		} {
			var h strings.Builder
			for _, l := range lines {
				fmt.Fprintf(&h, "%s: %s\r\n", name, l)
			}
			cases = append(cases, h.String())
		}
	}
	// Transfer codings: HTTP/1.1 parsing takes only "chunked"; HTTP/1.0
	// ignores the field, and the body would pass as it came.
	for _, te := range []string{"gzip, chunked", "gzip\r\nTransfer-Encoding: chunked", "chunked, gzip", "GZIP"} {
		cases = append(cases, "Transfer-Encoding: "+te+"\r\n", "HTTP/1.0\r\nTransfer-Encoding: "+te+"\r\n")
	}
	cases = append(cases, "HTTP/1.0\r\nTransfer-Encoding: chunked\r\n")
	for _, fields := range cases {
		proto := "HTTP/1.1"
		if p, rest, ok := strings.Cut(fields, "\r\n"); ok && p == "HTTP/1.0" {
			proto, fields = p, rest
		}
		chunked := strings.Contains(fields, "Transfer-Encoding")
		for _, url := range hostileURLs(t, ca, func(auth string) string {
			body := gz("got " + auth)
			if chunked {
				body = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
			}
			return fmt.Sprintf("%s 200 OK\r\n%sContent-Length: %d\r\n\r\n%s", proto, fields, len(body), body)
		}) {
			resp, body := getWith(t, c, url, testPlaceholder)
			if resp.StatusCode != 502 || strings.Contains(body, testValue) || bytes.Contains(gunzipped([]byte(body)), []byte(testValue)) {
				t.Errorf("%s %s %q: %d %q, want 502 and no value", url[:5], proto, fields, resp.StatusCode, gunzipped([]byte(body)))
			}
		}
	}
	for _, fields := range []string{"", "Content-Encoding: identity\r\n", "Content-Encoding: identity\r\nContent-Encoding: \r\n", "Content-Encoding: IDENTITY, identity\r\n"} {
		for _, url := range hostileURLs(t, ca, func(auth string) string {
			return fmt.Sprintf("HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\ngot %s", fields, len(auth)+4, auth)
		}) {
			if resp, body := getWith(t, c, url, testPlaceholder); resp.StatusCode != 200 || body != "got "+testPlaceholder {
				t.Errorf("%s %q: %d %q, want 200 with the placeholder", url[:5], fields, resp.StatusCode, body)
			}
		}
	}
	for _, r := range tpx.Report() {
		if strings.Contains(fmt.Sprintf("%+v", r), testValue) {
			t.Errorf("a record holds the value: %+v", r)
		}
	}
}

// echoEverywhere answers with auth in the status text, a header name, the
// headers that commonly echo what a request sent (X-Echo, Location,
// Set-Cookie, WWW-Authenticate), and the body.
func echoEverywhere(auth string) string {
	body := "got " + auth
	return fmt.Sprintf("HTTP/1.1 401 %s\r\nX-Echo: Bearer %s\r\nLocation: /login?next=%s\r\nSet-Cookie: s=%s; Path=/\r\n"+
		"WWW-Authenticate: Bearer realm=\"%s\"\r\nX-Named-%s: 1\r\nContent-Length: %d\r\n\r\n%s",
		auth, auth, auth, auth, auth, auth, len(body), body)
}

// shown is all the sandbox is shown of resp: its status, header and body.
func shown(resp *http.Response, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", resp.Status)
	resp.Header.Write(&b)
	return b.String() + "\n" + body
}

// TestSecretOverlapping: of two values one of which holds the other (an
// account id, and "id:password"; or a part from the middle), the longer
// is replaced whole wherever it is echoed, whatever the secrets' order,
// so no rest of it reaches the sandbox.
func TestSecretOverlapping(t *testing.T) {
	const (
		account = "acct-0123456789"
		full    = account + ":pw-abcdefghij"
		middle  = "0123456789:pw"
	)
	ca := newUpstreamCA(t)
	ph := func(n string) string { return "sandbox-secret-" + n + "-00112233445566778899aabbccddeeff" }
	for _, order := range [][]Secret{
		{{Name: "ACCOUNT", Value: account}, {Name: "FULL", Value: full}},
		{{Name: "FULL", Value: full}, {Name: "ACCOUNT", Value: account}},
		{{Name: "MIDDLE", Value: middle}, {Name: "ACCOUNT", Value: account}, {Name: "FULL", Value: full}},
	} {
		for i := range order {
			order[i].Placeholder = ph(order[i].Name)
		}
		tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"},
			withSecrets(t, order...))
		c := sandboxClient(tpx)
		for _, url := range hostileURLs(t, ca, echoEverywhere) {
			for _, name := range []string{"FULL", "ACCOUNT"} {
				resp, body := getWith(t, c, url, ph(name))
				got := shown(resp, body)
				// The header name's is recased.
				if strings.Count(strings.ToLower(got), strings.ToLower(ph(name))) != 7 {
					t.Errorf("%s %s, sent %s's placeholder: the sandbox does not see it in each of 7 places:\n%s", order[0].Name, url[:5], name, got)
				}
				for _, rest := range []string{account, ":pw-", "pw-abcdefghij", "0123456789"} {
					if strings.Contains(got, rest) {
						t.Errorf("%s %s, sent %s's placeholder: the sandbox sees %q:\n%s", order[0].Name, url[:5], name, rest, got)
					}
				}
			}
		}
	}
}

// TestScrubberOverlapping: in a stream cut anywhere, a value another holds
// is not replaced before the longer one could be seen.
func TestScrubberOverlapping(t *testing.T) {
	p := &Proxy{Secrets: []Secret{{Value: "id-42", Placeholder: "<id>"}, {Value: "id-42:pw", Placeholder: "<full>"}, {Value: "2:p", Placeholder: "<mid>"}}}
	in := "a id-42:pw id-42 id-42:p id-42:pw"
	want := "a <full> <id> <id>:p <full>"
	for size := 1; size <= len(in); size++ {
		if got := scrubInPieces(p, in, size); got != want {
			t.Errorf("pieces of %d: %q, want %q", size, got, want)
		}
	}
}

// routingFields are request fields a front end may route by in place of
// Host, as the program may set them.
var routingFields = []string{"X-Forwarded-Host", "X-Forwarded-Server", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Port",
	"Forwarded", "X-Original-Host", "X-Original-URL", "X-Rewrite-URL", "X-Host", "X-HTTP-Host-Override", "x_forwarded_host"}

// TestSecretRoutingHeadersDropped: a request to a secret's host reaches it
// with its Host forced and none of the fields by which a front end could
// route it, and its value, elsewhere; to other hosts they pass.
func TestSecretRoutingHeadersDropped(t *testing.T) {
	ca := newUpstreamCA(t)
	got := make(chan http.Header, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Host", r.Host)
		got <- r.Header
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "api.secret.test")}}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "other.allowed.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"})
	c := sandboxClient(tpx)
	for _, url := range []string{"http://api.secret.test:" + port(t, plain.URL) + "/", "https://api.secret.test:" + port(t, tlsSrv.URL) + "/",
		"http://other.allowed.test:" + port(t, plain.URL) + "/"} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+testPlaceholder)
		if strings.Contains(url, "other") {
			req.Header.Del("Authorization")
		}
		for _, k := range routingFields {
			req.Header[k] = []string{"tenant.evil.test"}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		seen := <-got
		secret := !strings.Contains(url, "other")
		for _, k := range routingFields {
			if v, ok := seen[textproto.CanonicalMIMEHeaderKey(k)]; ok == secret {
				t.Errorf("%s: got %s %q; want it only where no secret goes", url, k, v)
			}
		}
		if secret && (seen.Get("Authorization") != "Bearer "+testValue || !strings.HasPrefix(seen.Get("Host"), "api.secret.test:")) {
			t.Errorf("%s: got Authorization %q, Host %q", url, seen.Get("Authorization"), seen.Get("Host"))
		}
	}
}

// TestScrubbedHeaderBounded: a response header that would outgrow
// maxHeaderBytes once a short value echoed in it many times is replaced
// by its longer placeholder is refused with 502, not held.
func TestScrubbedHeaderBounded(t *testing.T) {
	ca := newUpstreamCA(t)
	tpx := secretProxy(t, ca, []string{"api.secret.test:1-65535", "127.0.0.1:1-65535"}, []string{"api.secret.test:1-65535"},
		withSecrets(t, Secret{Name: "API_KEY", Placeholder: testPlaceholder, Value: "k3y"}))
	c := sandboxClient(tpx)
	for n, want := range map[int]int{5: 200, 100: 502} {
		for _, url := range hostileURLs(t, ca, func(auth string) string {
			return "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Echo: "+strings.Repeat(auth+",", n)+"\r\n", 20) + "Content-Length: 0\r\n\r\n"
		}) {
			resp, _ := getWith(t, c, url, testPlaceholder)
			if resp.StatusCode != want || want == 200 && strings.Count(strings.Join(resp.Header.Values("X-Echo"), ""), testPlaceholder) != 20*n {
				t.Errorf("%s, %d echoes a line: %d %q, want %d", url[:5], n, resp.StatusCode, resp.Header.Values("X-Echo"), want)
			}
		}
	}
	refused := 0
	for _, r := range waitReport(t, tpx.Proxy, 6) {
		if strings.Contains(r.Error, "once the secrets' values in it are replaced") {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d records say the scrubbed header was too large, want 2: %+v", refused, tpx.Report())
	}
}

// BenchmarkScrubber measures scrubbing 32 KiB pieces of a body: one
// that echoes a value every KiB, and one dense with a short value while
// a second value never occurs (a scrubber that rescans the rest for it
// at each match is quadratic there).
func BenchmarkScrubber(b *testing.B) {
	secrets := []Secret{{Value: testValue, Placeholder: testPlaceholder}, {Value: "id", Placeholder: "sandbox-secret-ID-00112233445566778899aabbccddeeff"}}
	for name, piece := range map[string][]byte{
		"echo":  bytes.Repeat([]byte(strings.Repeat("x", 1024-len(testValue))+testValue), 32),
		"dense": bytes.Repeat([]byte("id"), 16<<10),
	} {
		b.Run(name, func(b *testing.B) {
			sc := (&Proxy{Secrets: secrets}).newScrubber()
			discard := func([]byte) error { return nil }
			b.SetBytes(int64(len(piece)))
			for b.Loop() {
				sc.write(piece, discard)
			}
		})
	}
}
