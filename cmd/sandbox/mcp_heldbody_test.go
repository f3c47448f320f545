package main

import (
	"fmt"
	"net"
	neturl "net/url"
	"testing"
	"time"
)

// TestMCPHTTPHeldBodies opens more connections than --max-sessions that
// each send a session-opening POST's headers and one byte of its body,
// then checks that a real client still opens a session and calls a tool:
// a request counts against --max-sessions only once its body has arrived.
func TestMCPHTTPHeldBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	url, stderr, _ := startHTTP(t, bin, "--max-sessions", "2")
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n{", u.Path, u.Host)
	}
	// The server reads the held requests' headers and enters their
	// handlers; nothing from outside shows when, so the test gives it time.
	time.Sleep(time.Second)
	cs, err := connectHTTP(t, url)
	if err != nil {
		t.Fatalf("a client with 3 held bodies open (--max-sessions 2): %v\nstderr:\n%s", err, stderr)
	}
	callOK(t, cs, "run", map[string]any{"argv": []string{"true"}}, nil)
}
