//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/recipe"
	"golang.org/x/sys/unix"
)

// roleOverlayProbe is a child that mounts an overlay of an image's layers
// as a sandbox's init would, and exits.
const roleOverlayProbe = "overlay-probe"

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
// of a sandbox user's: what the child tries is the init's mount of the
// layers (mountLayers), so a version that mounts them otherwise changes
// the name and asks again.
const overlayProbeKey = "overlay of the layers by symlinks, lowerdir and userxattr, v1; uid %d gid %d"

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
// opaque marks), and a store the sandbox's user can reach. A child of this
// binary, cloned into a sandbox's namespaces with the sandbox's ids, mounts
// them; the answer is kept for the rest of the process and in the store
// for the rest of the kernel's boot (storedOverlayProbe), and a failure is
// logged to log once per process, naming the image.
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
// new probe's. A probe's answer is kept when its child ran and told, not
// when it could not be started or was killed: that says nothing of the
// overlay. Where the store cannot be written, each process probes.
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
	err := probeOverlay(img.Layers, uid, gid)
	var exit *exec.ExitError
	switch {
	case err == nil:
		img.CacheProbe(key, []byte(probeMounted))
	case errors.As(err, &exit) && exit.ExitCode() == overlayRefusedStatus:
		img.CacheProbe(key, []byte(probeRefused+err.Error()))
	}
	return err
}

// probeOverlay runs the overlay probe's child.
func probeOverlay(layers []string, uid, gid int) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	attr := sysProcAttr(uid, gid, false)
	// The init mounts with its capabilities in the user namespace; the
	// child keeps CAP_SYS_ADMIN there across its exec for the same.
	attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	var stderr bytes.Buffer
	cmd := &exec.Cmd{Path: exe, Args: append([]string{"sandbox-overlay-probe"}, layers...),
		Env: roleEnviron(roleOverlayProbe), SysProcAttr: attr, Stderr: &stderr}
	overlayProbeRuns.Add(1)
	if err := startChild(cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("overlay of an image's layers: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// overlayRefusedStatus is the probe child's exit status when the overlay
// could not be mounted or read.
const overlayRefusedStatus = 1

// overlayProbeMain is the probe child's: it mounts the overlay of the
// layers its arguments name, as the init does (recipe's mountLayers),
// reads its top directory, and exits 0 if all went well.
func overlayProbeMain() {
	if err := mountOverlay(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(overlayRefusedStatus)
	}
	os.Exit(0)
}

func mountOverlay(layers []string) error {
	scratch, err := newMount("tmpfs", 0, nil)
	if err != nil {
		return err
	}
	for i, l := range layers {
		if err := unix.Symlinkat(l, scratch, strconv.Itoa(i)); err != nil {
			return fmt.Errorf("symlink to %s: %w", l, err)
		}
	}
	if err := unix.Fchdir(scratch); err != nil {
		return fmt.Errorf("fchdir: %w", err)
	}
	m, err := newMount("overlay", unix.MOUNT_ATTR_RDONLY, []string{"lowerdir=" + recipe.OverlayLowerdir(len(layers)), "userxattr"})
	if err != nil {
		return err
	}
	defer unix.Close(m)
	// A mount's fd is an O_PATH one: its directory is opened to be read.
	fd, err := unix.Openat(m, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the overlay: %w", err)
	}
	f := os.NewFile(uintptr(fd), "overlay")
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil {
		return fmt.Errorf("reading the overlay: %w", err)
	}
	return nil
}

// newMount makes a detached mount of a new fstype filesystem with opts,
// "key=value" or "flag", and returns its fd.
func newMount(fstype string, attrs int, opts []string) (int, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fs)
	for _, o := range opts {
		if k, v, ok := strings.Cut(o, "="); ok {
			err = unix.FsconfigSetString(fs, k, v)
		} else {
			err = unix.FsconfigSetFlag(fs, o)
		}
		if err != nil {
			return -1, fmt.Errorf("fsconfig %s %s: %w", fstype, o, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("fsconfig create %s: %w", fstype, err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount %s: %w", fstype, err)
	}
	return m, nil
}
