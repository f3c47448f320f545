//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

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

// overlayWorks says whether a sandbox whose user maps to uid and gid can
// mount a read-only overlay of layers, directories of one image store, as
// its root's source. That takes Linux 5.11 (overlayfs in a user
// namespace, and userxattr, which such a mount needs to read the layers'
// opaque marks), and a store the sandbox's user can reach. A child of this
// binary, cloned into a sandbox's namespaces with the sandbox's ids, mounts
// them; the answer is kept for the rest of the process, and a failure is
// logged to log once, naming ref.
func overlayWorks(layers []string, uid, gid int, ref string, log *slog.Logger) bool {
	key := fmt.Sprintf("%d:%d:%s", uid, gid, strings.Join(layers, "\x00"))
	v, _ := overlayProbes.LoadOrStore(key, &overlayProbe{})
	p := v.(*overlayProbe)
	p.once.Do(func() {
		p.err = probeOverlay(layers, uid, gid)
		if p.err != nil {
			log.Info("sandbox: image root: no overlay of the image's layers here, using its hard-linked root", "image", ref, "err", p.err)
		}
	})
	return p.err == nil
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
	if err := startChild(cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("overlay of an image's layers: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// overlayProbeMain is the probe child's: it mounts the overlay of the
// layers its arguments name, as the init does (recipe's mountLayers),
// reads its top directory, and exits 0 if all went well.
func overlayProbeMain() {
	if err := mountOverlay(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
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
