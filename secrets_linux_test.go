//go:build linux

package sandbox

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
)

// Secrets the program never holds: a test server on loopback gets the
// real value from a program that only had a placeholder, over HTTP and
// HTTPS, while nothing the program can look at holds the value.

// secretLike makes a value of the shape the program searches for,
// "sk-live-" and 32 hex digits; each call a new one.
func secretLike(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "sk-live-" + hex.EncodeToString(b[:])
}

// echoSeen is what a test server was sent: each request's Authorization,
// and its whole header.
type echoSeen struct {
	mu      sync.Mutex
	auth    []string
	headers []http.Header
}

func (e *echoSeen) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.auth)
}

// secretEcho serves on 127.0.0.2, over TLS with cert if set: it answers
// with every header it got, in the body and as X-Echo-<name> headers, and
// the Authorization also in Location, Set-Cookie and WWW-Authenticate;
// and it records the Authorization header and the whole header. As a
// hostile or careless server would, it answers /gzip with that body
// gzipped, with a Content-Encoding line for each "ce" in the query, and
// /malformed with the Authorization's credentials as the status code of a
// malformed status line. It returns the port.
func secretEcho(t *testing.T, cert *tls.Certificate, seen *echoSeen) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2, the test's upstream address: %v", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.mu.Lock()
			seen.auth = append(seen.auth, r.Header.Get("Authorization"))
			seen.headers = append(seen.headers, r.Header.Clone())
			seen.mu.Unlock()
			auth := r.Header.Get("Authorization")
			if r.URL.Path == "/malformed" {
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					io.WriteString(c, "HTTP/1.1 "+strings.TrimPrefix(auth, "Bearer ")+" OK\r\n\r\n")
					c.Close()
				}
				return
			}
			var body strings.Builder
			for k, vs := range r.Header {
				for _, v := range vs {
					w.Header().Add("X-Echo-"+k, v)
					fmt.Fprintf(&body, "%s: %s\n", k, v)
				}
			}
			if auth != "" {
				w.Header().Set("Location", "/login?next="+auth)
				w.Header().Set("Set-Cookie", "s="+strings.TrimPrefix(auth, "Bearer ")+"; Path=/")
				w.Header().Set("WWW-Authenticate", auth+` realm="echo"`)
			}
			if r.URL.Path == "/gzip" {
				w.Header()["Content-Encoding"] = r.URL.Query()["ce"]
				zw := gzip.NewWriter(w)
				io.WriteString(zw, body.String())
				zw.Close()
				return
			}
			io.WriteString(w, body.String())
		}),
		ErrorLog: log.New(io.Discard, "", 0), // clients that refuse our certificates are what some tests want
	}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// secretSetup is an *Egress setup with two secrets: API_KEY bound to
// api.secret.test's plain and TLS servers, SECOND_KEY to
// second.secret.test's; other.test is an allowed host no secret is bound
// to, plain and over TLS.
type secretSetup struct {
	opts                        Options
	value, second               string
	ca                          *testCA
	plain, tls, tls2            string // ports of api.secret.test (plain, TLS) and second.secret.test
	other, otherTLS             string // ports of other.test (plain, TLS)
	apiSeen, secondSeen, oSeen  *echoSeen
	otherLeaf                   []byte // the DER of other.test's certificate
	apiPlainURL, apiTLSURL      string
	secondTLSURL, otherPlainURL string
}

func newSecretSetup(t *testing.T) *secretSetup {
	t.Helper()
	ss := &secretSetup{value: secretLike(t), second: secretLike(t), ca: newTestCA(t, "upstream test CA"),
		apiSeen: &echoSeen{}, secondSeen: &echoSeen{}, oSeen: &echoSeen{}}
	api, second, other := ss.ca.serverCert(t, "api.secret.test"), ss.ca.serverCert(t, "second.secret.test"), ss.ca.serverCert(t, "other.test")
	ss.otherLeaf = other.Certificate[0]
	ss.plain, ss.tls = secretEcho(t, nil, ss.apiSeen), secretEcho(t, &api, ss.apiSeen)
	ss.tls2 = secretEcho(t, &second, ss.secondSeen)
	ss.other, ss.otherTLS = secretEcho(t, nil, ss.oSeen), secretEcho(t, &other, ss.oSeen)
	ss.apiPlainURL = "http://api.secret.test:" + ss.plain + "/"
	ss.apiTLSURL = "https://api.secret.test:" + ss.tls + "/"
	ss.secondTLSURL = "https://second.secret.test:" + ss.tls2 + "/"
	ss.otherPlainURL = "http://other.test:" + ss.other + "/"
	ss.opts = Options{
		Network: &Egress{Allow: []string{"api.secret.test:" + ss.plain, "api.secret.test:" + ss.tls, "second.secret.test:" + ss.tls2,
			"other.test:" + ss.other, "other.test:" + ss.otherTLS, "127.0.0.2:1-65535"}, Resolver: &fakeResolver{addrs: map[string][]string{
			"api.secret.test": {"127.0.0.2"}, "second.secret.test": {"127.0.0.2"}, "other.test": {"127.0.0.2"}}}, Secrets: []Secret{
			{Name: "API_KEY", Value: ss.value, Hosts: []string{"api.secret.test:" + ss.plain, "api.secret.test:" + ss.tls}},
			{Name: "SECOND_KEY", Value: ss.second, Hosts: []string{"second.secret.test:" + ss.tls2}},
		}},
		TrustedCAs: ss.ca.pem,
	}
	return ss
}

// noValue fails if res holds v anywhere, as it is or escaped
// (valueForms): output, errors, connections.
func noValue(t *testing.T, res *Result, values ...string) {
	t.Helper()
	all := fmt.Sprintf("%s\n%s\n%+v", res.Stdout, res.Stderr, *res)
	for _, v := range values {
		for _, f := range valueForms(v) {
			if strings.Contains(all, f) {
				t.Errorf("the Result holds a secret's value as %q:\n%s", f, all)
			}
		}
	}
}

// valueForms are the forms in which v may stand in a text: as it is, as
// Go's %q and %+q and JSON write it, and as a JSON log writes a text that
// holds one of those.
func valueForms(v string) []string {
	inner := func(q string) string { return q[1 : len(q)-1] }
	j, _ := json.Marshal(v)
	forms := []string{v, inner(strconv.Quote(v)), inner(strconv.QuoteToASCII(v)), inner(string(j))}
	for _, f := range forms[:3] {
		jf, _ := json.Marshal(f)
		forms = append(forms, inner(string(jf)))
	}
	return forms
}

func TestSecretReachesServer(t *testing.T) {
	requireSandbox(t)
	ss := newSecretSetup(t)
	s := newTest(t, ss.opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type client struct {
		name, needs string
		cmd         func(url string) *Cmd
	}
	clients := []client{
		{"curl", "curl", func(url string) *Cmd {
			return Command("/bin/sh", "-c", `curl -sS -D - -H "Authorization: Bearer $API_KEY" `+url)
		}},
		{"python urllib", "python3", func(url string) *Cmd {
			return Command("/usr/bin/python3", "-c", `
import os, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["API_KEY"]})
with urllib.request.urlopen(req, timeout=30) as r:
    sys.stdout.write("".join("%s: %s\n" % kv for kv in r.getheaders()) + "\n" + r.read().decode())
`, url)
		}},
	}
	var placeholder string
	for _, c := range clients {
		for _, url := range []string{ss.apiPlainURL, ss.apiTLSURL} {
			t.Run(c.name+" "+url[:strings.Index(url, ":")], func(t *testing.T) {
				if !installedUnderUsr(c.needs) {
					t.Skipf("%s is not installed under /usr/bin or /bin", c.needs)
				}
				before := len(ss.apiSeen.list())
				res, err := s.Run(ctx, c.cmd(url))
				if err != nil {
					t.Fatal(err)
				}
				noValue(t, res, ss.value, ss.second)
				if !res.Success() {
					t.Fatalf("%v\nstdout: %s\nstderr: %s\nconnections: %+v", res.Err(), res.Stdout, res.Stderr, res.Connections)
				}
				seen := ss.apiSeen.list()[before:]
				if len(seen) != 1 || seen[0] != "Bearer "+ss.value {
					t.Errorf("the server got %q, want one request with the value", seen)
				}
				// What came back names the placeholder, in the
				// echoed header and in the body.
				out := string(res.Stdout)
				for _, want := range []string{"X-Echo-Authorization: Bearer " + placeholderPrefix + "API_KEY-", "Authorization: Bearer " + placeholderPrefix + "API_KEY-"} {
					if !strings.Contains(out, want) {
						t.Errorf("the response does not show %q:\n%s", want, out)
					}
				}
				i := strings.Index(out, placeholderPrefix+"API_KEY-")
				if i >= 0 {
					p := out[i : i+len(placeholderPrefix+"API_KEY-")+32]
					if placeholder != "" && p != placeholder {
						t.Errorf("placeholder %s, and %s in an earlier run of the same Sandbox", p, placeholder)
					}
					placeholder = p
				}
			})
		}
	}
}

// secretSearch is a program that looks for strings shaped like the test's
// secrets ("sk-live-" and 32 hex digits) everywhere it can: the responses
// to the requests given as arguments (sent with the placeholder and a
// decoy of the same shape), its environment, its own memory, and every
// file it can read but the host's system directories. It prints each
// string found and where.
const secretSearch = `
import os, re, sys, urllib.request
pat = re.compile(rb"sk-" + rb"live-[0-9a-f]{32}")
found = {}
def scan(where, data):
    for m in pat.findall(data):
        found.setdefault(m.decode(), set()).add(where)
for url in sys.argv[1:]:
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["API_KEY"], "X-Decoy": os.environ["DECOY"]})
    with urllib.request.urlopen(req, timeout=30) as r:
        got = "".join("%s: %s\n" % kv for kv in r.getheaders()).encode() + r.read()
    scan("response", got)
    print(url, got.decode().replace("\n", " | "))
scan("environ", open("/proc/self/environ", "rb").read())
scan("env", "\n".join(k + "=" + v for k, v in os.environ.items()).encode())
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        f = line.split()
        if "r" not in f[1] or (len(f) > 5 and f[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
            continue
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        try:
            mem.seek(lo)
            scan("memory", mem.read(hi - lo))
        except (OSError, ValueError, OverflowError):
            pass
files = 0
for root, dirs, names in os.walk("/"):
    if root == "/":
        # The host's /usr (and /bin, /lib, links into it) is bound
        # read-only as it is on the host; nothing of a run is in it.
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr")]
    for n in names:
        p = os.path.join(root, n)
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                scan("file " + p, f.read(64 << 20))
            files += 1
        except OSError:
            pass
print("files read:", files)
for k, v in sorted(found.items()):
    print("FOUND", k, " ".join(sorted(v)))
`

func TestSecretNotInSandbox(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	ss := newSecretSetup(t)
	s := newTest(t, ss.opts)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// The decoy, of the secrets' shape, shows that the search finds
	// such a string in each place it looks: the environment, memory,
	// a file and a response.
	decoy := secretLike(t)
	if err := s.WriteFile("decoy.txt", []byte(decoy), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := Command("/usr/bin/python3", "-c", secretSearch, ss.apiPlainURL, ss.apiTLSURL)
	cmd.Env = []string{"DECOY=" + decoy}
	res, err := s.Run(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	noValue(t, res, ss.value, ss.second)
	if !res.Success() {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", res.Err(), res.Stdout, res.Stderr)
	}
	out := string(res.Stdout)
	t.Logf("search:\n%s", out)
	if want := "FOUND " + decoy + " env environ file /workspace/decoy.txt memory response"; !strings.Contains(out, want) {
		t.Errorf("the search did not find the decoy everywhere it looks: want %q", want)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "FOUND ") && !strings.HasPrefix(line, "FOUND "+decoy) {
			t.Errorf("the program found a secret-shaped string that is not the decoy: %s", line)
		}
	}
	if n := len(ss.apiSeen.list()); n != 2 {
		t.Errorf("the server got %d requests, want 2", n)
	}
	for _, a := range ss.apiSeen.list() {
		if a != "Bearer "+ss.value {
			t.Errorf("the server got %q, want the value", a)
		}
	}
}

func TestSecretRefusedElsewhere(t *testing.T) {
	requireSandbox(t)
	if !installedUnderUsr("curl") {
		t.Skip("curl is not installed under /usr/bin or /bin")
	}
	ss := newSecretSetup(t)
	// The placeholder of API_KEY, to other.test over plain HTTP and to
	// second.secret.test, where the proxy terminates TLS for SECOND_KEY;
	// and SECOND_KEY's, where it belongs.
	script := `for u in "$@"; do curl -sS -o /dev/null -w "%{http_code}\n" -H "Authorization: Bearer $API_KEY" "$u"; done
curl -sS -o /dev/null -w "%{http_code}\n" -H "Authorization: Bearer $SECOND_KEY" ` + ss.secondTLSURL
	res := run(t, ss.opts, Command("/bin/sh", "-c", script, "sh", ss.otherPlainURL, ss.secondTLSURL))
	noValue(t, res, ss.value, ss.second)
	if got := string(res.Stdout); got != "403\n403\n200\n" {
		t.Errorf("statuses %q, want 403 for API_KEY's placeholder to other.test and second.secret.test, 200 for SECOND_KEY's\nstderr: %s", got, res.Stderr)
	}
	if got := ss.oSeen.list(); len(got) != 0 {
		t.Errorf("other.test got %q; a request with a placeholder must not reach it", got)
	}
	if got := ss.secondSeen.list(); len(got) != 1 || got[0] != "Bearer "+ss.second {
		t.Errorf("second.secret.test got %q, want SECOND_KEY's value once", got)
	}
	var refused []string
	for _, c := range res.Connections {
		if c.Status == 403 && !c.Allowed && strings.Contains(c.Reason, "placeholder of secret API_KEY") {
			refused = append(refused, c.Host)
		}
	}
	if !slices.Equal(refused, []string{"other.test", "second.secret.test"}) {
		t.Errorf("refusals naming API_KEY for %q, want other.test and second.secret.test: %+v", refused, res.Connections)
	}
}

// peerCert is a program that opens a tunnel to argv[1] (host:port) through
// the proxy, makes a TLS handshake asking for argv[2], and prints the
// SHA-256 of the certificate it was shown, or "refused" and why.
const peerCert = `
import hashlib, socket, ssl, sys
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
head = b""
while not head.endswith(b"\r\n\r\n"):
    head += s.recv(1)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    t = ctx.wrap_socket(s, server_hostname=sys.argv[2])
    print(hashlib.sha256(t.getpeercert(True)).hexdigest())
except (ssl.SSLError, OSError) as e:
    print("refused", e)
`

// sandboxAuthority returns the last certificate of the trust bundle inside
// a run of s: the proxy's authority.
func sandboxAuthority(t *testing.T, s *Sandbox) *x509.Certificate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Command("/bin/cat", "/etc/ssl/certs/ca-certificates.crt"))
	if err != nil || !res.Success() {
		t.Fatalf("cat the bundle: %v %v %s", err, res.Err(), res.Stderr)
	}
	var last *pem.Block
	for rest := res.Stdout; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		last = b
	}
	if last == nil {
		t.Fatal("no certificate in the bundle")
	}
	cert, err := x509.ParseCertificate(last.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestSecretAuthority(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	start := time.Now()
	ss := newSecretSetup(t)
	s := newTest(t, ss.opts)
	ca := sandboxAuthority(t, s)
	if !ca.IsCA || ca.PublicKeyAlgorithm != x509.ECDSA || !ca.PermittedDNSDomainsCritical ||
		!slices.Equal(ca.PermittedDNSDomains, []string{"api.secret.test", "second.secret.test"}) || len(ca.ExcludedIPRanges) != 2 {
		t.Errorf("the authority in the sandbox's trust store: CA %v key %v critical %v permitted %q excluded %v",
			ca.IsCA, ca.PublicKeyAlgorithm, ca.PermittedDNSDomainsCritical, ca.PermittedDNSDomains, ca.ExcludedIPRanges)
	}
	if life := ca.NotAfter.Sub(ca.NotBefore); life > 8*24*time.Hour {
		t.Errorf("the authority is valid for %v", life)
	}
	if again := sandboxAuthority(t, s); !again.Equal(ca) {
		t.Error("a second run of the Sandbox has another authority")
	}
	other := newTest(t, ss.opts)
	if oca := sandboxAuthority(t, other); bytes.Equal(oca.RawSubjectPublicKeyInfo, ca.RawSubjectPublicKeyInfo) {
		t.Error("two Sandboxes share an authority's key")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := Command("/bin/sh", "-c", `for t in "$@"; do /usr/bin/python3 -c "$0" $t; done`, peerCert,
		"other.test:"+ss.otherTLS+" other.test",
		"api.secret.test:"+ss.tls+" api.secret.test",
		"api.secret.test:"+ss.tls+" www.bank.test")
	res, err := s.Run(ctx, cmd)
	if err != nil || !res.Success() {
		t.Fatalf("%v %v\n%s", err, res.Err(), res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s", res.Stdout)
	}
	// A host no secret is bound to: the server's own certificate.
	if sum := sha256.Sum256(ss.otherLeaf); lines[0] != hex.EncodeToString(sum[:]) {
		t.Errorf("the tunnel to other.test showed certificate %s, not the server's own", lines[0])
	}
	// A secret host: a leaf of the authority, for that name.
	if strings.HasPrefix(lines[1], "refused") {
		t.Errorf("no certificate for api.secret.test: %s", lines[1])
	}
	// Another name asked for inside that tunnel: nothing.
	if !strings.HasPrefix(lines[2], "refused") {
		t.Errorf("a handshake for www.bank.test inside a tunnel to api.secret.test got certificate %s", lines[2])
	}

	// After Close, the authority's key is gone, and no file on the host
	// made during the test holds its certificate.
	s.secrets.mu.Lock()
	auth := s.secrets.auth
	s.secrets.mu.Unlock()
	s.Close()
	if auth == nil || !auth.Closed() {
		t.Error("the authority's key outlived Close")
	}
	if _, err := s.Run(ctx, Command("/bin/true")); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	filepath.WalkDir(os.TempDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 8<<20 || fi.ModTime().Before(start) {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, ca.Raw[:64]) || bytes.Contains(b, ca.Raw[len(ca.Raw)-64:])) {
			t.Errorf("%s holds the authority's certificate", p)
		}
		return nil
	})
}

// TestSecretLive: a live sandbox's calls get their secrets through the
// session's one proxy, with one authority, gone with Close.
func TestSecretLive(t *testing.T) {
	requireSandbox(t)
	if !installedUnderUsr("curl") {
		t.Skip("curl is not installed under /usr/bin or /bin")
	}
	ss := newSecretSetup(t)
	opts := ss.opts
	opts.Live = &Live{}
	serving := proxiesServing()
	s := newTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 2 {
		res, err := s.Run(ctx, Command("/bin/sh", "-c", `curl -sS -H "Authorization: Bearer $API_KEY" `+ss.apiTLSURL))
		if err != nil {
			t.Fatal(err)
		}
		noValue(t, res, ss.value)
		if !res.Success() || !strings.Contains(string(res.Stdout), "Authorization: Bearer "+placeholderPrefix+"API_KEY-") {
			t.Errorf("call %d: %v\nstdout: %s\nstderr: %s", i, res.Err(), res.Stdout, res.Stderr)
		}
	}
	if got := ss.apiSeen.list(); len(got) != 2 || got[0] != "Bearer "+ss.value || got[1] != got[0] {
		t.Errorf("the server got %q, want the value twice", got)
	}
	if n := proxiesServing(); n != serving+1 {
		t.Errorf("%d proxies serve for the live sandbox, want its one", n-serving)
	}
	s.secrets.mu.Lock()
	auth := s.secrets.auth
	s.secrets.mu.Unlock()
	s.Close()
	if auth == nil || !auth.Closed() {
		t.Error("the live sandbox's authority outlived Close")
	}
	if !waitFor(func() bool { return proxiesServing() == serving }) {
		t.Errorf("the live sandbox's proxy still serves after Close")
	}
}

// proxiesServing counts the egress proxies this process serves.
func proxiesServing() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "egress.(*Proxy).Serve(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func TestSecretOptionsRefused(t *testing.T) {
	const value = "hunter2-the-value"
	base := func(mod func(o *Options, e *Egress)) Options {
		e := &Egress{Allow: []string{"api.example.com", "*.example.org:443"}, Secrets: []Secret{{Name: "API_KEY", Value: value, Hosts: []string{"api.example.com"}}}}
		o := Options{Network: e}
		mod(&o, e)
		return o
	}
	for _, tc := range []struct {
		name, option string
		mod          func(o *Options, e *Egress)
	}{
		{"empty name", "Options.Network (Egress.Secrets[0].Name)", func(o *Options, e *Egress) { e.Secrets[0].Name = "" }},
		{"bad name", "Options.Network (Egress.Secrets[0].Name)", func(o *Options, e *Egress) { e.Secrets[0].Name = "API-KEY" }},
		{"digit first", "Options.Network (Egress.Secrets[0].Name)", func(o *Options, e *Egress) { e.Secrets[0].Name = "1KEY" }},
		{"clashes with Env", "Options.Network (Egress.Secrets[0].Name)", func(o *Options, e *Egress) { o.Env = []string{"API_KEY=x"} }},
		{"empty value", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = "" }},
		{"CR in value", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = value + "\r" }},
		{"LF in value", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = value + "\nX: y" }},
		// A header loses these: the server would get, and could echo,
		// a shorter value than the one scrubbed.
		{"leading space", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = " " + value }},
		{"trailing tab", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = value + "\t" }},
		{"control character", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = value + "\x01x" }},
		{"DEL", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = value + "\x7fx" }},
		{"long value", "Options.Network (Egress.Secrets[0].Value)", func(o *Options, e *Egress) { e.Secrets[0].Value = strings.Repeat(value, 1000) }},
		{"no hosts", "Options.Network (Egress.Secrets[0].Hosts)", func(o *Options, e *Egress) { e.Secrets[0].Hosts = nil }},
		{"bad host", "Options.Network (Egress.Secrets[0].Hosts[1])", func(o *Options, e *Egress) { e.Secrets[0].Hosts = append(e.Secrets[0].Hosts, "a:0") }},
		{"host not allowed", "Options.Network (Egress.Secrets[0].Hosts)", func(o *Options, e *Egress) { e.Secrets[0].Hosts = []string{"api.example.net"} }},
		{"port not allowed", "Options.Network (Egress.Secrets[0].Hosts)", func(o *Options, e *Egress) { e.Secrets[0].Hosts = []string{"api.example.com:8443"} }},
		{"wider wildcard", "Options.Network (Egress.Secrets[0].Hosts)", func(o *Options, e *Egress) { e.Secrets[0].Hosts = []string{"*.example.com"} }},
		{"address", "Options.Network (Egress.Secrets[0].Hosts)", func(o *Options, e *Egress) {
			e.Allow = append(e.Allow, "10.0.0.0/8")
			e.Secrets[0].Hosts = []string{"10.1.2.3"}
		}},
		{"duplicate", "Options.Network (Egress.Secrets[1].Name)", func(o *Options, e *Egress) { e.Secrets = append(e.Secrets, e.Secrets[0]) }},
	} {
		err := New(base(tc.mod)).Err()
		oe, ok := errors.AsType[*OptionError](err)
		if !ok || !errors.Is(err, ErrInvalidOption) || oe.Option != tc.option {
			t.Errorf("%s: %v, want an OptionError on %s", tc.name, err, tc.option)
			continue
		}
		if strings.Contains(err.Error(), value) {
			t.Errorf("%s: the error holds the value: %v", tc.name, err)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// What a header field carries as it is is allowed.
	for _, v := range []string{"a\tb", `"q\`, "\xff\xfe", "id:pass word"} {
		if err := New(base(func(o *Options, e *Egress) { e.Secrets[0].Value = v })).Err(); err != nil {
			t.Errorf("value %q: %v", v, err)
		}
	}
	for name, hosts := range map[string][]string{"exact": {"api.example.com:80"}, "under a wildcard": {"x.example.org:443", "*.y.example.org:443"}} {
		if err := New(base(func(o *Options, e *Egress) { e.Secrets[0].Hosts = hosts })).Err(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Cmd.Env may not set a secret's variable.
	s := New(base(func(o *Options, e *Egress) {}))
	defer s.Close()
	cmd := Command("/bin/true")
	cmd.Env = []string{"API_KEY=mine"}
	if _, err := s.Run(context.Background(), cmd); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Cmd.Env setting a secret's variable: %v", err)
	}
}

// TestSecretAuthorityRenewed: the placeholders last as long as the
// Sandbox; a Sandbox that is not live makes a new authority for a run
// when its own has less than a day left, while a live one keeps its own.
func TestSecretAuthorityRenewed(t *testing.T) {
	o := Options{Network: &Egress{Allow: []string{"api.example.com"}, Secrets: []Secret{{Name: "API_KEY", Value: "v", Hosts: []string{"api.example.com"}}}}}
	r := resolve(o)
	rules, err := r.checkNetwork()
	if err != nil {
		t.Fatal(err)
	}
	ss, err := r.checkSecrets(rules)
	if err != nil {
		t.Fatal(err)
	}
	runOnce := func(live bool) runSecrets {
		t.Helper()
		rs, err := ss.forRun(r.config(Command("true"), nil, newRootView(&r, "", nil)), Command("true"), live, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	first := runOnce(false)
	if d := time.Until(first.auth.Expires()); d < authorityLifetime-time.Minute || d > authorityLifetime {
		t.Errorf("a new authority ends in %v", d)
	}
	if again := runOnce(false); again.auth != first.auth || again.secrets[0].Placeholder != first.secrets[0].Placeholder {
		t.Error("a second run got another authority or placeholder")
	}
	// One that ends within a day.
	old, err := egressAuthority(first, authorityRenew-time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ss.auth = old
	if live := runOnce(true); live.auth != old {
		t.Error("a live sandbox's authority was replaced")
	}
	renewed := runOnce(false)
	if renewed.auth == old || renewed.secrets[0].Placeholder != first.secrets[0].Placeholder {
		t.Errorf("a run met an authority ending within a day (renewed %v), or the placeholder changed", renewed.auth != old)
	}
}

// egressAuthority makes an authority for rs's secrets that ends in d.
func egressAuthority(rs runSecrets, d time.Duration) (*egress.Authority, error) {
	return egress.NewAuthority(rs.secrets, d)
}

// lockedBuffer is a bytes.Buffer safe for a handler's goroutine and the
// test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecretNotInAuditTrail: the audit trail records a secret's refusal
// by its name, and holds its value nowhere.
func TestSecretNotInAuditTrail(t *testing.T) {
	requireSandbox(t)
	if !installedUnderUsr("curl") {
		t.Skip("curl is not installed under /usr/bin or /bin")
	}
	ss := newSecretSetup(t)
	var trail lockedBuffer
	opts := ss.opts
	opts.Audit = &Audit{Handler: slog.NewJSONHandler(&trail, nil)}
	s := newTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script := `for u in "$@"; do curl -sS -o /dev/null -w "%{http_code}\n" -H "Authorization: Bearer $API_KEY" "$u"; done`
	res, err := s.Run(ctx, Command("/bin/sh", "-c", script, "sh", ss.apiTLSURL, ss.otherPlainURL))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "200\n403\n" {
		t.Errorf("statuses %q, want 200 to the secret's host and 403 elsewhere; stderr: %s", got, res.Stderr)
	}
	s.Close()
	out := trail.String()
	if strings.Contains(out, ss.value) {
		t.Errorf("the audit trail holds the value:\n%s", out)
	}
	if !strings.Contains(out, "placeholder of secret API_KEY") {
		t.Errorf("the audit trail does not name the refused secret:\n%s", out)
	}
}

// hostileClient asks each base URL given for what secretEcho answers as
// a hostile server would, and prints each response: status, header, body
// and the body gunzipped where it is gzip, as a program would get a value
// out of a compressed echo.
const hostileClient = `
import gzip, os, sys, urllib.request, urllib.error
out = sys.stdout.buffer
def get(url, key, headers={}):
    h = {"Authorization": "Bearer " + os.environ[key]}
    h.update(headers)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=30) as r:
            status, head, body = r.status, r.getheaders(), r.read()
    except urllib.error.HTTPError as e:
        status, head, body = e.code, e.headers.items(), e.read()
    try:
        body += b"\n" + gzip.decompress(body)
    except Exception:
        pass
    out.write(("STATUS %s %d\n" % (url, status)).encode())
    out.write("".join("%s: %s\n" % kv for kv in head).encode("utf-8", "surrogateescape") + body + b"\n")
for base in sys.argv[1:]:
    for q in ("ce=identity&ce=gzip", "ce=&ce=gzip", "ce=identity,+gzip", "ce=Identity&ce=GZIP"):
        get(base + "gzip?" + q, "API_KEY")
    get(base + "echo", "API_KEY", {"X-Forwarded-Host": "tenant.evil.test", "Forwarded": "host=tenant.evil.test",
        "X-Original-Host": "tenant.evil.test"})
    get(base + "malformed", "AWKWARD")
`

// TestSecretHostileServer: a secret's host that answers as a hostile or
// careless server would gets no value to the program, nor into the Result
// or the audit trail in any form, raw or escaped: a gzipped echo under
// Content-Encoding lines identity (or empty) then gzip, or a list of them,
// is refused; an echo of a value that holds another secret's (an account
// id, and more after it) shows the program only the longer's placeholder;
// a malformed answer that quotes a value with a quote, a backslash, a tab
// and bytes that are not UTF-8 is recorded with its placeholder. And the
// fields by which a front end could route the request elsewhere than its
// Host do not reach the server.
func TestSecretHostileServer(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	ss := newSecretSetup(t)
	opts := ss.opts
	e := *opts.Network.(*Egress)
	hosts := e.Secrets[0].Hosts
	account := ss.value[:20] // "sk-live-" and 12 hex digits: API_KEY's value begins with it
	rest := ss.value[20:]
	awkward := `sk-"quoted\back` + "\tslash\xff\xfe-" + hex.EncodeToString([]byte(rest))
	e.Secrets = append([]Secret{{Name: "ACCOUNT", Value: account, Hosts: hosts}}, e.Secrets...)
	e.Secrets = append(e.Secrets, Secret{Name: "AWKWARD", Value: awkward, Hosts: hosts})
	opts.Network = &e
	var trail lockedBuffer
	opts.Audit = &Audit{Handler: slog.NewJSONHandler(&trail, nil)}
	s := newTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Command("/usr/bin/python3", "-c", hostileClient, ss.apiPlainURL, ss.apiTLSURL))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	out := string(res.Stdout)
	if !res.Success() {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", res.Err(), out, res.Stderr)
	}
	secrets := []string{ss.value, rest, awkward, ss.second}
	noValue(t, res, secrets...)
	for _, base := range []string{ss.apiPlainURL, ss.apiTLSURL} {
		for _, q := range []string{"ce=identity&ce=gzip", "ce=&ce=gzip", "ce=identity,+gzip", "ce=Identity&ce=GZIP"} {
			if want := "STATUS " + base + "gzip?" + q + " 502\n"; !strings.Contains(out, want) {
				t.Errorf("no %q: a gzipped echo was not refused:\n%s", want, out)
			}
		}
		if want := "STATUS " + base + "malformed 502\n"; !strings.Contains(out, want) {
			t.Errorf("no %q:\n%s", want, out)
		}
	}
	// The echo shows API_KEY's placeholder whole, ACCOUNT's nowhere.
	if n := strings.Count(out, placeholderPrefix+"API_KEY-"); n < 2*5 || strings.Contains(out, placeholderPrefix+"ACCOUNT-") {
		t.Errorf("the echoes show API_KEY's placeholder %d times (want it in X-Echo-Authorization, Location, Set-Cookie, WWW-Authenticate and the body of each), or ACCOUNT's:\n%s", n, out)
	}
	var echoed int
	ss.apiSeen.mu.Lock()
	defer ss.apiSeen.mu.Unlock()
	for _, h := range ss.apiSeen.headers {
		for _, k := range []string{"X-Forwarded-Host", "Forwarded", "X-Original-Host"} {
			if v := h.Values(k); len(v) > 0 {
				t.Errorf("the secret's host got %s %q from the program", k, v)
			}
		}
		if h.Get("Authorization") == "Bearer "+ss.value {
			echoed++
		}
	}
	if echoed != 2*5 {
		t.Errorf("the server got API_KEY's value %d times, want %d", echoed, 2*5)
	}
	quoted := 0
	for _, c := range res.Connections {
		if strings.Contains(c.Error, "malformed") && strings.Contains(c.Error, placeholderPrefix+"AWKWARD-") {
			quoted++
		}
	}
	if quoted != 2 {
		t.Errorf("%d records quote the malformed answer with AWKWARD's placeholder, want 2: %+v", quoted, res.Connections)
	}
	// The audit trail, as written and as its attributes read back.
	log := trail.String()
	for _, v := range secrets {
		for _, f := range valueForms(v) {
			if strings.Contains(log, f) {
				t.Errorf("the audit trail holds a value as %q", f)
			}
		}
	}
	events := 0
	for line := range strings.Lines(log) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		events++
		var walk func(any)
		walk = func(x any) {
			switch x := x.(type) {
			case string:
				for _, v := range secrets {
					for _, f := range valueForms(v) {
						if strings.Contains(x, f) {
							t.Errorf("an audit attribute holds a value as %q: %q", f, x)
						}
					}
				}
			case map[string]any:
				for _, y := range x {
					walk(y)
				}
			case []any:
				for _, y := range x {
					walk(y)
				}
			}
		}
		walk(ev)
	}
	if events < len(res.Connections) {
		t.Errorf("the audit trail has %d events for %d connections", events, len(res.Connections))
	}
}
