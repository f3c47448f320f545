package egress

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseRules: an entry is refused with a RuleError naming it, or
// accepted; each part of an accepted rule's canonical form parses again to
// the same canonical part (with its first port).
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.pythonhosted.org", "api.example.com:8443", "example.com:8000-8100",
		"10.1.2.0/24:5432", "[fd00::/8]:443", "*.com", "169.254.169.254", "[::1]:80", "a..b", "x:0", "x:70000", "é.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		r, err := ParseRules([]string{entry})
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) || re.Index != 0 || re.Entry != entry || !errors.Is(err, ErrBadRule) {
				t.Fatalf("ParseRules(%q) = %v, want a RuleError naming entry 0", entry, err)
			}
			return
		}
		canon := r.String()
		if canon == "" {
			t.Fatalf("ParseRules(%q) accepted it with an empty canonical form", entry)
		}
		for _, part := range strings.Fields(canon) {
			i := strings.LastIndexByte(part, ':')
			host, ports := part[:i], part[i+1:]
			first, _, _ := strings.Cut(ports, ",")
			again, err := ParseRules([]string{host + ":" + first})
			if err != nil {
				t.Fatalf("ParseRules(%q) = %q, but %q does not parse: %v", entry, canon, host+":"+first, err)
			}
			if got := again.String(); !strings.HasPrefix(got, host+":") {
				t.Fatalf("ParseRules(%q) = %q; its part %q parses to %q", entry, canon, host+":"+first, got)
			}
		}
	})
}

// FuzzScrubber: a stream cut into pieces of any size is scrubbed as the
// whole text is (the one rule does not depend on where reads end), and
// no value is left whole between the placeholders put in.
func FuzzScrubber(f *testing.F) {
	f.Add("id-42", "id-42:pw", "a id-42:pw id-42 id-42:p", 3)
	f.Add("ab", "abc", "xxabcabab", 1)
	f.Add("aaa", "aa", "aaaaaaa", 2)
	f.Fuzz(func(t *testing.T, v1, v2, in string, size int) {
		if v1 == "" || v2 == "" || v1 == v2 || size <= 0 || size > len(in)+1 {
			return
		}
		p := &Proxy{Secrets: []Secret{{Value: v1, Placeholder: "\x00P1\x00"}, {Value: v2, Placeholder: "\x00P2\x00"}}}
		whole := p.scrubText(in)
		if got := scrubInPieces(p, in, size); got != whole {
			t.Fatalf("values %q %q, %q in pieces of %d: %q, the whole text %q", v1, v2, in, size, got, whole)
		}
		for _, piece := range strings.Split(whole, "\x00") {
			if piece != "P1" && piece != "P2" && (strings.Contains(piece, v1) || strings.Contains(piece, v2)) {
				t.Fatalf("values %q %q: %q scrubbed is %q, which holds one between placeholders", v1, v2, in, whole)
			}
		}
	})
}
