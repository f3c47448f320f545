package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrBadRule is matched (with errors.Is) by every error ParseRules returns.
// The error is a *RuleError naming the entry.
var ErrBadRule = errors.New("bad egress rule")

// RuleError says which allowlist entry is wrong and why. It matches
// ErrBadRule.
type RuleError struct {
	Index  int    // position of the entry in the list, from 0; -1 when the list as a whole is wrong
	Entry  string // the entry as given
	Reason string // what is wrong with it
}

// Error says which entry is wrong and why: `egress: rule 2 "x:0": port 0 out of range 1-65535`.
func (e *RuleError) Error() string {
	if e.Index < 0 {
		return "egress: " + e.Reason
	}
	return fmt.Sprintf("egress: rule %d %q: %s", e.Index, e.Entry, e.Reason)
}

// Is reports whether target is ErrBadRule.
func (e *RuleError) Is(target error) bool { return target == ErrBadRule }

// portRange is an inclusive range of TCP ports.
type portRange struct{ lo, hi uint16 }

// portSet is the ports a rule allows.
type portSet []portRange

// defaultPorts is what an entry without a port allows: HTTP and HTTPS.
var defaultPorts = portSet{{80, 80}, {443, 443}}

func (ps portSet) has(port int) bool {
	for _, r := range ps {
		if port >= int(r.lo) && port <= int(r.hi) {
			return true
		}
	}
	return false
}

func (ps portSet) String() string {
	var b strings.Builder
	for i, r := range ps {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.Itoa(int(r.lo)))
		if r.hi != r.lo {
			b.WriteString("-")
			b.WriteString(strconv.Itoa(int(r.hi)))
		}
	}
	return b.String()
}

// nameRule allows a host name (or, if wildcard, every name below it).
type nameRule struct {
	index    int
	entry    string
	name     string // lower case, no trailing dot, without the "*." of a wildcard
	wildcard bool
	ports    portSet
}

func (r *nameRule) matches(name string) bool {
	if r.wildcard {
		return len(name) > len(r.name)+1 && strings.HasSuffix(name, r.name) && name[len(name)-len(r.name)-1] == '.'
	}
	return name == r.name
}

// netRule allows the addresses of a CIDR range.
type netRule struct {
	index  int
	entry  string
	prefix netip.Prefix // canonical (masked), never IPv4-mapped, no zone
	ports  portSet
}

// Rules is a parsed egress allowlist; make one with ParseRules. It is
// read-only once made and safe for concurrent use.
//
// An entry is one of:
//
//	example.com            the name itself (not its subdomains)
//	*.example.com          every name below example.com, at any depth, but not example.com itself
//	10.1.2.0/24            the addresses of a range (IPv4)
//	10.1.2.3               one address (the same as 10.1.2.3/32)
//	fd00::/8, fd00::1      IPv6 range or address, without a port
//	[fd00::]/8, [fd00::/8], [fd00::1]   IPv6 in brackets, which may be followed by a port
//
// each optionally followed by ":port" or ":low-high" (inclusive). An entry
// without a port allows ports 80 and 443 only; write one entry per port or
// range. Names are matched without regard to case, and one trailing dot is
// ignored. Only ASCII names are accepted: give an internationalized name in
// its punycode ("xn--") form, as DNS carries it. A wildcard must have at
// least two labels after "*." (so "*.com" is refused as a likely mistake).
//
// Name entries allow the name; the proxy then resolves it and dials only
// addresses outside the refused ranges (loopback, private, link-local,
// metadata, ...; see the package documentation). CIDR entries do two
// things: they allow requests for literal IP addresses in the range (name
// entries never cover an IP literal), and they open a refused range, for
// names and literals alike, but only where the CIDR entry lies inside that
// range: 10.0.0.0/8 or 10.1.2.0/24 opens those private addresses, while
// 0.0.0.0/0 allows every public address and opens no refused range, and the
// cloud metadata address 169.254.169.254 opens only with an entry for
// exactly it (169.254.0.0/16 does not). The ports of the CIDR entry apply.
type Rules struct {
	names []nameRule
	nets  []netRule
}

// ParseRules parses an allowlist (see Rules for the syntax). An empty list,
// a malformed entry, a port outside 1-65535 or a bad CIDR range is an error
// wrapping ErrBadRule, a *RuleError naming the first wrong entry by its
// index and text. Surrounding white space in an entry is ignored.
func ParseRules(entries []string) (*Rules, error) {
	if len(entries) == 0 {
		return nil, &RuleError{Index: -1, Reason: "the allowlist is empty (no entries)"}
	}
	r := &Rules{}
	for i, e := range entries {
		if reason := r.add(i, e); reason != "" {
			return nil, &RuleError{Index: i, Entry: e, Reason: reason}
		}
	}
	return r, nil
}

// String returns the rules in a canonical form, separated by spaces, each
// with all its ports ("example.com:80,443 10.0.0.0/8:5432").
func (r *Rules) String() string {
	var parts []string
	for _, n := range r.names {
		s := n.name
		if n.wildcard {
			s = "*." + s
		}
		parts = append(parts, s+":"+n.ports.String())
	}
	for _, n := range r.nets {
		s := n.prefix.String()
		if n.prefix.Addr().Is6() {
			s = "[" + s + "]"
		}
		parts = append(parts, s+":"+n.ports.String())
	}
	return strings.Join(parts, " ")
}

// add parses one entry into r and returns "" or why it is wrong.
func (r *Rules) add(index int, entry string) string {
	s := strings.TrimSpace(entry)
	if s == "" {
		return "empty entry"
	}
	host, portText, hasPort, bracketed, reason := splitEntry(s)
	if reason != "" {
		return reason
	}
	ports := defaultPorts
	if hasPort {
		pr, reason := parsePorts(portText)
		if reason != "" {
			return reason
		}
		ports = portSet{pr}
	}
	if p, isNet, reason := parseNet(host, bracketed); reason != "" {
		return reason
	} else if isNet {
		r.nets = append(r.nets, netRule{index: index, entry: entry, prefix: p, ports: ports})
		return ""
	}
	wildcard := false
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		wildcard = true
		host = rest
	}
	if strings.Contains(host, "*") {
		return `"*" is allowed only as a whole first label ("*.example.com")`
	}
	name, reason := normalizeName(host)
	if reason != "" {
		return reason
	}
	if wildcard && !strings.Contains(name, ".") {
		return fmt.Sprintf("wildcard over a single label (*.%s) would allow a whole top-level domain", name)
	}
	r.names = append(r.names, nameRule{index: index, entry: entry, name: name, wildcard: wildcard, ports: ports})
	return ""
}

// splitEntry splits an entry into its host part and port text.
func splitEntry(s string) (host, port string, hasPort, bracketed bool, reason string) {
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, false, `"[" without a closing "]"`
		}
		host, rest := s[1:end], s[end+1:]
		if strings.HasPrefix(rest, "/") {
			if strings.Contains(host, "/") {
				return "", "", false, false, "prefix length given twice"
			}
			i := strings.IndexByte(rest, ':')
			if i < 0 {
				i = len(rest)
			}
			host, rest = host+rest[:i], rest[i:]
		}
		if rest == "" {
			return host, "", false, true, ""
		}
		if rest[0] != ':' {
			return "", "", false, false, fmt.Sprintf("unexpected %q after the address", rest)
		}
		return host, rest[1:], true, true, ""
	case strings.Count(s, ":") > 1:
		// A bare IPv6 address or range; it cannot carry a port.
		return s, "", false, false, ""
	default:
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			return s[:i], s[i+1:], true, false, ""
		}
		return s, "", false, false, ""
	}
}

// parsePorts parses "443" or "8000-8100".
func parsePorts(s string) (portRange, string) {
	if s == "" {
		return portRange{}, "empty port after \":\""
	}
	loText, hiText, isRange := strings.Cut(s, "-")
	lo, reason := parsePort(loText)
	if reason != "" {
		return portRange{}, reason
	}
	hi := lo
	if isRange {
		if hi, reason = parsePort(hiText); reason != "" {
			return portRange{}, reason
		}
		if lo > hi {
			return portRange{}, fmt.Sprintf("port range %d-%d is reversed", lo, hi)
		}
	}
	return portRange{uint16(lo), uint16(hi)}, ""
}

// parsePort parses a decimal TCP port, 1 to 65535.
func parsePort(s string) (int, string) {
	if s == "" {
		return 0, "empty port"
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("port %q is not a decimal number", s)
		}
	}
	if len(s) > 5 {
		return 0, fmt.Sprintf("port %s out of range 1-65535", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Sprintf("port %d out of range 1-65535", n)
	}
	return n, ""
}

// parseNet parses an IP address or CIDR range. isNet is false (and reason
// "") when s is not an address, so it may be a name.
func parseNet(s string, bracketed bool) (p netip.Prefix, isNet bool, reason string) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			reason := fmt.Sprintf("bad CIDR range: %v", err)
			if _, bits, _ := strings.Cut(s, "/"); !bracketed && strings.Contains(bits, ":") {
				reason += " (an IPv6 range with a port goes in brackets: [fd00::]/8:443)"
			}
			return p, false, reason
		}
		return checkPrefix(p, bracketed)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		if bracketed || strings.Contains(s, ":") {
			return netip.Prefix{}, false, fmt.Sprintf("bad IPv6 address: %v", err)
		}
		return netip.Prefix{}, false, ""
	}
	if a.Zone() != "" {
		return netip.Prefix{}, false, "IPv6 zones are not allowed"
	}
	return checkPrefix(netip.PrefixFrom(a, a.BitLen()), bracketed)
}

func checkPrefix(p netip.Prefix, bracketed bool) (netip.Prefix, bool, string) {
	a := p.Addr()
	switch {
	case a.Is4() && bracketed:
		return p, false, "brackets are for IPv6 addresses; write IPv4 without them"
	case a.Is4In6():
		return p, false, fmt.Sprintf("IPv4-mapped IPv6 range: write it in IPv4 form (%s)", a.Unmap())
	case p != p.Masked():
		return p, false, fmt.Sprintf("address bits set beyond the prefix length (did you mean %s?)", p.Masked())
	}
	return p, true, ""
}

// normalizeName lowercases a host name, strips one trailing dot and checks
// its syntax: ASCII labels of letters, digits, "-" and "_", 1 to 63 bytes,
// not starting or ending with "-", at most 253 bytes in all, and a last
// label that is not all digits (such names are IP addresses to some
// resolvers: "127.1", "2130706433"). It returns the name or why it is bad.
func normalizeName(s string) (string, string) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", "non-ASCII host name: give it in punycode form (xn--...), as DNS carries it"
		}
	}
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" {
		return "", "empty host name"
	}
	if len(s) > 253 {
		return "", "host name longer than 253 bytes"
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" {
			return "", "empty label in host name"
		}
		if len(l) > 63 {
			return "", fmt.Sprintf("label %.20q... longer than 63 bytes", l)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Sprintf("label %q starts or ends with \"-\"", l)
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Sprintf("character %q not allowed in a host name", c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return "", "last label is all digits: neither a host name nor a valid IP address"
	}
	return s, ""
}

// matchName returns the first name rule that allows name on port, or nil
// and why not. name must be normalized.
func (r *Rules) matchName(name string, port int) (*nameRule, string) {
	var other *nameRule
	for i := range r.names {
		nr := &r.names[i]
		if !nr.matches(name) {
			continue
		}
		if nr.ports.has(port) {
			return nr, ""
		}
		if other == nil {
			other = nr
		}
	}
	if other != nil {
		return nil, fmt.Sprintf("%s is allowed on ports %s only (rule %d %q), not %d", name, other.ports, other.index, other.entry, port)
	}
	for i := range r.names {
		if nr := &r.names[i]; nr.wildcard && nr.name == name {
			return nil, fmt.Sprintf("%s is not on the allowlist (rule %d %q matches subdomains only)", name, nr.index, nr.entry)
		}
	}
	return nil, fmt.Sprintf("%s is not on the allowlist", name)
}

// matchNet returns the first CIDR rule that holds ip, allows port and lies
// inside within (when within is valid). wider is a rule that holds ip and
// port but is wider than within, for the error message.
func (r *Rules) matchNet(ip netip.Addr, port int, within netip.Prefix) (match, wider *netRule) {
	for i := range r.nets {
		nr := &r.nets[i]
		if !nr.prefix.Contains(ip) || !nr.ports.has(port) {
			continue
		}
		if within.IsValid() && nr.prefix.Bits() < within.Bits() {
			if wider == nil {
				wider = nr
			}
			continue
		}
		return nr, nil
	}
	return nil, wider
}
