package image

import (
	"regexp"
	"strings"
	"testing"
)

// TestIsBootID checks isBootID against the pattern it spells out.
func TestIsBootID(t *testing.T) {
	want := regexp.MustCompile(`^[0-9a-f-]{36}$`)
	ids := []string{"", "0b2f8d5e-6c1a-4a3b-9e7f-1d2c3b4a5f60", "0B2F8D5E-6C1A-4A3B-9E7F-1D2C3B4A5F60",
		"0b2f8d5e-6c1a-4a3b-9e7f-1d2c3b4a5f6", "0b2f8d5e-6c1a-4a3b-9e7f-1d2c3b4a5f600", strings.Repeat("-", 36),
		strings.Repeat("g", 36), "0b2f8d5e-6c1a-4a3b-9e7f-1d2c3b4a5f6\n", strings.Repeat("é", 18)}
	for _, id := range ids {
		if got := isBootID(id); got != want.MatchString(id) {
			t.Errorf("isBootID(%q) = %v, want %v", id, got, !got)
		}
	}
}
