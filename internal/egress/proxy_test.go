package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers from a fixed table and records every lookup, so a
// test can assert that a name was never resolved.
type fakeResolver struct {
	mu      sync.Mutex
	hosts   map[string][]string
	lookups []string
}

func (r *fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	var out []net.IPAddr
	for _, a := range r.hosts[strings.TrimSuffix(host, ".")] {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

func (r *fakeResolver) Lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lookups)
}

// dialLog records every address the proxy dials.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (d *dialLog) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	if d.dial != nil {
		return d.dial(ctx, network, addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *dialLog) Addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

type testProxy struct {
	*Proxy
	addr   string
	res    *fakeResolver
	dials  *dialLog
	served chan error
}

// startProxy serves a Proxy with rules on a loopback listener. hosts is
// the fake resolver's table; opts set further fields before Serve.
func startProxy(t testing.TB, rules []string, hosts map[string][]string, opts ...func(*Proxy)) *testProxy {
	t.Helper()
	r, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{
		addr:   l.Addr().String(),
		res:    &fakeResolver{hosts: hosts},
		dials:  &dialLog{},
		served: make(chan error, 1),
	}
	tp.Proxy = &Proxy{Rules: r, Resolver: tp.res, Dial: tp.dials.Dial}
	for _, o := range opts {
		o(tp.Proxy)
	}
	go func() { tp.served <- tp.Serve(l) }()
	t.Cleanup(func() {
		tp.Close()
		select {
		case err := <-tp.served:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("Serve returned %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return tp
}

// countConn counts what a client wrote and read on its connection to the
// proxy.
type countConn struct {
	net.Conn
	wrote, read *atomic.Int64
}

func (c countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.wrote.Add(int64(n))
	return n, err
}

type clientCounts struct{ wrote, read atomic.Int64 }

// client returns an http.Client that uses tp as its proxy for http and
// https, and counts the bytes on its connections to the proxy.
func (tp *testProxy) client(tlsConf *tls.Config) (*http.Client, *clientCounts) {
	counts := &clientCounts{}
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: tp.addr}),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countConn{c, &counts.wrote, &counts.read}, nil
		},
		TLSClientConfig: tlsConf,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, counts
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", u, err)
	}
	return resp.StatusCode, string(body)
}

func port(t testing.TB, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(addr, "http://"))
	if err != nil {
		_, p, err = net.SplitHostPort(strings.TrimPrefix(addr, "https://"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHTTPAllowed fetches an allowed name over plain HTTP and checks what
// reached the server and what the report says.
func TestHTTPAllowed(t *testing.T) {
	type seen struct {
		host, body string
		header     http.Header
	}
	seenc := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seenc <- seen{r.Host, string(body), r.Header.Clone()}
		fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.RequestURI())
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.0/8:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	c, counts := tp.client(nil)

	target := "http://API.allowed.test:" + p
	code, body := get(t, c, target+"/path?q=1")
	if code != 200 || body != "hello GET /path?q=1" {
		t.Fatalf("GET: %d %q", code, body)
	}
	s := <-seenc
	if s.host != "api.allowed.test:"+p {
		t.Errorf("upstream saw Host %q", s.host)
	}

	// A POST on the same (kept-alive) connection, with headers the proxy
	// must not pass on.
	req, _ := http.NewRequest("POST", target+"/post", strings.NewReader("payload"))
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Foo", "x")
	req.Header.Set("Connection", "X-Secret")
	req.Header.Set("X-Secret", "hop")
	req.Header.Set("X-Keep", "end-to-end")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(rb) != "hello POST /post" {
		t.Fatalf("POST: %d %q", resp.StatusCode, rb)
	}
	s = <-seenc
	if s.body != "payload" {
		t.Errorf("upstream got body %q", s.body)
	}
	for _, h := range []string{"Proxy-Authorization", "Proxy-Foo", "X-Secret"} {
		if v := s.header.Get(h); v != "" {
			t.Errorf("upstream got %s: %q", h, v)
		}
	}
	if s.header.Get("X-Keep") != "end-to-end" {
		t.Errorf("upstream lost X-Keep")
	}

	// A chunked body with Expect: 100-continue.
	req, _ = http.NewRequest("PUT", target+"/put", io.MultiReader(strings.NewReader("chunk"), strings.NewReader("ed")))
	req.ContentLength = -1
	req.Header.Set("Expect", "100-continue")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s = <-seenc; s.body != "chunked" || resp.StatusCode != 200 {
		t.Errorf("chunked PUT: status %d, upstream got %q", resp.StatusCode, s.body)
	}

	c.CloseIdleConnections()
	tp.Close()
	rep := tp.Report()
	if len(rep) != 3 {
		t.Fatalf("report has %d entries, want 3: %+v", len(rep), rep)
	}
	var up, down int64
	for i, want := range []string{"GET", "POST", "PUT"} {
		e := rep[i]
		if e.Method != want || e.Host != "api.allowed.test" || strconv.Itoa(e.Port) != p || !e.Allowed ||
			e.Addr != "127.0.0.1:"+p || e.Status != 200 || e.Error != "" || !strings.Contains(e.Reason, "rule 0") {
			t.Errorf("report[%d] = %+v", i, e)
		}
		up += e.BytesUp
		down += e.BytesDown
	}
	if up != counts.wrote.Load() || down != counts.read.Load() {
		t.Errorf("report counts up %d down %d; the client wrote %d and read %d", up, down, counts.wrote.Load(), counts.read.Load())
	}
	if got := tp.res.Lookups(); !slices.Equal(got, []string{"api.allowed.test.", "api.allowed.test.", "api.allowed.test."}) {
		t.Errorf("lookups: %q", got)
	}
}

// TestConnectTLS fetches an allowed name over CONNECT, with TLS end to end.
func TestConnectTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure %s", r.Host)
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.0/8:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	// The test certificate names example.com; the proxy is not involved
	// in the TLS session, so verify against that name.
	c, counts := tp.client(&tls.Config{RootCAs: pool, ServerName: "example.com"})
	code, body := get(t, c, "https://api.allowed.test:"+p+"/")
	if code != 200 || body != "secure api.allowed.test:"+p {
		t.Fatalf("GET: %d %q", code, body)
	}
	c.CloseIdleConnections()
	rep := waitReport(t, tp.Proxy, 1) // the tunnel ends when both sides closed
	e := rep[0]
	// The client may close before reading the server's close_notify; its
	// kernel then answers the forwarded alert with a reset, which can
	// reach the proxy before the client's FIN is read. That is the one
	// error a clean exchange may end with: a reset of the client's side
	// once every byte it wrote has gone up.
	clientReset := strings.HasPrefix(e.Error, "tunnel up: ") && strings.HasSuffix(e.Error, "connection reset by peer") &&
		e.BytesUp == counts.wrote.Load()
	if e.Method != "CONNECT" || e.Host != "api.allowed.test" || !e.Allowed || e.Addr != "127.0.0.1:"+p || e.Status != 200 || e.Error != "" && !clientReset {
		t.Errorf("report = %+v", e)
	}
	// The client may close before reading the server's close_notify, so
	// the proxy may have written a few bytes more than the client read.
	if e.BytesUp != counts.wrote.Load() || e.BytesDown < counts.read.Load() || e.BytesDown > counts.read.Load()+100 {
		t.Errorf("report counts up %d down %d; the client wrote %d and read %d", e.BytesUp, e.BytesDown, counts.wrote.Load(), counts.read.Load())
	}
}

// waitReport waits until p has recorded n attempts, and returns them.
func waitReport(t *testing.T, p *Proxy, n int) []Connection {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep := p.Report()
		if len(rep) >= n {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("report has %d entries after 5s, want %d: %+v", len(rep), n, rep)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHopByHopResponse: hop-by-hop headers of a response, and those its
// Connection header names, do not reach the sandbox.
func TestHopByHopResponse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 Fine\r\nConnection: X-Hop, close\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"+
			"Proxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-End: 2\r\nContent-Length: 2\r\n\r\nok")
	}()
	p := port(t, l.Addr().String())
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.0/8:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	c, _ := tp.client(nil)
	resp, err := c.Get("http://api.allowed.test:" + p + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Status != "200 Fine" || string(body) != "ok" || resp.Header.Get("X-End") != "2" || resp.Close {
		t.Errorf("got %s %q %v, close %v", resp.Status, body, resp.Header, resp.Close)
	}
	for _, h := range []string{"X-Hop", "Keep-Alive", "Proxy-Authenticate", "Upgrade", "Connection"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s: %q reached the client", h, v)
		}
	}
}

// serveTCP listens on loopback and runs handle, in a goroutine of its own,
// on every connection accepted until the listener is closed, which tb's
// cleanup does. handle closes the connection itself.
func serveTCP(tb testing.TB, handle func(net.Conn)) net.Listener {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return l
}

// echoServer accepts connections on loopback and echoes what it reads.
func echoServer(t testing.TB) net.Listener {
	t.Helper()
	return serveTCP(t, func(c net.Conn) {
		defer c.Close()
		io.Copy(c, c)
	})
}

const established = "HTTP/1.1 200 Connection established\r\n\r\n"

// TestConnectExactBytes sends known bytes through a tunnel and checks the
// report counts every one of them, the request and reply included.
func TestConnectExactBytes(t *testing.T) {
	echo := echoServer(t)
	p := port(t, echo.Addr().String())
	tp := startProxy(t, []string{"echo.allowed.test:" + p, "127.0.0.0/8:" + p},
		map[string][]string{"echo.allowed.test": {"127.0.0.1"}})

	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connectReq := "CONNECT echo.allowed.test:" + p + " HTTP/1.1\r\nHost: echo.allowed.test:" + p + "\r\n\r\n"
	payload := strings.Repeat("0123456789abcdef", 10000) // 160,000 bytes
	// The first payload bytes go in the same write as the request.
	if _, err := io.WriteString(c, connectReq+payload[:100]); err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(c, payload[100:])
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != established+payload {
		t.Fatalf("read %d bytes, want %d", len(got), len(established)+len(payload))
	}
	tp.Close()
	rep := tp.Report()
	if len(rep) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	e := rep[0]
	if e.BytesUp != int64(len(connectReq)+len(payload)) || e.BytesDown != int64(len(established)+len(payload)) {
		t.Errorf("report up %d down %d, want %d %d", e.BytesUp, e.BytesDown, len(connectReq)+len(payload), len(established)+len(payload))
	}
	if e.Error != "" || e.Status != 200 || e.Duration <= 0 || e.Start.IsZero() {
		t.Errorf("report = %+v", e)
	}
}

// TestHTTPExactBytes checks the counts of a raw plain HTTP exchange, by an
// HTTP/1.0 client that gets a chunked response de-chunked.
func TestHTTPExactBytes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part one, ")
		w.(http.Flusher).Flush() // forces a chunked response
		io.WriteString(w, "part two")
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.0/8:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET http://api.allowed.test:" + p + "/x HTTP/1.0\r\nUser-Agent: raw\r\n\r\n"
	io.WriteString(c, req)
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "part one, part two" || len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Errorf("HTTP/1.0 client got %q, transfer encoding %v, close %v:\n%s", body, resp.TransferEncoding, resp.Close, got)
	}
	tp.Close()
	e := tp.Report()[0]
	if e.BytesUp != int64(len(req)) || e.BytesDown != int64(len(got)) {
		t.Errorf("report up %d down %d, want %d %d", e.BytesUp, e.BytesDown, len(req), len(got))
	}
}

// TestRefusedNotResolved asks for names off the list: 403, and the name
// reaches no resolver and nothing is dialed.
func TestRefusedNotResolved(t *testing.T) {
	tp := startProxy(t, []string{"api.allowed.test", "*.wild.test:443"},
		map[string][]string{"evil.test": {"93.184.216.34"}, "wild.test": {"93.184.216.34"}})
	c, _ := tp.client(nil)
	for _, u := range []string{
		"http://evil.test/",
		"http://secret-data.evil.test/",
		"http://api.allowed.test:8080/", // the name on a port not allowed
		"http://wild.test/",             // the apex of a wildcard
		"http://x.wild.test/",           // port 80 not allowed for the wildcard
	} {
		code, body := get(t, c, u)
		if code != 403 || !strings.HasPrefix(body, "egress proxy: ") {
			t.Errorf("GET %s: %d %q, want 403", u, code, body)
		}
	}
	// CONNECT, through the client (https) and raw.
	_, err := c.Get("https://evil.test/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("GET https://evil.test/: %v, want a Forbidden CONNECT", err)
	}
	status, body := rawConnect(t, tp.addr, "other.test:443")
	if status != 403 || !strings.Contains(body, "other.test is not on the allowlist") {
		t.Errorf("CONNECT other.test: %d %q", status, body)
	}
	tp.Close()
	if l := tp.res.Lookups(); len(l) != 0 {
		t.Errorf("names off the list were resolved: %q", l)
	}
	if d := tp.dials.Addrs(); len(d) != 0 {
		t.Errorf("dialed %q", d)
	}
	rep := tp.Report()
	if len(rep) != 7 {
		t.Fatalf("report has %d entries, want 7: %+v", len(rep), rep)
	}
	for _, e := range rep {
		if e.Allowed || e.Status != 403 || e.Addr != "" || e.Reason == "" || e.BytesUp == 0 || e.BytesDown == 0 {
			t.Errorf("report entry %+v", e)
		}
	}
}

// rawConnect sends a CONNECT and returns the status and body of the answer.
func rawConnect(t *testing.T, proxyAddr, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode == 200 {
		return 200, ""
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestResolvesToRefused asks for allowed names whose addresses are in
// refused ranges, with no CIDR rule opening them.
func TestResolvesToRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the server was reached: %s", r.URL)
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	tp := startProxy(t, []string{"*.allowed.test:1-65535", "0.0.0.0/0:1-65535"}, map[string][]string{
		"loop.allowed.test":   {"127.0.0.1"},
		"meta.allowed.test":   {"169.254.169.254"},
		"mapped.allowed.test": {"::ffff:127.0.0.1"},
		"v6.allowed.test":     {"::1", "fe80::1", "fd00::1"},
		"lan.allowed.test":    {"192.168.0.10", "10.0.0.1"},
	})
	c, _ := tp.client(nil)
	for name, why := range map[string]string{
		"loop.allowed.test":   "loopback",
		"meta.allowed.test":   "metadata",
		"mapped.allowed.test": "loopback",
		"v6.allowed.test":     "unique local",
		"lan.allowed.test":    "private",
	} {
		code, body := get(t, c, "http://"+name+":"+p+"/")
		if code != 403 || !strings.Contains(body, why) || !strings.Contains(body, "resolved only to refused addresses") {
			t.Errorf("GET %s: %d %q, want 403 for %s", name, code, body, why)
		}
		status, body := rawConnect(t, tp.addr, name+":"+p)
		if status != 403 || !strings.Contains(body, why) {
			t.Errorf("CONNECT %s: %d %q", name, status, body)
		}
	}
	if d := tp.dials.Addrs(); len(d) != 0 {
		t.Errorf("dialed %q", d)
	}
}

// TestLiteralRefused asks for literal addresses: the metadata service in
// its plain and IPv4-mapped forms, loopback, a public address with no
// CIDR rule. Nothing is resolved or dialed.
func TestLiteralRefused(t *testing.T) {
	tp := startProxy(t, []string{"api.allowed.test", "169.254.0.0/16"}, nil)
	c, _ := tp.client(nil)
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/latest/meta-data/",
		"http://[::ffff:a9fe:a9fe]/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://127.0.0.1/",
		"http://[::1]/",
		"http://93.184.216.34/",
		"http://0.0.0.0/",
	} {
		code, body := get(t, c, u)
		if code != 403 {
			t.Errorf("GET %s: %d %q, want 403", u, code, body)
		}
	}
	for _, target := range []string{"169.254.169.254:443", "[::ffff:169.254.169.254]:443", "127.0.0.1:443", "[fe80::1%25eth0]:443"} {
		if status, body := rawConnect(t, tp.addr, target); status != 403 && status != 400 {
			t.Errorf("CONNECT %s: %d %q", target, status, body)
		}
	}
	// Names that some resolvers read as IPv4 addresses are not names.
	for _, u := range []string{"http://2130706433/", "http://127.1/", "http://0x7f.1/"} {
		code, body := get(t, c, u)
		if code != 400 || !strings.Contains(body, "not a valid host name") {
			t.Errorf("GET %s: %d %q, want 400", u, code, body)
		}
	}
	if l := tp.res.Lookups(); len(l) != 0 {
		t.Errorf("resolved %q", l)
	}
	if d := tp.dials.Addrs(); len(d) != 0 {
		t.Errorf("dialed %q", d)
	}
}

// TestDialsCheckedAddress resolves a name to a refused and a public
// address: only the public one is dialed, as a literal, and the name is
// resolved once. (The fake dialer connects nowhere.)
func TestDialsCheckedAddress(t *testing.T) {
	dl := &dialLog{dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, errors.New("test dialer connects nowhere")
	}}
	tp := startProxy(t, []string{"api.allowed.test"}, map[string][]string{
		"api.allowed.test": {"10.0.0.1", "93.184.216.34", "::ffff:127.0.0.1", "2606:2800:220:1:248:1893:25c8:1946"},
	}, func(p *Proxy) { p.Dial = dl.Dial })
	status, body := rawConnect(t, tp.addr, "api.allowed.test:443")
	if status != 502 || !strings.Contains(body, "cannot connect") {
		t.Errorf("CONNECT: %d %q", status, body)
	}
	if d := dl.Addrs(); !slices.Equal(d, []string{"93.184.216.34:443", "[2606:2800:220:1:248:1893:25c8:1946]:443"}) {
		t.Errorf("dialed %q", d)
	}
	if l := tp.res.Lookups(); len(l) != 1 {
		t.Errorf("lookups %q", l)
	}
	tp.Close()
	e := tp.Report()[0]
	if !e.Allowed || e.Status != 502 || !strings.Contains(e.Error, "connects nowhere") || !strings.Contains(e.Reason, "skipped 10.0.0.1") {
		t.Errorf("report = %+v", e)
	}
}

// TestUpstreamFailures: an unresolvable allowed name is 502, a refused
// port 502, and an upstream dying mid-response closes the client
// connection.
func TestUpstreamFailures(t *testing.T) {
	// A server that promises 100 bytes, sends 5 and hangs up.
	l := serveTCP(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello")
		c.Close()
	})
	p := port(t, l.Addr().String())
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := port(t, closed.Addr().String())
	closed.Close()

	tp := startProxy(t, []string{"*.allowed.test:1-65535", "127.0.0.0/8:1-65535"}, map[string][]string{
		"short.allowed.test": {"127.0.0.1"},
		"down.allowed.test":  {"127.0.0.1"},
	})
	c, _ := tp.client(nil)
	if code, _ := get(t, c, "http://nxdomain.allowed.test/"); code != 502 {
		t.Errorf("unresolvable name: %d, want 502", code)
	}
	if status, _ := rawConnect(t, tp.addr, "nxdomain.allowed.test:443"); status != 502 {
		t.Errorf("CONNECT unresolvable name: %d, want 502", status)
	}
	if code, _ := get(t, c, "http://down.allowed.test:"+closedPort+"/"); code != 502 {
		t.Errorf("nothing listening: %d, want 502", code)
	}
	if status, _ := rawConnect(t, tp.addr, "down.allowed.test:"+closedPort); status != 502 {
		t.Errorf("CONNECT nothing listening: %d, want 502", status)
	}
	resp, err := c.Get("http://short.allowed.test:" + p + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short response: read error %v, want unexpected EOF", err)
	}
	tp.Close()
	rep := tp.Report()
	if len(rep) != 5 {
		t.Fatalf("report: %+v", rep)
	}
	for _, e := range rep {
		if !e.Allowed || e.Error == "" {
			t.Errorf("report entry %+v: want allowed, with an error", e)
		}
	}
}

// TestBadRequests: what is not a proxy request is refused with 400 (or
// 431) and the connection closed.
func TestBadRequests(t *testing.T) {
	tp := startProxy(t, []string{"api.allowed.test"}, nil)
	for _, tc := range []struct {
		req  string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n", 400},
		{"GET https://api.allowed.test/ HTTP/1.1\r\n\r\n", 400},
		{"GET ftp://api.allowed.test/ HTTP/1.1\r\n\r\n", 400},
		{"CONNECT api.allowed.test HTTP/1.1\r\n\r\n", 400},
		{"CONNECT api.allowed.test:0 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT api.allowed.test:http HTTP/1.1\r\n\r\n", 400},
		{"CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400},
		{"hello\r\n\r\n", 400},
		{"GET http://api.allowed.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", 2*maxHeaderBytes) + "\r\n\r\n", 431},
	} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		go io.WriteString(c, tc.req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%.40q: %v", tc.req, err)
		} else if resp.StatusCode != tc.want || !resp.Close {
			t.Errorf("%.40q: %d close %v, want %d and close", tc.req, resp.StatusCode, resp.Close, tc.want)
		}
		c.Close()
	}
	if l := tp.res.Lookups(); len(l) != 0 {
		t.Errorf("resolved %q", l)
	}
}

// TestConcurrent runs many fetches at once over HTTP and CONNECT.
func TestConcurrent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 10000))
	}))
	defer srv.Close()
	echo := echoServer(t)
	p, ep := port(t, srv.URL), port(t, echo.Addr().String())
	tp := startProxy(t, []string{"api.allowed.test:" + p, "echo.allowed.test:" + ep, "127.0.0.0/8:1-65535"},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}, "echo.allowed.test": {"127.0.0.1"}})
	c, _ := tp.client(nil)
	const workers, each = 16, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*2)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				resp, err := c.Get("http://api.allowed.test:" + p + "/")
				if err != nil {
					errs <- err
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if len(b) != 10000 {
					errs <- fmt.Errorf("short body %d", len(b))
				}
				if err := tunnelEcho(tp.addr, "echo.allowed.test:"+ep, 5000); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.CloseIdleConnections()
	tp.Close()
	// The client may open connections it never sends a request on (it
	// dials while waiting for one to come back idle); those are reported
	// as such.
	requests := 0
	for _, c := range tp.Report() {
		switch {
		case c.Method != "":
			requests++
		case !strings.HasSuffix(c.Reason, "before a request"):
			t.Errorf("unexpected report entry %+v", c)
		}
	}
	if requests != workers*each*2 {
		t.Errorf("report has %d requests, want %d", requests, workers*each*2)
	}
}

// tunnelEcho sends n bytes through a CONNECT tunnel to an echo server and
// checks they come back.
func tunnelEcho(proxyAddr, target string, n int) error {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("CONNECT %s: %s", target, resp.Status)
	}
	data := strings.Repeat("e", n)
	go io.WriteString(c, data)
	got := make([]byte, n)
	if _, err := io.ReadFull(br, got); err != nil {
		return err
	}
	if string(got) != data {
		return errors.New("echo mismatch")
	}
	return nil
}

// TestServeReturnsOnListenerClose: Serve returns when its listener is
// closed by someone else, and Close still ends what it accepted.
func TestServeReturnsOnListenerClose(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	sp := port(t, srv.URL)
	r, _ := ParseRules([]string{"api.allowed.test:" + sp, "127.0.0.1:" + sp})
	p := &Proxy{Rules: r, Resolver: &fakeResolver{hosts: map[string][]string{"api.allowed.test": {"127.0.0.1"}}}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One request, answered, leaves the connection kept alive.
	fmt.Fprintf(c, "GET http://api.allowed.test:%s/ HTTP/1.1\r\n\r\n", sp)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	l.Close()
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve returned %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its listener closed")
	}
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("accepted connection after Close: read %v, want EOF", err)
	}
	if err := p.Serve(l); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
	if err := (&Proxy{}).Serve(l); err == nil {
		t.Error("Serve without Rules succeeded")
	}
}

// TestCloseNoLeak opens tunnels and kept-alive connections, closes the
// proxy, and checks the clients see their connections end and no goroutine
// is left behind.
func TestCloseNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		echo := echoServer(t)
		defer echo.Close()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		defer srv.Close()
		ep, p := port(t, echo.Addr().String()), port(t, srv.URL)
		r, _ := ParseRules([]string{"*.allowed.test:1-65535", "127.0.0.0/8:1-65535"})
		res := &fakeResolver{hosts: map[string][]string{"echo.allowed.test": {"127.0.0.1"}, "api.allowed.test": {"127.0.0.1"}}}
		prx := &Proxy{Rules: r, Resolver: res}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- prx.Serve(l) }()

		var conns []net.Conn
		for i := 0; i < 5; i++ {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT echo.allowed.test:%s HTTP/1.1\r\n\r\n", ep)
			if _, err := io.ReadFull(c, make([]byte, len(established))); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		// A connection that sent half a request header.
		half, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer half.Close()
		io.WriteString(half, "GET http://api.allowed.test/ HTTP/1.1\r\n")
		conns = append(conns, half)
		// A kept-alive plain HTTP connection.
		tp := &testProxy{Proxy: prx, addr: l.Addr().String()}
		hc, _ := tp.client(nil)
		if code, _ := get(t, hc, "http://api.allowed.test:"+p+"/"); code != 200 {
			t.Fatalf("GET: %d", code)
		}
		time.Sleep(20 * time.Millisecond) // let the half header be read

		done := make(chan struct{})
		go func() { prx.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return")
		}
		if err := <-served; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve = %v", err)
		}
		for i, c := range conns {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(c); err != nil {
				t.Errorf("conn %d: %v, want EOF", i, err)
			}
		}
		hc.CloseIdleConnections()
		if n := len(prx.Report()); n != 7 {
			t.Errorf("report has %d entries, want 7", n)
		}
	}()
	// Goroutines of the test servers and clients wind down on their own.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestIdleTimeout: a silent tunnel is closed after IdleTimeout, while one
// carrying data in one direction only lives on.
func TestIdleTimeout(t *testing.T) {
	// A server that sends a byte every 30 ms, 40 times, and never reads.
	// The idle timeout is many times that gap, so that a loaded machine
	// stalling the server for a while does not pass for silence.
	l := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		for i := 0; i < 40; i++ {
			time.Sleep(30 * time.Millisecond)
			if _, err := c.Write([]byte{'.'}); err != nil {
				return
			}
		}
	})
	echo := echoServer(t)
	tp := startProxy(t, []string{"*.allowed.test:1-65535", "127.0.0.0/8:1-65535"}, map[string][]string{
		"drip.allowed.test": {"127.0.0.1"}, "echo.allowed.test": {"127.0.0.1"},
	}, func(p *Proxy) { p.IdleTimeout = 500 * time.Millisecond })

	// One-way traffic for 1.2 s, more than twice the idle timeout.
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT drip.allowed.test:%s HTTP/1.1\r\n\r\n", port(t, l.Addr().String()))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != established+strings.Repeat(".", 40) {
		t.Errorf("one-way tunnel: %q, %v", got, err)
	}
	c.Close()
	waitReport(t, tp.Proxy, 1)

	// A silent tunnel.
	c2, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	start := time.Now()
	fmt.Fprintf(c2, "CONNECT echo.allowed.test:%s HTTP/1.1\r\n\r\n", port(t, echo.Addr().String()))
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err = io.ReadAll(c2)
	if err != nil || string(got) != established {
		t.Errorf("silent tunnel: %q, %v", got, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("silent tunnel closed after %v", d)
	}
	tp.Close()
	rep := tp.Report()
	if len(rep) != 2 || rep[0].Error != "" || !strings.Contains(rep[1].Error, "idle timeout") {
		t.Errorf("report: %+v", rep)
	}
}

// TestLimits: MaxConns and ReportLimit bound what a flood of connections
// can make the host hold.
func TestLimits(t *testing.T) {
	tp := startProxy(t, []string{"api.allowed.test"}, nil, func(p *Proxy) {
		p.MaxConns = 2
		p.ReportLimit = 3
	})
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET http://api.allowed.test/ HTTP/1.1\r\n") // half a header: the session stays
	}
	// Serve accepts in order, so these come after the two above.
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("connection over MaxConns: read %d, %v", n, err)
		}
		c.Close()
	}
	tp.Close()
	if rep := tp.Report(); len(rep) != 3 || !strings.Contains(rep[0].Reason, "MaxConns") {
		t.Errorf("report: %+v", rep)
	}
	if d := tp.Dropped(); d != 3 {
		t.Errorf("Dropped() = %d, want 3", d)
	}
}
