//go:build linux

package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func init() {
	// netprobe tries the ways out of a NetworkNone run and prints one
	// "name result" line each. Args: a host TCP address, a host abstract
	// Unix socket name (without the "@").
	helpers["netprobe"] = func(args []string) int {
		try := func(name, network, addr string) {
			start := time.Now()
			c, err := net.DialTimeout(network, addr, 5*time.Second)
			if c != nil {
				c.Close()
			}
			fmt.Printf("%s %s %d\n", name, dialResult(err), time.Since(start).Milliseconds())
		}
		try("host-tcp", "tcp", args[0])
		try("metadata", "tcp", "169.254.169.254:80")
		try("public", "tcp", "1.1.1.1:443")
		try("public6", "tcp", "[2606:4700:4700::1111]:443")
		try("abstract", "unix", "@"+args[1])
		// A UDP datagram to a public resolver: the send itself fails.
		if c, err := net.Dial("udp", "8.8.8.8:53"); err != nil {
			fmt.Println("udp-dns", dialResult(err), 0)
		} else {
			_, err = c.Write([]byte("query"))
			fmt.Println("udp-dns", dialResult(err), 0)
			c.Close()
		}
		// A server inside the run, reached from a second process.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("inside listen:", err)
			return 1
		}
		cmd := exec.Command("/proc/self/exe", "tcp", ln.Addr().String())
		cmd.Env = []string{helperEnv + "=netsay"}
		if err := cmd.Start(); err != nil {
			fmt.Println("inside start:", err)
			return 1
		}
		c, err := ln.Accept()
		if err != nil {
			fmt.Println("inside accept:", err)
			return 1
		}
		msg, _ := io.ReadAll(c)
		cmd.Wait()
		fmt.Printf("inside %s from-pid=%d self-pid=%d\n", msg, cmd.Process.Pid, os.Getpid())
		return 0
	}
	// netsay connects to args[1] over network args[0] and sends "hello".
	helpers["netsay"] = func(args []string) int {
		c, err := net.Dial(args[0], args[1])
		if err != nil {
			return 1
		}
		c.Write([]byte("hello"))
		c.Close()
		return 0
	}
	// fetch GETs each URL in args with the proxy the environment names,
	// trusting the PEM certificate in SBXTEST_CA, and prints one
	// "url status body" or "url error" line each.
	helpers["fetch"] = func(args []string) int {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(os.Getenv("SBXTEST_CA")))
		tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{RootCAs: pool}}
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for _, u := range args {
			resp, err := client.Get(u)
			if err != nil {
				fmt.Printf("%s error %v\n", u, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("%s %d %s\n", u, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return 0
	}
	// lookup resolves args[0] with Go's resolver and prints the outcome.
	helpers["lookup"] = func(args []string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, args[0])
		fmt.Println("go-resolver", addrs, err != nil)
		return 0
	}
}

// dialResult names the outcome of a dial by its errno.
func dialResult(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "connected"
	case errors.As(err, &errno):
		return errnoName(errno)
	case os.IsTimeout(err):
		return "timeout"
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}

// countingListener accepts on a host address and counts connections.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func listenCounting(t *testing.T, network, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	cl := &countingListener{Listener: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cl.n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return cl
}

func TestNetworkNone(t *testing.T) {
	requireSandbox(t)
	hostTCP := listenCounting(t, "tcp", "127.0.0.1:0")
	abstract := fmt.Sprintf("sbxtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	hostUnix := listenCounting(t, "unix", "@"+abstract)
	// The host side works: a connection from here is counted.
	if c, err := net.Dial("unix", "@"+abstract); err != nil {
		t.Fatalf("host abstract socket: %v", err)
	} else {
		c.Close()
	}
	waitFor(func() bool { return hostUnix.n.Load() == 1 })

	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("inprocess=%v", inProcess), func(t *testing.T) {
			res := run(t, Options{Binds: []Bind{helperBind(t)}, Start: inProcessIf(inProcess)},
				helperCmd("netprobe", hostTCP.Addr().String(), abstract))
			if !res.Success() {
				t.Fatalf("%v\n%s%s", res.Err(), res.Stdout, res.Stderr)
			}
			got := map[string][]string{}
			for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				f := strings.Fields(l)
				got[f[0]] = f[1:]
			}
			// Loopback inside is the run's own: nothing listens there.
			want := map[string]string{"host-tcp": "ECONNREFUSED", "metadata": "ENETUNREACH", "public": "ENETUNREACH",
				"public6": "ENETUNREACH", "abstract": "ECONNREFUSED", "udp-dns": "ENETUNREACH"}
			for name, w := range want {
				g := got[name]
				if len(g) != 2 || g[0] != w {
					t.Errorf("%s: %v, want %s\n%s", name, g, w, res.Stdout)
				} else if ms, _ := strconv.Atoi(g[1]); ms > 500 {
					t.Errorf("%s took %d ms: a refused route must fail at once", name, ms)
				}
			}
			// The program is pid 1; the client was another process.
			if g := got["inside"]; len(g) != 3 || g[0] != "hello" || g[2] != "self-pid=1" || g[1] == "from-pid=1" {
				t.Errorf("in-run server: %v\n%s", g, res.Stdout)
			}
			if len(res.Connections) != 0 {
				t.Errorf("Connections without a proxy: %v", res.Connections)
			}
		})
	}
	if n := hostTCP.n.Load(); n != 0 {
		t.Errorf("host 127.0.0.1 listener got %d connections from the sandbox", n)
	}
	if n := hostUnix.n.Load(); n != 1 {
		t.Errorf("host abstract socket got %d connections, want only the test's own", n)
	}
}

// fakeResolver answers from a table and records every question.
type fakeResolver struct {
	addrs map[string][]string

	mu    sync.Mutex
	asked []string
}

func (r *fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	var out []net.IPAddr
	for _, a := range r.addrs[strings.TrimSuffix(host, ".")] {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	if out == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

func (r *fakeResolver) questions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// egressWorld is the test's network for Egress runs: an HTTP and an
// HTTPS server on 127.0.0.2, names for them in a fake resolver, and an
// allowlist that opens just that address.
type egressWorld struct {
	http, https *httptest.Server
	resolver    *fakeResolver
	caPEM       string

	mu       sync.Mutex
	requests []string // "METHOD path user-agent", as the servers saw them
}

func newEgressWorld(t *testing.T) *egressWorld {
	t.Helper()
	w := &egressWorld{}
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.requests = append(w.requests, r.Method+" "+r.URL.Path+" "+r.UserAgent())
		w.mu.Unlock()
		fmt.Fprintf(rw, "hello from %s %s\n", r.Host, r.URL.Path)
	})
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("cannot listen on 127.0.0.2, the test's upstream address: %v", err)
		}
		return ln
	}
	// Without keep-alive, a server's side of a connection is closed once
	// its response is written, so no test waits on idle connections.
	// NewUnstartedServer listens on 127.0.0.1; that listener is replaced.
	w.http = httptest.NewUnstartedServer(handler)
	w.http.Listener.Close()
	w.http.Listener = listen()
	w.http.Config.SetKeepAlivesEnabled(false)
	w.http.Start()
	w.https = httptest.NewUnstartedServer(handler)
	w.https.Listener.Close()
	w.https.Listener = listen()
	w.https.Config.SetKeepAlivesEnabled(false)
	w.https.StartTLS()
	t.Cleanup(w.http.Close)
	t.Cleanup(w.https.Close)
	w.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.https.Certificate().Raw}))
	w.resolver = &fakeResolver{addrs: map[string][]string{
		"api.example.com":    {"127.0.0.2"},
		"rebind.example.com": {"127.0.0.3"},
		"meta.example.com":   {"169.254.169.254"},
		"lan.example.com":    {"10.1.2.3", "192.168.1.1"},
		"evil.example.net":   {"127.0.0.2"},
	}}
	return w
}

// port is the port of one of the servers.
func port(s *httptest.Server) string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// opts allows api.example.com and the decoys on every port, and opens
// 127.0.0.2 (the servers' address) and nothing else of loopback.
func (w *egressWorld) opts(inProcess bool) Options {
	return Options{
		Network: &Egress{Allow: []string{"api.example.com:1-65535", "rebind.example.com:1-65535", "meta.example.com:80", "lan.example.com:80", "127.0.0.2:1-65535"}, Resolver: w.resolver},
		Start:   inProcessIf(inProcess),
		Env:     []string{"SBXTEST_CA=" + w.caPEM},
	}
}

func (w *egressWorld) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests)
}

func TestNetworkAllow(t *testing.T) {
	requireSandbox(t)
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("inprocess=%v", inProcess), func(t *testing.T) {
			w := newEgressWorld(t)
			httpURL := "http://api.example.com:" + port(w.http) + "/plain"
			httpsURL := "https://api.example.com:" + port(w.https) + "/tls"
			offList := "http://evil.example.net:" + port(w.http) + "/evil"
			rebind := "http://rebind.example.com:" + port(w.http) + "/rebind"
			meta := "http://meta.example.com/latest/meta-data/"
			lan := "http://lan.example.com/"
			metaIP := "http://169.254.169.254/latest/meta-data/"
			opts := w.opts(inProcess)
			opts.Binds = []Bind{helperBind(t)}
			res := run(t, opts, helperCmd("fetch", httpURL, httpsURL, offList, rebind, meta, lan, metaIP))
			if !res.Success() {
				t.Fatalf("%v\n%s%s", res.Err(), res.Stdout, res.Stderr)
			}
			lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
			if len(lines) != 7 {
				t.Fatalf("fetch printed:\n%s%s", res.Stdout, res.Stderr)
			}
			if want := httpURL + " 200 hello from api.example.com:" + port(w.http) + " /plain"; lines[0] != want {
				t.Errorf("plain HTTP: %q, want %q", lines[0], want)
			}
			if want := httpsURL + " 200 hello from api.example.com:" + port(w.https) + " /tls"; lines[1] != want {
				t.Errorf("CONNECT: %q, want %q", lines[1], want)
			}
			for _, l := range lines[2:] {
				if !strings.Contains(l, " 403 ") {
					t.Errorf("want a refusal (403): %s", l)
				}
			}
			if got := w.seen(); len(got) != 2 || !strings.HasPrefix(got[0], "GET /plain ") || !strings.HasPrefix(got[1], "GET /tls ") {
				t.Errorf("the servers saw %q, want only /plain and /tls", got)
			}
			// The resolver was asked only for allowed names, rooted.
			for _, q := range w.resolver.questions() {
				if q == "evil.example.net." || !strings.HasSuffix(q, ".") {
					t.Errorf("resolver asked for %q", q)
				}
			}

			type key struct {
				host   string
				method string
			}
			report := map[key]Connection{}
			for _, c := range res.Connections {
				report[key{c.Host, c.Method}] = c
			}
			if len(res.Connections) != 7 || res.ConnectionsDropped != 0 {
				t.Errorf("%d connections reported (%d dropped), want 7: %+v", len(res.Connections), res.ConnectionsDropped, res.Connections)
			}
			check := func(k key, allowed bool, status int, reason string) Connection {
				t.Helper()
				c, ok := report[k]
				if !ok {
					t.Errorf("no report for %v in %+v", k, res.Connections)
					return c
				}
				if c.Allowed != allowed || c.Status != status || !strings.Contains(c.Reason, reason) {
					t.Errorf("%v: allowed=%v status=%d reason %q; want %v %d %q", k, c.Allowed, c.Status, c.Reason, allowed, status, reason)
				}
				return c
			}
			c := check(key{"api.example.com", "GET"}, true, 200, "api.example.com")
			if c.Addr != w.http.Listener.Addr().String() || c.BytesUp < 50 || c.BytesDown < 50 {
				t.Errorf("plain HTTP report: %+v", c)
			}
			c = check(key{"api.example.com", "CONNECT"}, true, 200, "api.example.com")
			// A TLS handshake and a request went through the tunnel.
			if c.Addr != w.https.Listener.Addr().String() || c.BytesUp < 300 || c.BytesDown < 1000 {
				t.Errorf("CONNECT report: %+v", c)
			}
			check(key{"evil.example.net", "GET"}, false, 403, "")
			check(key{"rebind.example.com", "GET"}, false, 403, "loopback")
			check(key{"meta.example.com", "GET"}, false, 403, "")
			check(key{"lan.example.com", "GET"}, false, 403, "private")
			check(key{"169.254.169.254", "GET"}, false, 403, "")
		})
	}
}

// TestNetworkAllowNoDNS: a lookup inside an allow run reaches no resolver.
// The test runs a DNS-shaped UDP server on the host's loopback (on port
// 53 too when it can bind it) and counts what arrives; the proxy's own
// resolver counts what it is asked.
func TestNetworkAllowNoDNS(t *testing.T) {
	requireSandbox(t)
	w := newEgressWorld(t)
	var packets atomic.Int64
	var where []string
	for _, addr := range []string{"127.0.0.1:53", "127.0.0.1:0", "[::1]:53"} {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue // port 53 needs root, or is taken
		}
		where = append(where, pc.LocalAddr().String())
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 2048)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				packets.Add(1)
			}
		}()
	}
	opts := w.opts(false)
	opts.Binds = []Bind{helperBind(t)}
	secret := "c2VjcmV0.exfil.example.net"
	res := run(t, opts, helperCmd("lookup", secret))
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "go-resolver [] true") {
		t.Errorf("Go's resolver inside: %q", out)
	}
	// glibc's resolver, by way of getent, when there is one.
	if _, err := os.Stat("/usr/bin/getent"); err == nil {
		res := run(t, Options{Network: opts.Network},
			Command("/bin/sh", "-c", "getent hosts "+secret+"; echo rc=$?; cat /etc/resolv.conf 2>&1; grep hosts /etc/nsswitch.conf"))
		if !strings.Contains(string(res.Stdout), "rc=2") || !strings.Contains(string(res.Stdout), "No such file") {
			t.Errorf("getent inside:\n%s%s", res.Stdout, res.Stderr)
		}
	}
	// A datagram to each of the test's servers, sent directly.
	for _, addr := range where {
		res := run(t, Options{Binds: []Bind{helperBind(t)}, Network: opts.Network},
			helperCmd("netsay", "udp", addr))
		// The send succeeds into the run's own loopback, or fails; what
		// counts is whether it arrives.
		_ = res
	}
	time.Sleep(200 * time.Millisecond)
	if n := packets.Load(); n != 0 {
		t.Errorf("%d packets reached the test's resolvers at %v", n, where)
	}
	for _, q := range w.resolver.questions() {
		if strings.Contains(q, "exfil") {
			t.Errorf("the proxy's resolver was asked for %q", q)
		}
	}
	if len(res.Connections) != 0 {
		t.Errorf("a lookup went through the proxy: %+v", res.Connections)
	}
	t.Logf("watched for DNS at %v", where)
}

// TestNetworkAllowTools: programs find the proxy through the environment.
func TestNetworkAllowTools(t *testing.T) {
	requireSandbox(t)
	w := newEgressWorld(t)
	base := "http://api.example.com:" + port(w.http)
	tls := "https://api.example.com:" + port(w.https)
	tools := []struct {
		name, needs, script, path string
	}{
		{"curl http", "curl", "curl -sS " + base + "/curl", "GET /curl curl/"},
		{"curl https", "curl", `printf '%s' "$SBXTEST_CA" > /tmp/ca.pem && curl -sS --cacert /tmp/ca.pem ` + tls + "/curl-tls", "GET /curl-tls curl/"},
		{"wget http", "wget", "wget -q -O - " + base + "/wget", "GET /wget Wget"}, // GNU "Wget/1.x", BusyBox "Wget"
		{"python3 urllib", "python3", `python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("` + base + `/urllib").read().decode())'`, "GET /urllib Python-urllib/"},
		{"pip", "pip3", `printf '%s' "$SBXTEST_CA" > /tmp/ca.pem && pip3 download --no-deps --disable-pip-version-check --cert /tmp/ca.pem -d /tmp/dl --index-url ` + tls + "/simple/ sbxdemo; true", "GET /simple/sbxdemo/ pip/"},
	}
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			if !installedUnderUsr(tool.needs) {
				t.Skipf("%s is not installed under /usr/bin or /bin", tool.needs)
			}
			before := len(w.seen())
			res := run(t, w.opts(false), Command("/bin/sh", "-c", tool.script))
			seen := w.seen()[before:]
			if !slices.ContainsFunc(seen, func(r string) bool { return strings.HasPrefix(r, tool.path) }) {
				t.Errorf("server saw %q, want %q\n%s%s", seen, tool.path, res.Stdout, res.Stderr)
			}
			for _, c := range res.Connections {
				if !c.Allowed || c.Host != "api.example.com" {
					t.Errorf("unexpected attempt %+v", c)
				}
			}
			if len(res.Connections) == 0 {
				t.Errorf("no attempt reported")
			}
		})
	}
}

// installedUnderUsr reports whether the program is in the sandbox's view
// of the host: /usr/bin or /bin.
func installedUnderUsr(name string) bool {
	for _, dir := range []string{"/usr/bin", "/bin"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// busyboxApplet says whether the program name in /usr/bin or /bin is a
// link to BusyBox.
func busyboxApplet(name string) bool {
	for _, dir := range []string{"/usr/bin", "/bin"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(dir, name)); err == nil {
			return filepath.Base(p) == "busybox"
		}
	}
	return false
}

func TestNetworkHostUnsafe(t *testing.T) {
	requireSandbox(t)
	hostTCP := listenCounting(t, "tcp", "127.0.0.1:0")
	res := run(t, Options{Network: HostNetworkUnsafe{}, Binds: []Bind{helperBind(t)}}, helperCmd("netsay", "tcp", hostTCP.Addr().String()))
	if !res.Success() {
		t.Fatalf("host network: %v\n%s", res.Err(), res.Stderr)
	}
	if !waitFor(func() bool { return hostTCP.n.Load() == 1 }) {
		t.Errorf("the host listener got %d connections, want 1", hostTCP.n.Load())
	}
}

func TestNetworkOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		option string
		reason string
	}{
		{"empty allowlist", Options{Network: &Egress{}}, "Options.Network (Egress.Allow)", "empty"},
		{"bad pattern", Options{Network: &Egress{Allow: []string{"pypi.org", "*bad.example.com"}}}, "Options.Network (Egress.Allow[1])", `"*"`},
		{"port out of range", Options{Network: &Egress{Allow: []string{"pypi.org:70000"}}}, "Options.Network (Egress.Allow[0])", "out of range"},
		{"port zero", Options{Network: &Egress{Allow: []string{"pypi.org:0"}}}, "Options.Network (Egress.Allow[0])", "out of range"},
		{"bad CIDR", Options{Network: &Egress{Allow: []string{"10.0.0.0/33"}}}, "Options.Network (Egress.Allow[0])", ""},
		{"empty entry", Options{Network: &Egress{Allow: []string{"pypi.org", " "}}}, "Options.Network (Egress.Allow[1])", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := New(tc.opts).Err()
			var oe *OptionError
			if !errors.As(err, &oe) || !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("err = %v, want an *OptionError", err)
			}
			if oe.Option != tc.option || !strings.Contains(oe.Reason, tc.reason) {
				t.Errorf("err = %v, want option %s and reason containing %q", err, tc.option, tc.reason)
			}
		})
	}
}

// TestNetworkAllowProxyFailure: when the proxy cannot reach an allowed
// host (here its resolver fails), the program gets an error from the
// proxy and has no other way to the host.
func TestNetworkAllowProxyFailure(t *testing.T) {
	requireSandbox(t)
	w := newEgressWorld(t)
	delete(w.resolver.addrs, "api.example.com")
	opts := w.opts(false)
	opts.Binds = []Bind{helperBind(t)}
	url := "http://api.example.com:" + port(w.http) + "/fail"
	res := run(t, opts, helperCmd("fetch", url))
	if got := string(res.Stdout); !strings.HasPrefix(got, url+" 502 ") {
		t.Errorf("fetch through a failing proxy: %q, want a 502", got)
	}
	if len(res.Connections) != 1 || !res.Connections[0].Allowed || res.Connections[0].Error == "" || res.Connections[0].Addr != "" {
		t.Errorf("report: %+v, want one allowed attempt that failed before dialing", res.Connections)
	}
	res = run(t, opts, helperCmd("netsay", "tcp", w.http.Listener.Addr().String()))
	if res.ExitCode != 1 {
		t.Errorf("a direct connection to the server from inside: exit %d, want 1 (refused)", res.ExitCode)
	}
	if got := w.seen(); len(got) != 0 {
		t.Errorf("the server saw %q", got)
	}
}
