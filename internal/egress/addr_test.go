package egress

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAddrPolicy checks each refused range, through the addresses a name
// may resolve to (no CIDR rule needed for public ones). No connection is
// made to any of them.
func TestAddrPolicy(t *testing.T) {
	r, err := ParseRules([]string{"example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		why  string // "" = allowed, else a substring of the refusal
	}{
		// Public-looking addresses.
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:2800:220:1:248:1893:25c8:1946", ""},
		{"::ffff:93.184.216.34", ""},
		{"64:ff9b::5db8:d822", ""}, // NAT64 form of 93.184.216.34
		{"2002:5db8:d822::1", ""},  // 6to4 form of 93.184.216.34
		{"100.63.255.255", ""},     // just below CGNAT
		{"100.128.0.0", ""},        // just above CGNAT
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"11.0.0.0", ""},

		// Refused IPv4.
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"100.100.100.200", "metadata"},
		{"169.254.1.1", "link-local"},
		{"169.254.169.254", "metadata"},
		{"169.254.170.2", "metadata"},
		{"192.0.0.170", "IETF"},
		{"192.0.2.1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},

		// IPv4-mapped IPv6 is the IPv4 address.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "metadata"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:0.0.0.0", "unspecified"},

		// Refused IPv6.
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::ffff:0:7f00:1", "SIIT"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fd00:ec2::254", "metadata"},
		{"ff02::1", "multicast"},
		{"ff05::1:3", "multicast"},
		{"2001:db8::1", "documentation"},
		{"2001::1", "Teredo"},
		{"100::1", "discard"},
		{"64:ff9b:1::a", "local-use NAT64"},

		// NAT64 and 6to4 forms of refused IPv4 addresses.
		{"64:ff9b::7f00:1", "loopback"},
		{"64:ff9b::a9fe:a9fe", "metadata"},
		{"64:ff9b::a00:1", "private"},
		{"2002:7f00:1::1", "loopback"},
		{"2002:a9fe:a9fe::", "metadata"},
		{"2002:c0a8:101::1", "private"},
	} {
		ok, why := r.checkAddr(netip.MustParseAddr(tc.addr), 443, true)
		if tc.why == "" {
			if !ok {
				t.Errorf("%s refused (%s), want allowed", tc.addr, why)
			}
			continue
		}
		if ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: allowed %v (%q), want refused for %q", tc.addr, ok, why, tc.why)
		}
	}
}

// TestAddrPolicyCIDR checks that literal addresses need a CIDR rule, and
// that a CIDR rule opens a refused range only from inside it.
func TestAddrPolicyCIDR(t *testing.T) {
	r, err := ParseRules([]string{
		"example.com",
		"10.1.2.0/24:5432",
		"127.0.0.0/8:8080",
		"169.254.0.0/16",
		"0.0.0.0/0:9000",
		"93.184.216.0/24",
		"[fd00:1::]/32",
		"169.254.169.254:80",
		"[::]/0:9000",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr     string
		port     int
		fromName bool
		allow    bool
	}{
		{"10.1.2.3", 5432, true, true},
		{"10.1.2.3", 5432, false, true},
		{"10.1.2.3", 443, true, false}, // the rule's port only
		{"10.1.3.3", 5432, true, false},
		{"::ffff:10.1.2.3", 5432, false, true},
		{"127.0.0.1", 8080, false, true},
		{"127.0.0.1", 8081, false, false},
		{"169.254.1.1", 443, false, true},
		{"169.254.169.254", 443, false, false}, // 169.254.0.0/16 does not open the metadata address
		{"169.254.169.254", 80, false, true},   // its own rule does
		{"::ffff:169.254.169.254", 443, true, false},
		{"127.0.0.1", 9000, false, false},        // 0.0.0.0/0 opens no refused range
		{"10.0.0.1", 9000, true, false},          // nor private ones
		{"93.184.216.34", 9000, false, true},     // but allows public literals
		{"93.184.216.34", 443, false, true},      // 93.184.216.0/24
		{"93.184.217.34", 443, false, false},     // a literal outside every CIDR rule
		{"93.184.217.34", 443, true, true},       // the same from an allowed name
		{"fd00:1::5", 443, true, true},           // inside fc00::/7, so it opens
		{"fd00:2::5", 443, true, false},          // not in the rule
		{"::1", 9000, false, false},              // ::/0 opens nothing refused
		{"2606:4700::1111", 9000, false, true},   // but allows public literals
		{"64:ff9b::a01:203", 5432, false, false}, // NAT64 form needs an IPv6 rule
	} {
		ok, why := r.checkAddr(netip.MustParseAddr(tc.addr), tc.port, tc.fromName)
		if ok != tc.allow {
			t.Errorf("checkAddr(%s, %d, fromName %v) = %v (%s), want %v", tc.addr, tc.port, tc.fromName, ok, why, tc.allow)
		}
	}
}

func TestClassifyEmbeddedRange(t *testing.T) {
	rr, ok := classify(netip.MustParseAddr("64:ff9b::a9fe:a9fe"))
	if !ok || rr.prefix != netip.MustParsePrefix("64:ff9b::a9fe:a9fe/128") {
		t.Errorf("NAT64 metadata: %v %v", rr, ok)
	}
	rr, ok = classify(netip.MustParseAddr("2002:0a01:0203::1"))
	if !ok || rr.prefix != netip.MustParsePrefix("2002:a00::/24") {
		t.Errorf("6to4 private: %v %v", rr, ok)
	}
}
