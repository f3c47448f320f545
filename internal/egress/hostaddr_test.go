package egress

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// TestHostAddressRefused gives the proxy a host with one public and one
// private address and checks that names resolving to either, and literal
// requests for either, are refused as an address of this host even where
// a wider CIDR rule covers them, and reached with a rule for exactly the
// address. Another public address stays allowed.
func TestHostAddressRefused(t *testing.T) {
	echo := echoServer(t)
	own := []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2606:2800:220:1::34")}
	hosts := map[string][]string{
		"pub.allowed.test":   {"93.184.216.34"},
		"priv.allowed.test":  {"10.1.2.3"},
		"v6.allowed.test":    {"2606:2800:220:1::34"},
		"other.allowed.test": {"93.184.216.35"},
	}
	wide := []string{"*.allowed.test:7", "0.0.0.0/0:7", "10.0.0.0/8:7", "[::]/0:7"}
	start := func(rules []string) *testProxy {
		tp := startProxy(t, rules, hosts, func(p *Proxy) { p.hostAddrs = func() ([]netip.Addr, error) { return own, nil } })
		// Every dial reaches the echo server, so an allowed tunnel is seen
		// to work whatever address it was for.
		tp.dials.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, echo.Addr().String())
		}
		return tp
	}

	tp := start(wide)
	for _, target := range []string{"pub.allowed.test:7", "priv.allowed.test:7", "v6.allowed.test:7", "93.184.216.34:7", "10.1.2.3:7", "[2606:2800:220:1::34]:7"} {
		status, body := rawConnect(t, tp.addr, target)
		if status != 403 || !strings.Contains(body, "an address of this host") {
			t.Errorf("CONNECT %s with rules %q: %d %q, want 403 naming an address of this host", target, wide, status, body)
		}
	}
	if status, body := rawConnect(t, tp.addr, "other.allowed.test:7"); status != 200 {
		t.Errorf("CONNECT to a public address not the host's: %d %q, want 200", status, body)
	}
	if got := tp.dials.Addrs(); len(got) != 1 || got[0] != "93.184.216.35:7" {
		t.Errorf("dialed %q, want only the other public address", got)
	}

	exact := append(wide, "93.184.216.34:7", "10.1.2.3/32:7", "[2606:2800:220:1::34/128]:7")
	tp = start(exact)
	for _, target := range []string{"pub.allowed.test:7", "priv.allowed.test:7", "v6.allowed.test:7", "93.184.216.34:7", "10.1.2.3:7"} {
		if status, body := rawConnect(t, tp.addr, target); status != 200 {
			t.Errorf("CONNECT %s with a rule for exactly the address: %d %q, want 200", target, status, body)
		}
	}
	for _, c := range waitReport(t, tp.Proxy, 5) {
		if !c.Allowed || !strings.Contains(c.Reason, "an address of this host, opened by rule") {
			t.Errorf("report: %+v, want allowed with the rule that opened the host's address", c)
		}
	}
}

// TestHostAddressesListed checks the list the proxy refuses against the
// interfaces' own: every address on them is in it, and a name resolving to
// a non-loopback one of them is refused.
func TestHostAddressesListed(t *testing.T) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	got, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var target netip.Addr
	for _, a := range ifaddrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			t.Fatalf("interface address %q: %v", a, err)
		}
		ip := pfx.Addr()
		found := false
		for _, g := range got {
			found = found || g == ip
		}
		if !found {
			t.Errorf("%s is on an interface but not in the proxy's list %v", ip, got)
		}
		if !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !target.IsValid() {
			target = ip
		}
	}
	if !target.IsValid() {
		t.Skip("this host has no address besides loopback and link-local to try")
	}
	bits := 24
	if target.Is6() {
		bits = 64
	}
	wider := netip.PrefixFrom(target, bits).Masked().String()
	tp := startProxy(t, []string{"own.allowed.test:7", wider + ":7"}, map[string][]string{"own.allowed.test": {target.String()}})
	if status, body := rawConnect(t, tp.addr, "own.allowed.test:7"); status != 403 || !strings.Contains(body, "an address of this host") {
		t.Errorf("CONNECT to a name for %s with rule %s: %d %q, want 403 naming an address of this host", target, wider, status, body)
	}
}
