package egress

import (
	"fmt"
	"net/netip"
)

// refusedRange is a range of addresses the proxy does not dial unless a
// CIDR rule inside it opens it.
type refusedRange struct {
	prefix netip.Prefix
	what   string
}

// refusedRanges are the addresses that reach the host itself, its private
// networks, the cloud metadata service, or nowhere useful. IPv4-mapped
// IPv6 addresses (::ffff:a.b.c.d) are unmapped before they are checked, and
// the NAT64 and 6to4 forms are checked by the IPv4 address they carry (see
// classify).
var refusedRanges = func() []refusedRange {
	list := []struct{ prefix, what string }{
		{"0.0.0.0/8", "\"this network\" (reaches the host itself)"},
		{"0.0.0.0/32", "unspecified"},
		{"10.0.0.0/8", "private (RFC 1918)"},
		{"100.64.0.0/10", "shared address space / CGNAT (RFC 6598)"},
		{"100.100.100.200/32", "cloud metadata service (Alibaba)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"169.254.169.254/32", "cloud metadata service"},
		{"169.254.170.2/32", "container metadata service (AWS ECS)"},
		{"172.16.0.0/12", "private (RFC 1918)"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation (TEST-NET-1)"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private (RFC 1918)"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation (TEST-NET-2)"},
		{"203.0.113.0/24", "documentation (TEST-NET-3)"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		{"255.255.255.255/32", "broadcast"},

		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible (deprecated)"},
		{"::ffff:0:0:0/96", "IPv4-translated (SIIT)"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/32", "Teredo"},
		{"2001:db8::/32", "documentation"},
		{"3fff::/20", "documentation"},
		{"fc00::/7", "unique local"},
		{"fd00:ec2::254/128", "cloud metadata service (AWS)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	}
	out := make([]refusedRange, len(list))
	for i, r := range list {
		out[i] = refusedRange{netip.MustParsePrefix(r.prefix), r.what}
	}
	return out
}()

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known prefix
	sixToFour   = netip.MustParsePrefix("2002::/16")    // RFC 3056
)

// classify returns the most specific refused range that holds ip, and
// whether there is one. ip must be unmapped and have no zone. A NAT64
// (64:ff9b::/96) or 6to4 (2002::/16) address is refused when the IPv4
// address it carries is: a NAT64 gateway or 6to4 relay would forward it
// there. The range returned for those is the IPv6 form of the IPv4 range.
func classify(ip netip.Addr) (refusedRange, bool) {
	var best refusedRange
	found := false
	for _, r := range refusedRanges {
		if r.prefix.Contains(ip) && (!found || r.prefix.Bits() > best.prefix.Bits()) {
			best, found = r, true
		}
	}
	if found || !ip.Is6() {
		return best, found
	}
	b := ip.As16()
	var base netip.Prefix
	var v4 [4]byte
	switch {
	case nat64Prefix.Contains(ip):
		base = nat64Prefix
		copy(v4[:], b[12:16])
	case sixToFour.Contains(ip):
		base = sixToFour
		copy(v4[:], b[2:6])
	default:
		return best, false
	}
	inner, ok := classify(netip.AddrFrom4(v4))
	if !ok {
		return best, false
	}
	// The IPv6 prefix whose embedded IPv4 bits are inner's prefix.
	ia := inner.prefix.Addr().As4()
	copy(b[:], base.Addr().AsSlice())
	if base == nat64Prefix {
		copy(b[12:16], ia[:])
	} else {
		copy(b[2:6], ia[:])
	}
	p := netip.PrefixFrom(netip.AddrFrom16(b), base.Bits()+inner.prefix.Bits()).Masked()
	return refusedRange{p, fmt.Sprintf("%s form of %s %s (%s)", base, inner.what, inner.prefix, netip.AddrFrom4(v4))}, true
}

// checkAddr decides whether the proxy may dial ip on port. fromName says ip
// came from resolving a name a name rule allowed; then an address outside
// the refused ranges needs no CIDR rule. A literal address in a request
// (fromName false) must be in a CIDR rule. A refused range opens only for a
// CIDR rule inside it. reason says which rule allowed it or why not.
func (r *Rules) checkAddr(ip netip.Addr, port int, fromName bool) (ok bool, reason string) {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return false, "invalid address"
	}
	if rr, refused := classify(ip); refused {
		nr, wider := r.matchNet(ip, port, rr.prefix)
		if nr != nil {
			return true, fmt.Sprintf("%s is %s (%s), opened by rule %d %q", ip, rr.what, rr.prefix, nr.index, nr.entry)
		}
		reason = fmt.Sprintf("%s is %s (%s) and no CIDR rule inside that range allows port %d", ip, rr.what, rr.prefix, port)
		if wider != nil {
			reason += fmt.Sprintf(" (rule %d %q is wider than the range, which does not open it)", wider.index, wider.entry)
		}
		return false, reason
	}
	if fromName {
		return true, ""
	}
	if nr, _ := r.matchNet(ip, port, netip.Prefix{}); nr != nil {
		return true, fmt.Sprintf("allowed by rule %d %q", nr.index, nr.entry)
	}
	return false, fmt.Sprintf("%s port %d is not on the allowlist (name rules do not cover IP addresses)", ip, port)
}
