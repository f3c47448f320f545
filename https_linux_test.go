//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// HTTPS from inside the sandbox, through the egress proxy, verified
// against the host's trust store and Options.TrustedCAs.

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"sandbox tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverCert is a certificate for host signed by the CA.
func (ca *testCA) serverCert(t testing.TB, host string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}
}

// tlsServer serves "hello <client> over TLS" on 127.0.0.2 with cert, and
// the files of files, if set, beneath /files/ (a git repository for git's
// dumb HTTP protocol); it returns its port.
func tlsServer(t testing.TB, cert tls.Certificate, files string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2, the test's upstream address: %v", err)
	}
	fileServer := http.StripPrefix("/files/", http.FileServer(http.Dir(files)))
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if files != "" && strings.HasPrefix(r.URL.Path, "/files/") {
			fileServer.ServeHTTP(w, r)
			return
		}
		fmt.Fprintf(w, "hello %s over TLS\n", strings.TrimPrefix(r.URL.Path, "/"))
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Config.SetKeepAlivesEnabled(false)
	// Clients refusing the certificate are what some tests want.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// goHTTPSClient builds a static Go program that GETs its argument with
// net/http's defaults (the proxy from the environment, the system's
// roots) and prints the body, into a directory the sandbox's uid can read.
func goHTTPSClient(t *testing.T) (string, bool) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", false
	}
	dir := sharedTempDir(t)
	src := `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	res, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	defer res.Body.Close()
	io.Copy(os.Stdout, res.Body)
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, "gohttps"), "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the Go client: %v\n%s", err, out)
	}
	return filepath.Join(dir, "gohttps"), true
}

// nodeGet is a Node script that GETs https://HOST:PORT/PATH through the
// proxy (Node 20's https ignores HTTPS_PROXY) with Node's default
// verification, and prints the body or the error.
const nodeGet = `
const http = require('http'), https = require('https'), tls = require('tls');
const [host, port, path] = process.argv.slice(1);
const proxy = new URL(process.env.HTTPS_PROXY);
http.request({host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: host + ':' + port}).on('connect', (res, socket) => {
  if (res.statusCode !== 200) { console.log('error: proxy said', res.statusCode); process.exit(1); }
  https.get({host, port, path: '/' + path, createConnection: () => tls.connect({socket, servername: host})}, r => {
    r.setEncoding('utf8'); r.on('data', d => process.stdout.write(d));
  }).on('error', e => { console.log('error:', e.message); process.exit(1); });
}).on('error', e => { console.log('error:', e.message); process.exit(1); }).end();
`

func TestHTTPSWithTrustedCAs(t *testing.T) {
	requireSandbox(t)
	ca, rogue := newTestCA(t, "sandbox test CA"), newTestCA(t, "a CA nobody trusts")
	const name, rogueName = "tls.example.com", "rogue.example.com"
	repo := gitRepo(t)
	port := tlsServer(t, ca.serverCert(t, name), repo)
	roguePort := tlsServer(t, rogue.serverCert(t, rogueName), repo)
	resolver := &fakeResolver{addrs: map[string][]string{name: {"127.0.0.2"}, rogueName: {"127.0.0.2"}}}
	opts := Options{
		Network:    &Egress{Allow: []string{name + ":" + port, rogueName + ":" + roguePort, "127.0.0.2:1-65535"}, Resolver: resolver},
		TrustedCAs: ca.pem,
	}
	url := func(host, port, client string) string { return "https://" + host + ":" + port + "/" + client }

	type client struct {
		name, needs string
		cmd         func(host, port string) *Cmd
		want        string // in stdout, when not "over TLS"
	}
	shell := func(script string) *Cmd { return Command("/bin/sh", "-c", script) }
	clients := []client{
		{"curl", "curl", func(h, p string) *Cmd { return Command("curl", "-sS", url(h, p, "curl")) }, ""},
		{"wget", "wget", func(h, p string) *Cmd { return Command("wget", "-q", "-O", "-", url(h, p, "wget")) }, ""},
		{"python urllib", "python3", func(h, p string) *Cmd {
			return shell(`/usr/bin/python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("` + url(h, p, "urllib") + `").read().decode())'`)
		}, ""},
		{"python ssl default context", "python3", func(h, p string) *Cmd {
			return shell(`/usr/bin/python3 -c 'import ssl,urllib.request,sys; sys.stdout.write(urllib.request.urlopen("` + url(h, p, "ssl") +
				`", context=ssl.create_default_context()).read().decode())'`)
		}, ""},
		{"node", "node", func(h, p string) *Cmd { return Command("node", "-e", nodeGet, h, p, "node") }, ""},
	}
	if repo != "" {
		clients = append(clients, client{"git", "git", func(h, p string) *Cmd {
			return Command("git", "ls-remote", "https://"+h+":"+p+"/files/repo.git")
		}, "refs/heads/main"})
	}
	if goClient, ok := goHTTPSClient(t); ok {
		opts.Binds = append(opts.Binds, Bind{Source: goClient, Target: "/opt/gohttps"})
		clients = append(clients, client{"go", "", func(h, p string) *Cmd { return Command("/opt/gohttps", url(h, p, "go")) }, ""})
	} else {
		t.Log("no go tool on PATH: the Go client is not tried")
	}
	s := newTest(t, opts)
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			if c.needs != "" && !installedUnderUsr(c.needs) {
				t.Skipf("%s is not installed under /usr/bin or /bin", c.needs)
			}
			if c.needs != "" && busyboxApplet(c.needs) {
				t.Skipf("%s here is BusyBox's, which verifies no certificate against a store", c.needs)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := s.Run(ctx, c.cmd(name, port))
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == "" {
				want = "over TLS"
			}
			if !res.Success() || !strings.Contains(string(res.Stdout), want) {
				t.Errorf("%s to a server of the trusted CA: %v\nstdout: %s\nstderr: %s\nwant %q", c.name, res.Err(), res.Stdout, res.Stderr, want)
			}
			res, err = s.Run(ctx, c.cmd(rogueName, roguePort))
			if err != nil {
				t.Fatal(err)
			}
			if res.Success() || bytes.Contains(res.Stdout, []byte("over TLS")) || bytes.Contains(res.Stdout, []byte("refs/heads")) {
				t.Errorf("%s accepted a server of a CA the store does not hold:\nstdout: %s\nstderr: %s", c.name, res.Stdout, res.Stderr)
			}
			t.Logf("refused the rogue server: %s", firstLine(string(res.Stdout)+string(res.Stderr)))
		})
	}

	// The bundle inside is the host's, followed by the CA.
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	host, err := os.ReadFile(bundle)
	if err != nil {
		t.Skipf("the host has no %s: %v", bundle, err)
	}
	sum := sha256.Sum256(host)
	out := sh(t, opts, fmt.Sprintf("head -c %d %s | sha256sum; grep -c 'BEGIN CERTIFICATE' %s /usr/lib/ssl/cert.pem", len(host), bundle, bundle))
	nHost := bytes.Count(host, []byte("BEGIN CERTIFICATE"))
	want := fmt.Sprintf("%s  -\n%s:%d\n", hex.EncodeToString(sum[:]), bundle, nHost+1)
	if !strings.HasPrefix(out, want) {
		t.Errorf("inside:\n%s\nwant the host's bundle (%d certificates) and the test CA:\n%s", out, nHost, want)
	}
	// Without the option, the test CA's server is refused: the store is
	// the host's alone, and the host is unchanged.
	opts.TrustedCAs = nil
	res := run(t, opts, Command("curl", "-sS", url(name, port, "curl")))
	if res.Success() {
		t.Errorf("without TrustedCAs, curl accepted the test CA's server: %s", res.Stdout)
	}
	if again, _ := os.ReadFile(bundle); !bytes.Equal(again, host) {
		t.Errorf("the host's %s changed", bundle)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func TestTrustedCAsRefused(t *testing.T) {
	ca := newTestCA(t, "ok")
	junk := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("k")})
	for name, in := range map[string][]byte{
		"empty": {}, "text": []byte("hello\n"), "malformed": junk, "a key": key,
		"trailing junk": append(append([]byte{}, ca.pem...), "garbage"...),
		"good then bad": append(append([]byte{}, ca.pem...), junk...),
		"over 1 MiB":    bytes.Repeat(ca.pem, (1<<20)/len(ca.pem)+1),
	} {
		err := New(Options{TrustedCAs: in}).Err()
		oe, ok := errors.AsType[*OptionError](err)
		if !ok || oe.Option != "Options.TrustedCAs" {
			t.Errorf("%s: New = %v, want an OptionError on Options.TrustedCAs", name, err)
		}
	}
	comment := append([]byte("# our CA\n"), ca.pem...)
	if err := New(Options{TrustedCAs: comment}).Err(); err != nil {
		t.Errorf("a commented bundle: %v", err)
	}
}

// registryAccess is the allowlist for the host of rawURL, as this machine
// resolves it, or why it cannot be reached. The addresses the name
// resolves to are opened by CIDR entries of the test's own: the proxy
// refuses special ranges by default.
func registryAccess(t *testing.T, rawURL string) ([]string, string) {
	t.Helper()
	u, err := neturl.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Sprintf("no host in %q", rawURL)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, u.Hostname())
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Sprintf("%s does not resolve: %v", u.Hostname(), err)
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(addrs[0].IP.String(), port))
	if err != nil {
		return nil, fmt.Sprintf("%s is not reachable from this machine: %v", u.Host, err)
	}
	c.Close()
	rules := []string{u.Hostname() + ":" + port}
	for _, a := range addrs {
		bits := 32
		if a.IP.To4() == nil {
			bits = 128
		}
		rules = append(rules, fmt.Sprintf("%s/%d:%s", a.IP, bits, port))
		if bits == 128 {
			rules[len(rules)-1] = fmt.Sprintf("[%s/%d]:%s", a.IP, bits, port)
		}
	}
	return rules, ""
}

// Package managers fetch over HTTPS through the allowlist with the host's
// trust store and no TLS settings of the test's.
func TestPackageRegistries(t *testing.T) {
	requireSandbox(t)
	t.Run("npm", func(t *testing.T) {
		if !installedUnderUsr("npm") {
			t.Skip("npm is not installed under /usr/bin or /bin")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reg, err := exec.CommandContext(ctx, "npm", "config", "get", "registry").Output()
		if err != nil {
			t.Skipf("npm config get registry: %v", err)
		}
		rules, why := registryAccess(t, string(reg))
		if why != "" {
			t.Skip(why)
		}
		res := run(t, Options{Network: &Egress{Allow: rules}, Limits: Limits{Memory: 1 << 30}},
			Command("/bin/sh", "-c", "npm install --no-audit --no-fund --no-update-notifier --registry "+strings.TrimSpace(string(reg))+
				" is-number@7.0.0 && cat node_modules/is-number/package.json | grep '\"version\"'"))
		if !res.Success() || !strings.Contains(string(res.Stdout), `"version": "7.0.0"`) {
			t.Errorf("npm install: %v\nstdout: %s\nstderr: %s\nconnections: %+v", res.Err(), res.Stdout, res.Stderr, res.Connections)
		}
	})
	t.Run("go", func(t *testing.T) {
		goTool, err := exec.LookPath("go")
		if err != nil {
			t.Skip("no go tool on PATH")
		}
		if goTool, err = filepath.EvalSymlinks(goTool); err != nil || !strings.HasPrefix(goTool, "/usr/") {
			t.Skipf("the go tool (%s) is not under /usr, where the sandbox sees it", goTool)
		}
		out, err := exec.Command(goTool, "env", "GOPROXY", "GOSUMDB").Output()
		if err != nil {
			t.Skipf("go env: %v", err)
		}
		lines := strings.Fields(string(out))
		if len(lines) != 2 {
			t.Skipf("go env GOPROXY GOSUMDB: %q", out)
		}
		proxy, _, _ := strings.Cut(lines[0], ",")
		if !strings.HasPrefix(proxy, "https://") {
			t.Skipf("GOPROXY %q names no HTTPS proxy", lines[0])
		}
		rules, why := registryAccess(t, proxy)
		if why != "" {
			t.Skip(why)
		}
		// The go command reaches the checksum database through the
		// proxy where the proxy serves it, so the database's own host
		// is opened only if it can be reached.
		if sumdb := lines[1]; sumdb != "off" {
			host := strings.Fields(sumdb)[0]
			if more, why := registryAccess(t, "https://"+strings.TrimPrefix(host, "https://")); why == "" {
				rules = append(rules, more...)
			} else {
				t.Logf("checksum database: %s", why)
			}
		}
		res := run(t, Options{Network: &Egress{Allow: rules}, Limits: Limits{Memory: 1 << 30}},
			Command(goTool, "mod", "download", "-json", "rsc.io/quote@v1.5.2"))
		if !res.Success() || !strings.Contains(string(res.Stdout), `"Sum": "h1:w5fcysjrx7yqtD/aO+QwRjYZOKnaM9Uh2b40tElTs3Y="`) {
			t.Errorf("go mod download: %v\nstdout: %s\nstderr: %s\nconnections: %+v", res.Err(), res.Stdout, res.Stderr, res.Connections)
		}
	})
}

// gitRepo makes a bare git repository with one commit on main, ready for
// git's dumb HTTP protocol, in a directory beneath which it is at
// repo.git; "" if git is missing.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		return ""
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
		{"clone", "-q", "--bare", work, filepath.Join(dir, "repo.git")},
		{"-C", filepath.Join(dir, "repo.git"), "update-server-info"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	return dir
}

// BenchmarkRunTrueTrustedCAs is BenchmarkRunTrue with a CA added to the
// trust store: the difference is the per-run cost of extending the
// store's bundles (read, copied into the run's root, bound over).
func BenchmarkRunTrueTrustedCAs(b *testing.B) {
	benchRun(b, Options{TrustedCAs: newTestCA(b, "bench CA").pem}, "/bin/true")
}
