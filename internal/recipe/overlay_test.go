package recipe

import (
	"strings"
	"testing"
)

// TestOverlayLowerdirFits: the lowerdir option of MaxOverlayLayers layers
// fits the 255 bytes fsconfig takes for a string value, and one more
// layer would not, so the limit is the most the init can name.
func TestOverlayLowerdirFits(t *testing.T) {
	const fsconfigMax = 255
	if n := len(OverlayLowerdir(MaxOverlayLayers)); n > fsconfigMax {
		t.Errorf("%d layers: lowerdir is %d bytes, more than %d", MaxOverlayLayers, n, fsconfigMax)
	}
	if n := len(OverlayLowerdir(MaxOverlayLayers + 1)); n <= fsconfigMax {
		t.Errorf("%d layers: lowerdir is %d bytes, which fits: MaxOverlayLayers could be higher", MaxOverlayLayers+1, n)
	}
	if got := OverlayLowerdir(3); got != "0:1:2" {
		t.Errorf("3 layers: %q", got)
	}
	if strings.ContainsAny(OverlayLowerdir(MaxOverlayLayers), `,\`) {
		t.Error("lowerdir holds a character overlayfs would take as a separator or an escape")
	}
}
