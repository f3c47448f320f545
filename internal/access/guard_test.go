package access

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve starts a server behind a Guard made from cfg, on loopback, and
// returns its URL, the Guard and the audit trail it writes.
func serve(t *testing.T, cfg Config) (string, *Guard, *bytes.Buffer) {
	t.Helper()
	audit := &bytes.Buffer{}
	g, err := New(cfg, "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), slog.NewJSONHandler(audit, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ln, err := g.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := FromContext(r.Context())
		io.WriteString(w, id.Tenant)
	}), func(w http.ResponseWriter, r *http.Request, status int, err error) {
		http.Error(w, err.Error(), status)
	})
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String(), g, audit
}

// call sends GET url with header lines "Name: value" and returns the
// status and body.
func call(t *testing.T, c *http.Client, url string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		if name == "Host" {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func writeKeys(t *testing.T, file string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// eventually waits for cond, failing after a bound that only a broken
// reload reaches.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// TestKeyFileRotated rotates the key file twice while the server runs:
// rewritten in place, then swapped through a symlink as a Kubernetes
// Secret volume does. The old key is refused once its line is gone.
func TestKeyFileRotated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	writeKeys(t, file, "# tenants", "alice "+HashKey("old-key"), "bob "+HashKey("bob-key"))
	url, _, audit := serve(t, Config{APIKeys: file, ReloadInterval: 50 * time.Millisecond})

	if s, b := call(t, nil, url, "Authorization: Bearer old-key"); s != 200 || b != "alice" {
		t.Fatalf("old key: %d %q, want 200 alice", s, b)
	}
	writeKeys(t, file, "alice "+HashKey("new-key"), "bob "+HashKey("bob-key"))
	eventually(t, "the new key works", func() bool { s, _ := call(t, nil, url, "Authorization: Bearer new-key"); return s == 200 })
	if s, _ := call(t, nil, url, "Authorization: Bearer old-key"); s != 401 {
		t.Errorf("old key after rotation: %d, want 401", s)
	}

	// A Secret volume: keys -> ..data/keys, ..data -> a new directory.
	link := filepath.Join(dir, "secret")
	os.Mkdir(link, 0o700)
	for _, gen := range []string{"v1", "v2"} {
		os.Mkdir(filepath.Join(link, gen), 0o700)
	}
	writeKeys(t, filepath.Join(link, "v1", "keys"), "carol "+HashKey("carol-1"))
	writeKeys(t, filepath.Join(link, "v2", "keys"), "carol "+HashKey("carol-2"))
	os.Symlink("v1", filepath.Join(link, "..data"))
	os.Symlink("..data/keys", filepath.Join(link, "keys"))
	url2, _, _ := serve(t, Config{APIKeys: filepath.Join(link, "keys"), ReloadInterval: 50 * time.Millisecond})
	if s, b := call(t, nil, url2, "Authorization: Bearer carol-1"); s != 200 || b != "carol" {
		t.Fatalf("carol-1: %d %q", s, b)
	}
	os.Symlink("v2", filepath.Join(link, "..data.tmp"))
	if err := os.Rename(filepath.Join(link, "..data.tmp"), filepath.Join(link, "..data")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "carol-2 works after the swap", func() bool { s, _ := call(t, nil, url2, "Authorization: Bearer carol-2"); return s == 200 })
	if s, _ := call(t, nil, url2, "Authorization: Bearer carol-1"); s != 401 {
		t.Errorf("carol-1 after the swap: %d, want 401", s)
	}
	for _, secret := range []string{"old-key", "new-key", HashKey("old-key")[7:], "bob-key"} {
		if strings.Contains(audit.String(), secret) {
			t.Errorf("the audit trail holds a credential or its hash %q:\n%s", secret, audit)
		}
	}
	if !strings.Contains(audit.String(), `"msg":"authentication refused"`) {
		t.Errorf("the refused old key is not in the audit trail:\n%s", audit)
	}
}

// TestKeyFileSIGHUP reloads on SIGHUP alone: the poll is an hour.
func TestKeyFileSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, "alice "+HashKey("k1"))
	url, _, _ := serve(t, Config{APIKeys: file, ReloadInterval: time.Hour})
	writeKeys(t, file, "alice "+HashKey("k2"))
	if s, _ := call(t, nil, url, "Authorization: Bearer k2"); s != 401 {
		t.Fatalf("k2 before SIGHUP: %d, want 401 (nothing should have reloaded yet)", s)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	eventually(t, "k2 works after SIGHUP", func() bool { s, _ := call(t, nil, url, "Authorization: Bearer k2"); return s == 200 })
}

// TestKeyFileRefused checks that a bad key file stops the start, naming
// the line, and that a key written in place of its hash is refused.
func TestKeyFileRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	for _, tc := range []struct{ content, want string }{
		{"alice sk-live-123\n", "line 1: want the key's hash"},
		{"# c\nAlice " + HashKey("x") + "\n", "line 2: tenant \"Alice\""},
		{"alice\n", "line 1: want \"TENANT sha256:HEX\""},
	} {
		os.WriteFile(file, []byte(tc.content), 0o600)
		_, err := New(Config{APIKeys: file}, "127.0.0.1:0", slog.Default(), nil)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want ErrConfig with %q", tc.content, err, tc.want)
		}
	}
}

// TestHostOrigin refuses a foreign Host and any Origin not allowed, before
// authentication, and lets an allowed one through.
func TestHostOrigin(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, "alice "+HashKey("k"))
	url, _, audit := serve(t, Config{APIKeys: file, AllowHosts: []string{"sandbox.example.com"}, AllowOrigins: []string{"https://app.example.com"}})
	key := "Authorization: Bearer k"
	for _, tc := range []struct {
		headers []string
		status  int
		want    string
	}{
		{[]string{key}, 200, "alice"},
		{[]string{key, "Host: evil.example"}, 403, "-allow-host"},
		{[]string{key, "Host: evil.example:80"}, 403, "-allow-host"},
		{[]string{key, "Host: SANDBOX.example.com:8080"}, 200, "alice"},
		{[]string{key, "Host: localhost:1"}, 200, "alice"},
		{[]string{key, "Origin: http://evil.example"}, 403, "-allow-origin"},
		{[]string{key, "Origin: null"}, 403, "-allow-origin"},
		{[]string{key, "Origin: https://app.example.com"}, 200, "alice"},
		{[]string{"Host: evil.example"}, 403, "-allow-host"},
		{nil, 401, "Authorization: Bearer"},
	} {
		s, b := call(t, nil, url, tc.headers...)
		if s != tc.status || !strings.Contains(b, tc.want) {
			t.Errorf("%q: %d %q, want %d with %q", tc.headers, s, b, tc.status, tc.want)
		}
	}
	if !strings.Contains(audit.String(), `"origin":"null"`) {
		t.Errorf("the refused Origin is not in the audit trail:\n%s", audit)
	}
}

// TestNonLoopbackNeedsAuth refuses to listen beyond loopback with no
// authentication, naming the flags, and says so in the log when told to.
func TestNonLoopbackNeedsAuth(t *testing.T) {
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "192.0.2.1:80"} {
		_, err := New(Config{}, addr, slog.Default(), nil)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "-api-keys FILE") || !strings.Contains(err.Error(), "-insecure-no-auth") {
			t.Errorf("%s: %v, want ErrConfig naming -api-keys and -insecure-no-auth", addr, err)
		}
	}
	url, _, _ := serve(t, Config{})
	if s, b := call(t, nil, url); s != 200 || b != DefaultTenant {
		t.Errorf("loopback without authentication: %d %q, want 200 as tenant %s", s, b, DefaultTenant)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8080", "[::1]:1"} {
		g, err := New(Config{}, addr, slog.Default(), nil)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		g.Close()
	}
	var log bytes.Buffer
	g, err := New(Config{NoAuth: true}, "0.0.0.0:8080", slog.New(slog.NewTextHandler(&log, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if !strings.Contains(log.String(), "authentication is off") {
		t.Errorf("-insecure-no-auth logged %q, want a warning that authentication is off", log.String())
	}
}

// TestConnsPerClient closes the connection beyond the bound from one
// address, while another address still gets in.
func TestConnsPerClient(t *testing.T) {
	url, _, _ := serve(t, Config{NoAuth: true, MaxConnsPerClient: 3})
	addr := strings.TrimPrefix(url, "http://")
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET / HTTP/1.1\r\n")) // headers never finished
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); n > 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("a 4th connection from 127.0.0.1: read %d, %v; want it closed by the server", n, err)
	}
	extra.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2: %v", err)
	}
	c.Close()
	tr := &http.Transport{DialContext: d.DialContext}
	if s, b := call(t, &http.Client{Transport: tr}, url); s != 200 || b != DefaultTenant {
		t.Errorf("from 127.0.0.2: %d %q, want 200 %s", s, b, DefaultTenant)
	}
}

// TestWrapAnyHost takes any Host but still needs a key and refuses an
// Origin.
func TestWrapAnyHost(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, "alice "+HashKey("k"))
	g, err := New(Config{APIKeys: file}, "127.0.0.1:0", slog.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g.WrapAnyHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := FromContext(r.Context())
		io.WriteString(w, id.Tenant)
	}), func(w http.ResponseWriter, r *http.Request, status int, err error) {
		http.Error(w, err.Error(), status)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		headers []string
		status  int
	}{
		{[]string{"Authorization: Bearer k", "Host: 10.1.2.3:8080"}, 200},
		{[]string{"Host: 10.1.2.3:8080"}, 401},
		{[]string{"Authorization: Bearer k", "Origin: http://evil.example"}, 403},
	} {
		if s, _ := call(t, nil, srv.URL, tc.headers...); s != tc.status {
			t.Errorf("%q: %d, want %d", tc.headers, s, tc.status)
		}
	}
}
