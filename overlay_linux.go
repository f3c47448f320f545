//go:build linux

package sandbox

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// overlayProbe is what one probe found: nil if the overlay mounted.
type overlayProbe struct {
	once sync.Once
	err  error
}

// overlayProbes holds a probe per stack of layers and sandbox user, so
// that each is tried once per process. What decides is mostly the kernel
// and the store, but a probe per image keeps one image's failure from
// denying the overlay to the others.
var overlayProbes sync.Map

// overlayProbeRuns counts the probe children started, for tests.
var overlayProbeRuns atomic.Int64

// overlayProbeKey names, in the answers an image store keeps, this probe
// of a sandbox user's: what the probe runs are the init's steps that mount
// the layers (recipe's mountLayers), so a version of them that mounts
// otherwise changes the name and asks again.
const overlayProbeKey = "overlay of the layers by symlinks, lowerdir and userxattr, v2; uid %d gid %d"

// The answers a store keeps: the first line says which, a refusal's
// reason follows.
const (
	probeMounted = "mounted\n"
	probeRefused = "refused\n"
)

// overlayWorks says whether a sandbox whose user maps to uid and gid can
// mount a read-only overlay of img's layers, directories of its image
// store, as its root's source. That takes Linux 5.11 (overlayfs in a user
// namespace, and userxattr, which such a mount needs to read the layers'
// opaque marks), and a store the sandbox's user can reach. A probe, cloned
// into a user and a mount namespace with the sandbox's ids, mounts them by
// the init's own steps (probeOverlay); the answer is kept for the rest of
// the process and in the store for the rest of the kernel's boot
// (storedOverlayProbe), and a failure is logged to log once per process,
// naming the image.
func overlayWorks(img *image.Image, uid, gid int, log *slog.Logger) bool {
	key := fmt.Sprintf("%d:%d:%s", uid, gid, strings.Join(img.Layers, "\x00"))
	v, _ := overlayProbes.LoadOrStore(key, &overlayProbe{})
	p := v.(*overlayProbe)
	p.once.Do(func() {
		p.err = storedOverlayProbe(img, uid, gid)
		if p.err != nil {
			log.Info("sandbox: image root: no overlay of the image's layers here, using its hard-linked root", "image", img.Ref, "err", p.err)
		}
	})
	return p.err == nil
}

// storedOverlayProbe is the overlay probe's answer for img's layers and a
// sandbox user uid:gid: the one img's store keeps, found in this boot of
// the kernel with these very layer directories (Image.CachedProbe), else a
// new probe's. A probe's answer is kept when all went well or its mount or
// read of the overlay failed, not when the probe could not be started,
// could not take its ids, or was killed: that says nothing of the overlay.
// Where the store cannot be written, each process probes.
//
// A stale answer cannot weaken a sandbox: the overlay and the hard-linked
// root are the same tree, both read-only. It could only refuse the overlay
// to a host that now allows it, or give it to one that no longer does, so
// that runs fail at their init's mount, until the next boot.
func storedOverlayProbe(img *image.Image, uid, gid int) error {
	key := fmt.Sprintf(overlayProbeKey, uid, gid)
	if b, ok := img.CachedProbe(key); ok {
		s := string(b)
		switch {
		case s == probeMounted:
			return nil
		case strings.HasPrefix(s, probeRefused):
			return fmt.Errorf("overlay of an image's layers, as a probe found earlier in this boot: %s", strings.TrimPrefix(s, probeRefused))
		}
	}
	se := probeOverlay(img.Layers, uid, gid)
	if se == nil {
		img.CacheProbe(key, []byte(probeMounted))
		return nil
	}
	err := fmt.Errorf("overlay of an image's layers: %w", probeError(se))
	if se.Stage == "mount" {
		img.CacheProbe(key, []byte(probeRefused+err.Error()))
	}
	return err
}

// probeOverlay clones a probe (launch.Probe) into a user and a mount
// namespace, with the sandbox's ids, that mounts the overlay of layers by
// the init's own steps and reads its top directory. The error is the
// step that failed, with its errno.
func probeOverlay(layers []string, uid, gid int) *wire.SetupError {
	overlayProbeRuns.Add(1)
	return launch.Probe(unix.CLONE_NEWUSER|unix.CLONE_NEWNS, layers, uid, gid)
}
