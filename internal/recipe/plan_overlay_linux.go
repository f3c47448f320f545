//go:build linux

package recipe

import (
	"fmt"
	"strconv"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// An image whose layers are all in overlayfs's form (cfg.RootfsLayers)
// gets a read-only overlay of them as its root's source, mounted by the
// init in the sandbox's user namespace, in place of the hard-linked tree
// in cfg.Rootfs; the planner still reads that tree, which is the same.
//
// overlayfs takes its lower directories as one option, "lowerdir=a:b:c",
// which fsconfig bounds to 255 bytes, and in which ':', ',' and '\' in a
// path would need escaping (store paths hold digests and whatever the
// caller named). So the init names the layers by symlinks "0", "1", ...
// to their host directories in a scratch tmpfs of its own, and mounts the
// overlay with its working directory there: the option is short and
// needs no escaping, and the symlinks resolve on the host's tree, which
// is all still in view. The scratch mount is never attached.

// mountLayers adds the steps that mount the read-only overlay of
// cfg.RootfsLayers, detached, and returns its slot.
func (b *planner) mountLayers() forkplan.Slot {
	layers := b.cfg.RootfsLayers
	if len(layers) > MaxOverlayLayers {
		b.fail(&wire.SetupError{Stage: "mount", Op: "overlay of the image's layers",
			Text: fmt.Sprintf("%d layers, more than %d", len(layers), MaxOverlayLayers)})
		return -1
	}
	scratch := b.newFS("tmpfs", rwAttrs, "mode=0700", "size=1m", fmt.Sprintf("nr_inodes=%d", len(layers)+16))
	for i, l := range layers {
		b.call(forkplan.Where{Stage: "mount", Op: "name layer", Path: l}, unix.SYS_SYMLINKAT, forkplan.Str(l),
			forkplan.In(scratch), forkplan.Str(strconv.Itoa(i)))
	}
	b.call(forkplan.Where{Stage: "mount", Op: "chdir to the layers' names"}, unix.SYS_FCHDIR, forkplan.In(scratch))
	m := b.newFS("overlay", roAttrs, "lowerdir="+OverlayLowerdir(len(layers)), "userxattr")
	b.call(forkplan.Where{Stage: "mount", Op: "chdir /"}, unix.SYS_CHDIR, forkplan.Str("/"))
	b.close(scratch)
	return m
}
