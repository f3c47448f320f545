//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestEgressRefusesHostAddress serves on all of the host's addresses and
// has an *Egress run ask for an allowed name that resolves to one of
// the host's own non-loopback addresses. A CIDR rule for the address's
// whole network does not open it (the program gets 403, the server sees
// nothing, the report names an address of this host); a rule for exactly
// that address does.
func TestEgressRefusesHostAddress(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "curl")
	var own netip.Addr
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ifaddrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Is4() && !pfx.Addr().IsLoopback() && !pfx.Addr().IsLinkLocalUnicast() {
			own = pfx.Addr()
			break
		}
	}
	if !own.IsValid() {
		t.Skip("this host has no IPv4 address besides loopback and link-local to try")
	}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var reached atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			buf := make([]byte, 4096)
			c.Read(buf)
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nhost")
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	resolver := &fakeResolver{addrs: map[string][]string{"own.allowed.test": {own.String()}}}
	wider := netip.PrefixFrom(own, 24).Masked().String()
	curl := func() *Cmd {
		return Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://own.allowed.test:"+port+"/")
	}

	res := run(t, Options{Network: &Egress{Allow: []string{"own.allowed.test:" + port, wider + ":" + port}, Resolver: resolver}}, curl())
	if got := strings.TrimSpace(string(res.Stdout)); got != "403" {
		t.Errorf("with rule %s, curl to a name for %s got %q, want 403", wider, own, got)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("with rule %s the host's server on 0.0.0.0 was reached %d times", wider, n)
	}
	if len(res.Connections) != 1 || res.Connections[0].Allowed || !strings.Contains(res.Connections[0].Reason, "an address of this host") {
		t.Errorf("connections %+v, want one refused as an address of this host", res.Connections)
	}

	res = run(t, Options{Network: &Egress{Allow: []string{"own.allowed.test:" + port, own.String() + ":" + port}, Resolver: resolver}}, curl())
	if got := strings.TrimSpace(string(res.Stdout)); got != "200" {
		t.Errorf("with a rule for exactly %s, curl got %q, want 200 (stderr %s)", own, got, res.Stderr)
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("with a rule for exactly %s the server was reached %d times, want once", own, n)
	}
}
