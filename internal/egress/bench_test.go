package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"
)

const benchChunk = 64 << 10

// benchServer serves on loopback: a connection that starts with 'u'
// (upload) is read to EOF and answered with one byte; one that starts with
// 'd' and an 8-byte length (download) is sent that many bytes.
func benchServer(b *testing.B) net.Listener {
	return serveTCP(b, func(c net.Conn) {
		defer c.Close()
		var mode [1]byte
		if _, err := io.ReadFull(c, mode[:]); err != nil {
			return
		}
		switch mode[0] {
		case 'u':
			io.Copy(io.Discard, c)
			c.Write([]byte{'k'})
		case 'd':
			var n [8]byte
			if _, err := io.ReadFull(c, n[:]); err != nil {
				return
			}
			buf := make([]byte, benchChunk)
			for left := int64(binary.BigEndian.Uint64(n[:])); left > 0; left -= benchChunk {
				if _, err := c.Write(buf[:min(left, benchChunk)]); err != nil {
					return
				}
			}
		}
	})
}

// benchConn returns a connection to the bench server, through a CONNECT
// tunnel of tp if tp is not nil.
func benchConn(b *testing.B, tp *testProxy, target string) (net.Conn, io.Reader) {
	if tp == nil {
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	}
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		b.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(target)
	fmt.Fprintf(c, "CONNECT bench.allowed.test:%s HTTP/1.1\r\n\r\n", p)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c, br
}

// benchProxy has a work budget (CPUs) so large it never runs out: the
// benchmarks measure its bookkeeping, not its limit.
func benchProxy(b *testing.B) *testProxy {
	return startProxy(b, []string{"bench.allowed.test:1-65535", "127.0.0.0/8:1-65535"},
		map[string][]string{"bench.allowed.test": {"127.0.0.1"}}, func(p *Proxy) { p.CPUs = 1000 })
}

// BenchmarkThroughput moves data over loopback through a CONNECT tunnel
// and directly, each way; compare the MB/s.
func BenchmarkThroughput(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		for _, dir := range []string{"up", "down"} {
			b.Run(via+"/"+dir, func(b *testing.B) {
				srv := benchServer(b)
				var tp *testProxy
				if via == "proxy" {
					tp = benchProxy(b)
				}
				c, r := benchConn(b, tp, srv.Addr().String())
				defer c.Close()
				b.SetBytes(benchChunk)
				buf := make([]byte, benchChunk)
				b.ResetTimer()
				if dir == "up" {
					c.Write([]byte{'u'})
					for i := 0; i < b.N; i++ {
						if _, err := c.Write(buf); err != nil {
							b.Fatal(err)
						}
					}
					c.(*net.TCPConn).CloseWrite()
					if _, err := io.ReadFull(r, buf[:1]); err != nil {
						b.Fatal(err)
					}
				} else {
					var hdr [9]byte
					hdr[0] = 'd'
					binary.BigEndian.PutUint64(hdr[1:], uint64(b.N)*benchChunk)
					c.Write(hdr[:])
					if n, err := io.CopyBuffer(io.Discard, r, buf); err != nil || n != int64(b.N)*benchChunk {
						b.Fatalf("read %d, %v", n, err)
					}
				}
			})
		}
	}
}

// BenchmarkConnect is the time to open one tunnel: connect to the proxy,
// CONNECT, check and resolve the name (a fake resolver), dial loopback,
// read the 200.
func BenchmarkConnect(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			srv := benchServer(b)
			var tp *testProxy
			if via == "proxy" {
				tp = benchProxy(b)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, _ := benchConn(b, tp, srv.Addr().String())
				c.Close()
			}
		})
	}
}

// BenchmarkHTTPRequest is one plain HTTP GET through the proxy, on a
// kept-alive client connection (each request dials the server anew).
func BenchmarkHTTPRequest(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tp := benchProxy(b)
	c, _ := tp.client(nil)
	defer c.CloseIdleConnections()
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u := "http://bench.allowed.test:" + p + "/"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkConnMemory is what one open connection to the proxy makes the
// proxy's process hold (heap and goroutine stacks, after a collection),
// for connections that sent nothing, ones waiting in the middle of a
// header, and idle CONNECT tunnels.
func BenchmarkConnMemory(b *testing.B) {
	const conns = 200
	for _, state := range []string{"silent", "half-header", "idle-tunnel"} {
		b.Run(state, func(b *testing.B) {
			srv := benchServer(b)
			tp := startProxy(b, []string{"bench.allowed.test:1-65535", "127.0.0.0/8:1-65535"},
				map[string][]string{"bench.allowed.test": {"127.0.0.1"}},
				func(p *Proxy) { p.MaxConns = conns })
			var perConn float64
			for i := 0; i < b.N; i++ {
				before := liveBytes()
				var cs []net.Conn
				for range conns {
					switch state {
					case "idle-tunnel":
						c, _ := benchConn(b, tp, srv.Addr().String())
						cs = append(cs, c)
					default:
						c, err := net.Dial("tcp", tp.addr)
						if err != nil {
							b.Fatal(err)
						}
						if state == "half-header" {
							io.WriteString(c, "GET http://bench.allowed.test/ HTTP/1.1\r\nA: b\r\n")
						}
						cs = append(cs, c)
					}
				}
				waitSessions(b, tp.Proxy, conns)
				perConn = float64(liveBytes()-before) / conns
				for _, c := range cs {
					c.Close()
				}
				waitSessions(b, tp.Proxy, 0)
			}
			b.ReportMetric(perConn, "bytes/conn")
		})
	}
}

// bigHeader is a request header of about maxHeaderBytes in fields of a
// few bytes each, the most work per byte for a header parser.
func bigHeader(host string) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "GET http://%s/ HTTP/1.1\r\nHost: %[1]s\r\n", host)
	for i := 0; sb.Len() < maxHeaderBytes-1024; i++ {
		fmt.Fprintf(&sb, "X%x: y\r\n", i)
	}
	sb.WriteString("\r\n")
	return []byte(sb.String())
}

// BenchmarkHTTPLargeHeader sends one request with a header of about
// maxHeaderBytes in small fields per connection through the proxy: to an
// allowed name (forwarded to a server that answers without parsing it)
// and to a refused one (answered 403). It reports the process's CPU time
// per request too (user+system, the test's own ends included).
func BenchmarkHTTPLargeHeader(b *testing.B) {
	srv := serveTCP(b, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReaderSize(c, 64<<10)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
			if len(line) <= 2 {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	for _, to := range []string{"allowed", "refused"} {
		b.Run(to, func(b *testing.B) {
			tp := benchProxy(b)
			req := bigHeader("bench." + to + ".test:" + port)
			b.SetBytes(int64(len(req)))
			cpu0 := cpuNow()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := net.Dial("tcp", tp.addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				c.Close()
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuNow is this process's CPU time so far (user and system), in ns.
func cpuNow() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// liveBytes is the heap in use and goroutine stacks, after collections
// (two: what sync.Pool held survives one).
func liveBytes() int64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() + s[1].Value.Uint64())
}

// waitSessions waits until p serves n connections, and has read what they
// sent.
func waitSessions(b testing.TB, p *Proxy, n int) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		got := len(p.sessions)
		p.mu.Unlock()
		if got == n {
			time.Sleep(20 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d connections served, want %d", got, n)
		}
	}
}
