//go:build linux

package recipe

import (
	"fmt"
	"testing"
)

// TestCompileProbeLayers: a probe of more layers than an init can name is
// refused as the init's plan would be, before anything is cloned; one of
// as many as it can name compiles, with more steps than a namespace
// probe's by the mount and the read.
func TestCompileProbeLayers(t *testing.T) {
	layers := make([]string, MaxOverlayLayers+1)
	for i := range layers {
		layers[i] = fmt.Sprintf("/layers/%d", i)
	}
	if _, se := CompileProbe(3, 4, layers); se == nil || se.Stage != "mount" {
		t.Errorf("%d layers: %+v, want the mount refused", len(layers), se)
	}
	ns, se := CompileProbe(3, 4, nil)
	if se != nil {
		t.Fatal(se)
	}
	overlay, se := CompileProbe(3, 4, layers[:MaxOverlayLayers])
	if se != nil {
		t.Fatalf("%d layers: %+v", MaxOverlayLayers, se)
	}
	// Per layer a symlink; then the scratch's and the overlay's mounts
	// and the read, a dozen steps or more.
	if overlay.Len() < ns.Len()+MaxOverlayLayers+12 {
		t.Errorf("overlay probe of %d layers: %d steps, namespace probe: %d", MaxOverlayLayers, overlay.Len(), ns.Len())
	}
}
