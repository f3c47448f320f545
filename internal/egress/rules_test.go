package egress

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  string // Rules.String()
	}{
		{"example.com", "example.com:80,443"},
		{"Example.COM.", "example.com:80,443"},
		{"  example.com  ", "example.com:80,443"},
		{"example.com:8080", "example.com:8080"},
		{"example.com:8000-8100", "example.com:8000-8100"},
		{"example.com:1-65535", "example.com:1-65535"},
		{"*.example.com", "*.example.com:80,443"},
		{"*.Example.com.:443", "*.example.com:443"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example:80,443"},
		{"_acme.example.com", "_acme.example.com:80,443"},
		{"localhost", "localhost:80,443"},
		{"a-b.c9.example", "a-b.c9.example:80,443"},
		{"10.1.2.0/24", "10.1.2.0/24:80,443"},
		{"10.1.2.0/24:5432", "10.1.2.0/24:5432"},
		{"10.1.2.3", "10.1.2.3/32:80,443"},
		{"10.1.2.3:22", "10.1.2.3/32:22"},
		{"0.0.0.0/0:1-65535", "0.0.0.0/0:1-65535"},
		{"fd00::/8", "[fd00::/8]:80,443"},
		{"fd00::1", "[fd00::1/128]:80,443"},
		{"[fd00::]/8", "[fd00::/8]:80,443"},
		{"[fd00::]/8:443", "[fd00::/8]:443"},
		{"[fd00::/8]:8000-8001", "[fd00::/8]:8000-8001"},
		{"[::1]:8080", "[::1/128]:8080"},
	} {
		r, err := ParseRules([]string{tc.entry})
		if err != nil {
			t.Errorf("ParseRules(%q): %v", tc.entry, err)
			continue
		}
		if got := r.String(); got != tc.want {
			t.Errorf("ParseRules(%q) = %q, want %q", tc.entry, got, tc.want)
		}
	}
}

func TestParseRulesBad(t *testing.T) {
	for _, tc := range []struct {
		entry  string
		reason string // a substring of the reason
	}{
		{"", "empty entry"},
		{"   ", "empty entry"},
		{"example.com:0", "out of range"},
		{"example.com:65536", "out of range"},
		{"example.com:99999999", "out of range"},
		{"example.com:", "empty port"},
		{"example.com:http", "not a decimal"},
		{"example.com:-1", "empty port"},
		{"example.com:+80", "not a decimal"},
		{"example.com:90-80", "reversed"},
		{"example.com:80-", "empty port"},
		{"example.com:80-70000", "out of range"},
		{"*", `"*" is allowed only`},
		{"*.com", "whole top-level domain"},
		{"*example.com", `"*" is allowed only`},
		{"a.*.example.com", `"*" is allowed only`},
		{"*.*.example.com", `"*" is allowed only`},
		{"**.example.com", `"*" is allowed only`},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"-a.example.com", "starts or ends"},
		{"a-.example.com", "starts or ends"},
		{"exa mple.com", "not allowed"},
		{"exa/mple.com", "bad CIDR"},
		{"http://example.com", "not a decimal"},
		{"bücher.example", "punycode"},
		{"例え.jp", "punycode"},
		{strings.Repeat("a", 64) + ".example.com", "longer than 63"},
		{strings.Repeat("abcdefghi.", 26) + "com", "longer than 253"},
		{"10.1.2.300", "all digits"},
		{"127.1", "all digits"},
		{"2130706433", "all digits"},
		{"0x7f.1", "all digits"},
		{"10.1.2.3/24", "did you mean 10.1.2.0/24"},
		{"10.1.2.0/33", "bad CIDR"},
		{"10.1.2.0/", "bad CIDR"},
		{"10.1.2.0/24:0", "out of range"},
		{"[10.1.2.0]/24", "brackets are for IPv6"},
		{"[fd00::]/8/9", "bad CIDR"},
		{"[fd00::/8]/8", "prefix length given twice"},
		{"[fd00::", "without a closing"},
		{"[fd00::]x", "unexpected"},
		{"[example.com]:443", "bad IPv6"},
		{"fd00::1/8", "did you mean fd00::/8"},
		{"fe80::1%eth0", "zones"},
		{"::ffff:10.0.0.0/104", "IPv4-mapped"},
		{"[::ffff:127.0.0.1]", "IPv4-mapped"},
		{"gggg::1", "bad IPv6"},
		{"fd00::/8:443", "goes in brackets"},
	} {
		entries := []string{"ok.example", tc.entry}
		_, err := ParseRules(entries)
		if err == nil {
			t.Errorf("ParseRules(%q): no error", tc.entry)
			continue
		}
		if !errors.Is(err, ErrBadRule) {
			t.Errorf("ParseRules(%q): %v does not match ErrBadRule", tc.entry, err)
		}
		var re *RuleError
		if !errors.As(err, &re) {
			t.Errorf("ParseRules(%q): %T is not a *RuleError", tc.entry, err)
			continue
		}
		if re.Index != 1 || re.Entry != tc.entry {
			t.Errorf("ParseRules(%q): error names entry %d %q", tc.entry, re.Index, re.Entry)
		}
		if !strings.Contains(re.Reason, tc.reason) {
			t.Errorf("ParseRules(%q): reason %q does not say %q", tc.entry, re.Reason, tc.reason)
		}
		if want := fmt.Sprintf("rule 1 %q", tc.entry); !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRules(%q): message %q does not name %s", tc.entry, err, want)
		}
	}
}

func TestParseRulesEmpty(t *testing.T) {
	for _, entries := range [][]string{nil, {}} {
		_, err := ParseRules(entries)
		var re *RuleError
		if !errors.Is(err, ErrBadRule) || !errors.As(err, &re) || re.Index != -1 || !strings.Contains(err.Error(), "empty") {
			t.Errorf("ParseRules(%#v) = %v, want an empty-list RuleError", entries, err)
		}
	}
}

func TestMatchName(t *testing.T) {
	r, err := ParseRules([]string{"example.com", "*.example.org", "api.example.net:8443", "*.ports.example:8000-8010"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		port  int
		allow bool
		why   string // substring of the refusal
	}{
		{"example.com", 443, true, ""},
		{"example.com", 80, true, ""},
		{"example.com", 8080, false, "ports 80,443 only"},
		{"www.example.com", 443, false, "not on the allowlist"}, // exact rules do not cover subdomains
		{"a.example.org", 443, true, ""},
		{"a.b.c.example.org", 443, true, ""},
		{"example.org", 443, false, "subdomains only"}, // the apex is not matched by the wildcard
		{"badexample.org", 443, false, "not on the allowlist"},
		{"xexample.org", 443, false, "not on the allowlist"},
		{"api.example.net", 8443, true, ""},
		{"api.example.net", 443, false, "8443 only"},
		{"x.ports.example", 8000, true, ""},
		{"x.ports.example", 8010, true, ""},
		{"x.ports.example", 8011, false, "8000-8010 only"},
		{"evil.test", 443, false, "not on the allowlist"},
	} {
		nr, why := r.matchName(tc.name, tc.port)
		if (nr != nil) != tc.allow || !strings.Contains(why, tc.why) {
			t.Errorf("matchName(%q, %d) = %v, %q; want allowed %v, reason with %q", tc.name, tc.port, nr != nil, why, tc.allow, tc.why)
		}
	}
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"API.Example.COM.": "api.example.com",
		"a.b":              "a.b",
		"x1.y2":            "x1.y2",
		"1.example":        "1.example",
	} {
		if got, why := normalizeName(in); got != want || why != "" {
			t.Errorf("normalizeName(%q) = %q, %q; want %q", in, got, why, want)
		}
	}
	for _, in := range []string{"", ".", "a..b", "a b", "a\x00b", "a\r\nb", "ex*ample.com", "1.2.3.4", "::1", "a.-b", "é.com"} {
		if got, why := normalizeName(in); why == "" {
			t.Errorf("normalizeName(%q) = %q, want an error", in, got)
		}
	}
}

func ExampleParseRules() {
	_, err := ParseRules([]string{"pypi.org", "*.pythonhosted.org", "files.example.com:99999"})
	fmt.Println(err)
	rules, _ := ParseRules([]string{"pypi.org", "*.pythonhosted.org", "10.1.2.0/24:5432"})
	fmt.Println(rules)
	// Output:
	// egress: rule 2 "files.example.com:99999": port 99999 out of range 1-65535
	// pypi.org:80,443 *.pythonhosted.org:80,443 10.1.2.0/24:5432
}
