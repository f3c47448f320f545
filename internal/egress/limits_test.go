package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The bounds of "Limits" in the package documentation, one by one.

// fields is a header of n fields "a:b".
func fields(n int) string { return strings.Repeat("a:b\r\n", n) }

// ask sends req on a new connection to tp and returns the status of the
// answer, and whether the proxy closed the connection after it.
func ask(t *testing.T, tp *testProxy, req string) (int, bool) {
	t.Helper()
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, req)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Close
}

// reportOf closes tp and returns its report, which must have n entries.
func reportOf(t *testing.T, tp *testProxy, n int) []Connection {
	t.Helper()
	tp.Close()
	rep := tp.Report()
	if len(rep) != n {
		t.Fatalf("report has %d entries, want %d: %+v", len(rep), n, rep)
	}
	return rep
}

// TestRequestHeaderLimits: a request header of more than maxHeaderBytes,
// or of more than maxHeaderFields fields, is answered 431 and recorded;
// one at the limits goes through.
func TestRequestHeaderLimits(t *testing.T) {
	srv := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	p := port(t, srv.Addr().String())
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.1:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	line := "GET http://api.allowed.test:" + p + "/ HTTP/1.1\r\n"
	big := "X: " + strings.Repeat("b", maxHeaderBytes-len(line)-7) + "\r\n\r\n" // exactly maxHeaderBytes
	for _, tc := range []struct {
		name, req string
		want      int
	}{
		{"at the field limit", line + fields(maxHeaderFields) + "\r\n", 204},
		{"one field too many", line + fields(maxHeaderFields+1) + "\r\n", 431},
		{"at the byte limit", line + big, 204},
		{"one byte too many", line + "X: b" + big, 431},
		{"many tiny fields, unfinished", line + fields(50000), 431},
	} {
		if status, closed := ask(t, tp, tc.req); status != tc.want || (tc.want == 431 && !closed) {
			t.Errorf("%s: %d (close %v), want %d", tc.name, status, closed, tc.want)
		}
	}
	rep := reportOf(t, tp, 5)
	for _, c := range rep {
		if c.Status == 431 && (c.Allowed || !strings.Contains(c.Reason, "request header") || c.BytesUp == 0) {
			t.Errorf("refused header recorded as %+v", c)
		}
	}
}

// TestResponseHeaderLimits: the same limits hold for an upstream's
// response header, answered 502 and recorded.
func TestResponseHeaderLimits(t *testing.T) {
	srv := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/ok":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n"+fields(maxHeaderFields-1)+"Content-Length: 2\r\n\r\nok")
		case "/fields":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n"+fields(maxHeaderFields+1)+"Content-Length: 2\r\n\r\nok")
		case "/bytes":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX: "+strings.Repeat("b", maxHeaderBytes)+"\r\n\r\n")
		}
	})
	p := port(t, srv.Addr().String())
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.1:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	for path, want := range map[string]int{"/ok": 200, "/fields": 502, "/bytes": 502} {
		if status, _ := ask(t, tp, "GET http://api.allowed.test:"+p+path+" HTTP/1.1\r\n\r\n"); status != want {
			t.Errorf("%s: %d, want %d", path, status, want)
		}
	}
	for _, c := range reportOf(t, tp, 3) {
		if c.Status == 502 && !strings.Contains(c.Error, "response header") {
			t.Errorf("refused response recorded as %+v", c)
		}
	}
}

// TestSilentConnections: a connection that sends no request within the
// first-request timeout is answered 408, closed and recorded; one the
// sandbox closes, and one Close ends, before a request are recorded too.
func TestSilentConnections(t *testing.T) {
	tp := startProxy(t, []string{"api.allowed.test"}, nil, func(p *Proxy) { p.IdleTimeout = 300 * time.Millisecond })
	dial := func() net.Conn {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Timed out.
	c := dial()
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 408 {
		t.Fatalf("silent connection: %v %v, want 408", resp, err)
	}
	// Closed by the client.
	dial().Close()
	waitReport(t, tp.Proxy, 2)
	// Ended by Close: the timeout is long for these.
	tp2 := startProxy(t, []string{"api.allowed.test"}, nil)
	for range 3 {
		c, err := net.Dial("tcp", tp2.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	// Half a header, then Close.
	c2, err := net.Dial("tcp", tp2.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "GET http://api.allowed.test/ HTTP/1.1\r\n")
	waitSessions(t, tp2.Proxy, 4)
	time.Sleep(50 * time.Millisecond)

	rep := reportOf(t, tp, 2)
	if rep[0].Status != 408 || !strings.Contains(rep[0].Reason, "no request within") {
		t.Errorf("timed out: %+v", rep[0])
	}
	if rep[1].Reason != "closed by the sandbox before a request" || rep[1].BytesUp != 0 {
		t.Errorf("closed: %+v", rep[1])
	}
	rep = reportOf(t, tp2, 4)
	closed := 0
	for _, c := range rep {
		switch c.Reason {
		case "ended by Proxy.Close before a request":
			closed++
		case "ended by Proxy.Close in the middle of a request header":
			if c.BytesUp == 0 {
				t.Errorf("half a header: %+v", c)
			}
		default:
			t.Errorf("unexpected entry %+v", c)
		}
	}
	if closed != 3 {
		t.Errorf("%d silent connections ended by Close reported, want 3: %+v", closed, rep)
	}
}

// TestBufferBudget: connections that wait hold no buffer (silent ones,
// idle tunnels, a request waiting for its response), and once every
// buffer of the budget is taken, data waits (in the kernel) instead of
// the proxy allocating more; it flows again when one is given back.
func TestBufferBudget(t *testing.T) {
	echo := echoServer(t)
	ep := port(t, echo.Addr().String())
	slow := make(chan struct{})
	srv := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		<-slow
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	defer close(slow)
	sp := port(t, srv.Addr().String())
	tp := startProxy(t, []string{"*.allowed.test:1-65535", "127.0.0.1:1-65535"},
		map[string][]string{"echo.allowed.test": {"127.0.0.1"}, "slow.allowed.test": {"127.0.0.1"}})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	open := func(first string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		io.WriteString(c, first)
		return c, bufio.NewReader(c)
	}
	var tunnels []*bufio.Reader
	for range 10 {
		open("")
		c, br := open("CONNECT echo.allowed.test:" + ep + " HTTP/1.1\r\n\r\n")
		if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		_ = c
		tunnels = append(tunnels, br)
		open("GET http://slow.allowed.test:" + sp + "/ HTTP/1.1\r\n\r\n")
	}
	waitSessions(t, tp.Proxy, 30)
	time.Sleep(100 * time.Millisecond)
	if n := tp.buffers.inUse(); n != 0 {
		t.Fatalf("30 waiting connections hold %d buffers, want 0", n)
	}

	// Take every buffer: a tunnel's data then waits.
	var held []*[]byte
	for range maxBuffers {
		b, err := tp.buffers.get(tp.ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	io.WriteString(conns[1], "ping")
	conns[1].SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	got := make([]byte, 4)
	if n, err := io.ReadFull(tunnels[0], got); err == nil {
		t.Fatalf("with the budget spent, a tunnel carried %q", got[:n])
	}
	tp.buffers.put(held[0])
	conns[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(tunnels[0], got); err != nil || string(got) != "ping" {
		t.Fatalf("after a buffer came back: %q %v", got, err)
	}
	for _, b := range held[1:] {
		tp.buffers.put(b)
	}
	time.Sleep(50 * time.Millisecond)
	if n := tp.buffers.inUse(); n != 0 {
		t.Errorf("%d buffers held after the tunnel went idle again", n)
	}
}

// TestConnMemory: what a waiting connection makes the proxy hold stays
// within MaxConnMemory, and the proxy's share of the report within
// MaxRecordBytes a record. The connections wait in each state: silent, in
// the middle of a header, an idle tunnel, and the largest: a response
// whose header has the most fields and bytes allowed, with as much of its
// body as came with it, waiting for the rest.
func TestConnMemory(t *testing.T) {
	const conns = 12 // of each state
	echo := echoServer(t)
	stall := make(chan struct{})
	defer close(stall)
	value := strings.Repeat("v", (maxHeaderBytes-100)/(maxHeaderFields-1)-9) // fills a header
	srv := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n")
		for i := range maxHeaderFields - 2 {
			fmt.Fprintf(&b, "X-%03d: %s\r\n", i, value)
		}
		b.WriteString("\r\n")
		if req.URL.Path == "/body" {
			b.WriteString(strings.Repeat("b", maxHeaderBytes))
		}
		io.WriteString(c, b.String())
		<-stall
	})
	sp := port(t, srv.Addr().String())
	tp := startProxy(t, []string{"*.allowed.test:1-65535", "127.0.0.1:1-65535"},
		map[string][]string{"echo.allowed.test": {"127.0.0.1"}, "big.allowed.test": {"127.0.0.1"}},
		func(p *Proxy) { p.MaxConns = 5 * conns })
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for _, state := range []string{"silent", "mid-header", "idle tunnel", "large response", "large response and body"} {
		before := liveBytes()
		for range conns {
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			switch state {
			case "mid-header":
				io.WriteString(c, "GET http://echo.allowed.test/ HTTP/1.1\r\n"+fields(maxHeaderFields-1))
			case "idle tunnel":
				fmt.Fprintf(c, "CONNECT echo.allowed.test:%s HTTP/1.1\r\n\r\n", port(t, echo.Addr().String()))
				if resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
					t.Fatalf("CONNECT: %v %v", resp, err)
				}
			case "large response", "large response and body":
				path := map[bool]string{false: "/", true: "/body"}[strings.HasSuffix(state, "body")]
				fmt.Fprintf(c, "GET http://big.allowed.test:%s%s HTTP/1.1\r\n", sp, path)
				for j := range maxHeaderFields - 1 {
					fmt.Fprintf(c, "Y-%03d: %s\r\n", j, value)
				}
				io.WriteString(c, "\r\n")
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(c, make([]byte, maxHeaderBytes-1000)); err != nil {
					t.Fatalf("large response: %v", err)
				}
			}
		}
		waitSessions(t, tp.Proxy, len(cs))
		time.Sleep(100 * time.Millisecond)
		per := (liveBytes() - before) / conns
		t.Logf("%s: %d bytes per connection; bound %d", state, per, MaxConnMemory)
		if per > MaxConnMemory {
			t.Errorf("%s: %d bytes per connection, over MaxConnMemory (%d)", state, per, MaxConnMemory)
		}
	}
	// A record of the longest texts.
	long := strings.Repeat("x", 5000)
	tp.record(Connection{Host: long, Method: long, Reason: long, Error: long, Addr: long})
	r := tp.Report()
	c := r[len(r)-1]
	if size := 256 + len(c.Host) + len(c.Method) + len(c.Reason) + len(c.Error) + len(c.Addr); size > MaxRecordBytes {
		t.Errorf("a record holds %d bytes, over MaxRecordBytes (%d)", size, MaxRecordBytes)
	}
}

// TestPipelinedRequestDropped: a request sent before the answer to the one
// ahead of it is not held while that one is served: the first is answered
// with "Connection: close", and the connection ends there.
func TestPipelinedRequestDropped(t *testing.T) {
	srv := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := port(t, srv.Addr().String())
	tp := startProxy(t, []string{"api.allowed.test:" + p, "127.0.0.1:" + p},
		map[string][]string{"api.allowed.test": {"127.0.0.1"}})
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET http://api.allowed.test:" + p + "/ HTTP/1.1\r\n\r\n"
	io.WriteString(c, req+req)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("first response: %v %v, want 200 with Connection: close", resp, err)
	}
	io.ReadAll(resp.Body)
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the first response: %q %v, want the end", rest, err)
	}
	if rep := reportOf(t, tp, 1); rep[0].BytesUp != int64(2*len(req)) {
		t.Errorf("report %+v: want both requests' bytes counted", rep[0])
	}
}
