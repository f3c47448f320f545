//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
)

// pullSize is what one iteration of BenchmarkEgressThroughput moves.
const pullSize = 64 << 20

func init() {
	// pull connects args[2] times to the server at args[0], through the
	// proxy with a CONNECT when args[1] is "proxy", directly otherwise,
	// and reads pullSize bytes each time.
	helpers["pull"] = func(args []string) int {
		n, _ := strconv.Atoi(args[2])
		buf := make([]byte, 256<<10)
		for range n {
			var c net.Conn
			var r io.Reader
			var err error
			if args[1] == "proxy" {
				if c, err = net.Dial("tcp", ProxyAddr); err == nil {
					fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", args[0])
					br := bufio.NewReader(c)
					var resp *http.Response
					if resp, err = http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("CONNECT: %s", resp.Status)
					}
					r = br
				}
			} else if c, err = net.Dial("tcp", args[0]); err == nil {
				r = c
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			got, err := io.CopyBuffer(io.Discard, io.LimitReader(r, pullSize), buf)
			c.Close()
			if err != nil || got != pullSize {
				fmt.Fprintln(os.Stderr, got, err)
				return 1
			}
		}
		return 0
	}
}

// BenchmarkRunTrueAllow is BenchmarkRunTrue in Egress mode: the
// difference is the start-up cost of the egress proxy (the listener made
// in the run and handed out, the proxy started and stopped).
func BenchmarkRunTrueAllow(b *testing.B) {
	benchRun(b, Options{Network: &Egress{Allow: []string{"example.com"}}}, "/bin/true")
}

// BenchmarkEgressThroughput moves 64 MiB an iteration from a server on the
// host's loopback into a sandbox: through the egress proxy (a CONNECT
// tunnel), and, for the ratio, directly over the host's network.
func BenchmarkEgressThroughput(b *testing.B) {
	requireSandbox(b)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		b.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	defer ln.Close()
	go func() {
		chunk := make([]byte, 256<<10)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := pullSize; left > 0; left -= len(chunk) {
					if _, err := c.Write(chunk[:min(left, len(chunk))]); err != nil {
						return
					}
				}
			}()
		}
	}()
	for _, via := range []string{"proxy", "direct"} {
		b.Run(via, func(b *testing.B) {
			opts := Options{Binds: []Bind{helperBind(b)}, Network: &Egress{Allow: []string{"127.0.0.2:1-65535"}}}
			if via == "direct" {
				opts.Network = HostNetworkUnsafe{}
			}
			s := newTest(b, opts)
			b.SetBytes(pullSize)
			b.ResetTimer()
			res, err := s.Run(context.Background(), helperCmd("pull", ln.Addr().String(), via, strconv.Itoa(b.N)))
			if err != nil || !res.Success() {
				b.Fatalf("%v %+v\n%s", err, res, res.Stderr)
			}
		})
	}
}
