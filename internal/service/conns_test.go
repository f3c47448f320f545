package service

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oneConn is a client that sends every request on one connection.
type oneConn struct {
	t      *testing.T
	url    string
	client *http.Client
}

func newOneConn(t *testing.T, url string) *oneConn {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: wait}
	t.Cleanup(tr.CloseIdleConnections)
	return &oneConn{t: t, url: url, client: &http.Client{Transport: tr, Timeout: wait}}
}

// do sends a request and returns its status and body.
func (c *oneConn) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// metric reads one series of /metrics; ok is false if it is missing.
func (c *oneConn) metric(series string) (v float64, ok bool) {
	c.t.Helper()
	status, b := c.do("GET", "/metrics", "")
	if status != http.StatusOK {
		c.t.Fatalf("GET /metrics: %d %s", status, b)
	}
	for line := range strings.Lines(string(b)) {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestConnectionFlood: under a descriptor limit of 1024 (the least the
// runs' own limit, sandbox.Options.Limits.OpenFiles's default, lets the
// server have), a flood of more
// connections than that, which send nothing (slow headers), fills the
// server's connection cap and not its descriptors: the connections
// beyond the cap are answered 503 with Retry-After, a run asked for on a
// connection opened before the flood succeeds, and once the flood's
// connections are closed new ones are served again.
func TestConnectionFlood(t *testing.T) {
	const nofile, flood = 1024, 1100
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Max < nofile {
		t.Skipf("the server needs a descriptor limit of %d, above this user's hard RLIMIT_NOFILE %d (%v)", nofile, rl.Max, err)
	}
	ts := startServerVia(t, []string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)},
		// The flood comes from one address: the bound per client
		// would close most of it before the server-wide cap counts it.
		"-max-concurrent", "1", "-max-queue", "1", "-max-sessions", "1", "-max-conns-per-client", strconv.Itoa(nofile))
	var maxConns float64
	if evs := ts.events("listening"); len(evs) > 0 {
		maxConns, _ = evs[0]["max_connections"].(float64)
	}
	t.Logf("RLIMIT_NOFILE %d: max_connections %v", nofile, maxConns)
	if maxConns <= 0 || maxConns >= nofile {
		t.Errorf("max_connections %v in the listening log, want a cap below the descriptor limit %d", maxConns, nofile)
	}
	before := newOneConn(t, ts.url)
	if status, b := before.do("GET", "/healthz", ""); status != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", status, b)
	}

	addr := strings.TrimPrefix(ts.url, "http://")
	answers := make(chan []byte, flood)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial connection %d of the flood: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
		go func() {
			// A refused connection is answered at once; an accepted one
			// says nothing, and ends when the test closes it.
			b, _ := io.ReadAll(c)
			answers <- b
		}()
	}
	// Until the server has taken in the whole flood, as it counts it.
	deadline := time.Now().Add(wait)
	for {
		open, ok1 := before.metric("sandbox_serve_connections")
		refused, ok2 := before.metric("sandbox_serve_connections_refused_total")
		if !ok1 || !ok2 {
			t.Errorf("/metrics has no sandbox_serve_connections and sandbox_serve_connections_refused_total")
			break
		}
		if open+refused == flood+1 {
			t.Logf("%d connections open, %d refused", int(open), int(refused))
			if open != maxConns {
				t.Errorf("%v connections open during the flood, want the cap %v", open, maxConns)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v connections open and %v refused, want %d in all", open, refused, flood+1)
		}
		time.Sleep(20 * time.Millisecond)
	}

	status, b := before.do("POST", "/v1/runs", `{"command":["echo","ran"]}`)
	var a answer
	if err := json.Unmarshal(b, &a); err != nil || status != http.StatusOK || !a.success() || a.Stdout != "ran\n" {
		t.Errorf("a run during the flood: %d %s", status, b)
	}

	// Each connection beyond the cap got a 503; an accepted one that
	// ReadHeaderTimeout ended meanwhile says nothing.
	for got, want := 0, int(flood+1-maxConns); got < want; {
		var b []byte
		select {
		case b = <-answers:
		case <-time.After(wait):
			t.Fatalf("%d of the %d connections beyond the cap answered", got, want)
		}
		if len(b) == 0 {
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a connection beyond the cap got %q (%v), want 503 with Retry-After", b, err)
		}
		got++
	}

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		if open, _ := before.metric("sandbox_serve_connections"); open == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flood's connections are still counted open after they were closed")
		}
	}
	after := newOneConn(t, ts.url)
	status, b = after.do("POST", "/v1/runs", `{"command":["echo","after"]}`)
	if err := json.Unmarshal(b, &a); err != nil || status != http.StatusOK || a.Stdout != "after\n" {
		t.Errorf("a run on a new connection after the flood: %d %s", status, b)
	}
}

// TestMaxConnectionsFlag: -max-connections sets the cap, and one the
// descriptor limit cannot hold beside the reserve is refused at start,
// naming the flag and the limit.
func TestMaxConnectionsFlag(t *testing.T) {
	if noSandbox != "" {
		t.Skip(noSandbox)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Max < 1024 {
		t.Skipf("the server needs a descriptor limit of 1024, above this user's hard RLIMIT_NOFILE %d (%v)", rl.Max, err)
	}
	out, err := exec.Command("sh", "-c", `ulimit -n 1024 && exec "$0" "$@"`, binary, "serve", "-addr", "127.0.0.1:0", "-max-connections", "5000").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-max-connections 5000") || !strings.Contains(string(out), "RLIMIT_NOFILE (1024)") {
		t.Errorf("-max-connections 5000 under a limit of 1024: %v\n%s\nwant an error naming the flag and the limit", err, out)
	}

	ts := startServer(t, "-max-connections", "3")
	held := newOneConn(t, ts.url)
	if status, b := held.do("GET", "/healthz", ""); status != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", status, b)
	}
	var refused int
	for i := range 4 {
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i < 2 {
			continue // within the cap: held open, saying nothing
		}
		b, _ := io.ReadAll(c)
		if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil); err == nil && resp.StatusCode == http.StatusServiceUnavailable {
			refused++
		} else {
			t.Errorf("connection %d, beyond -max-connections 3: %q", i+2, b)
		}
	}
	if n, _ := held.metric("sandbox_serve_connections_refused_total"); refused != 2 || n != 2 {
		t.Errorf("%d connections answered 503, %v counted refused; want 2", refused, n)
	}
}
