package access

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidTenant checks validTenant against the pattern it spells out.
func TestValidTenant(t *testing.T) {
	want := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	names := []string{"", "a", "0", "acme", "acme-corp.eu_1", "-a", ".a", "_a", "A", "aB", "a b", "a/b",
		"a\n", "\na", "é", "a\xff", strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62),
		"a" + strings.Repeat("-", 63)}
	for _, n := range names {
		if got := validTenant(n); got != want.MatchString(n) {
			t.Errorf("validTenant(%q) = %v, want %v", n, got, !got)
		}
	}
}
