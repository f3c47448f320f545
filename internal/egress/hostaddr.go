package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// hostAddrTTL is how long a list of the host's addresses is reused:
// listing them on every request would cost more than the request, and
// addresses change rarely (a DHCP renewal, an interface coming up).
const hostAddrTTL = time.Second

// hostAddrs caches the addresses on the interfaces of this process's
// network namespace, the one the proxy dials from.
var hostAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
	err   error
}

// interfaceAddrs returns the host's addresses, listed at most hostAddrTTL
// ago.
func interfaceAddrs() ([]netip.Addr, error) {
	hostAddrs.mu.Lock()
	defer hostAddrs.mu.Unlock()
	if !hostAddrs.at.IsZero() && time.Since(hostAddrs.at) < hostAddrTTL {
		return hostAddrs.addrs, hostAddrs.err
	}
	list, err := net.InterfaceAddrs()
	var addrs []netip.Addr
	for _, a := range list {
		if pfx, perr := netip.ParsePrefix(a.String()); perr == nil {
			addrs = append(addrs, pfx.Addr().Unmap().WithZone(""))
		}
	}
	hostAddrs.at, hostAddrs.addrs, hostAddrs.err = time.Now(), addrs, err
	return addrs, err
}

// checkAddr is Rules.checkAddr, and refuses every address of the host
// itself besides: a name that resolves to one of them would reach the
// host's own services listening on all addresses. Such an address opens
// only with a CIDR rule for exactly it (as the metadata service's does),
// so a rule opening a private network does not open the host's address in
// it. Loopback is left to its refused range (a rule inside 127.0.0.0/8
// opens it, on purpose).
func (p *Proxy) checkAddr(ip netip.Addr, port int, fromName bool) (ok bool, reason string) {
	ok, reason = p.Rules.checkAddr(ip, port, fromName)
	ip = ip.Unmap().WithZone("")
	if !ok || ip.IsLoopback() {
		return ok, reason
	}
	list := interfaceAddrs
	if p.hostAddrs != nil {
		list = p.hostAddrs
	}
	addrs, err := list()
	if err != nil {
		// Failure closes: an address that cannot be told apart from the
		// host's is not dialed.
		return false, fmt.Sprintf("cannot list the addresses of this host to check %s against them: %v", ip, err)
	}
	if !slices.Contains(addrs, ip) {
		return ok, reason
	}
	exact := netip.PrefixFrom(ip, ip.BitLen())
	if nr, _ := p.Rules.matchNet(ip, port, exact); nr != nil {
		return true, fmt.Sprintf("%s is an address of this host, opened by rule %d %q", ip, nr.index, nr.entry)
	}
	return false, fmt.Sprintf("%s is an address of this host and no CIDR rule for exactly that address allows port %d", ip, port)
}
