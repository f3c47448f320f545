package sandbox

import (
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/recipe"
)

// hardLinkedRootOnly makes every image's sandbox use its hard-linked
// root, as where the kernel mounts no overlay: tests compare the two.
var hardLinkedRootOnly atomic.Bool

// rootfsLayers are the pulled image's layers, top first, when the
// sandbox's root is their overlay: every layer is stored in overlay form,
// there are two or more and no more than the init can name, and this host lets the
// sandbox's user mount such an overlay (overlayWorks). Nil otherwise: the
// root is the image's hard-linked tree.
func (o *resolved) rootfsLayers(pulled *image.Image) []string {
	if pulled == nil || hardLinkedRootOnly.Load() {
		return nil
	}
	// overlayfs takes two lower directories at least when it has no upper
	// one: an image of one layer has the hard-linked root, the same tree
	// at no more cost.
	layers := pulled.Layers
	if len(layers) < 2 || len(layers) > recipe.MaxOverlayLayers {
		return nil
	}
	uid, gid := o.HostIDs()
	if !overlayWorks(pulled, uid, gid, o.logger()) {
		return nil
	}
	return layers
}
