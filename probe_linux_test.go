//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/launch"
	"golang.org/x/sys/unix"
)

// TestProbeFailures: a namespace probe that cannot be cloned, or whose
// id maps cannot be written, says which, with the errno, and names the
// namespace it tried.
func TestProbeFailures(t *testing.T) {
	requireSandbox(t)
	// No namespace has this flag: clone3 refuses it.
	err := probeClone("test namespace", 1<<40)
	if se, ok := errors.AsType[*SetupError](err); !ok || se.Stage != "clone" || !errors.Is(err, unix.EINVAL) ||
		!strings.Contains(err.Error(), "test namespace") {
		t.Errorf("probe of an unknown namespace: %v, want a clone SetupError naming it, with EINVAL", err)
	}
	// No user maps to a host uid of -1.
	se := launch.Probe(unix.CLONE_NEWUSER, nil, -1, -1)
	if se == nil || se.Stage != "clone" || se.Op != "write id maps" || se.Errno != int(unix.EINVAL) {
		t.Errorf("probe mapped to uid -1: %+v, want the id maps' write refused with EINVAL", se)
	}
}

// TestProbeOverlay: the overlay probe mounts and reads an overlay of
// layers the sandbox's user can read, and says which step failed and why
// for layers that do not exist or that it cannot reach.
func TestProbeOverlay(t *testing.T) {
	requireSandbox(t)
	uid, gid := hostID(os.Getuid()), hostID(os.Getgid())
	dir, err := os.MkdirTemp("", "probe-overlay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var layers []string
	for _, name := range []string{"top", "bottom"} {
		l := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(l, name+"-dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if se := probeOverlay(layers, uid, gid); se != nil {
		t.Fatalf("overlay of two readable directories: %+v", se)
	}
	missing := []string{filepath.Join(dir, "none"), layers[1]}
	// Linux 6.5 and later resolve each lowerdir as it is set ("fsconfig
	// overlay lowerdir..."); earlier kernels at the superblock's creation
	// ("fsconfig create overlay"). Either is the overlay's fsconfig.
	if se := probeOverlay(missing, uid, gid); se == nil || se.Stage != "mount" || se.Errno != int(unix.ENOENT) ||
		!strings.HasPrefix(se.Op, "fsconfig ") || !strings.Contains(se.Op, "overlay") {
		t.Errorf("overlay of a missing layer: %+v, want fsconfig of the overlay refused with ENOENT", se)
	}
	t.Run("unreachable", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("the layers are the caller's, whom the sandbox's user maps to: it can read any of them")
		}
		// The sandbox's user is nobody: a layer only root may enter is
		// out of its reach.
		if err := os.Chmod(layers[0], 0o700); err != nil {
			t.Fatal(err)
		}
		if se := probeOverlay(layers, uid, gid); se == nil || se.Stage != "mount" || se.Errno != int(unix.EACCES) {
			t.Errorf("overlay of a layer only root may enter: %+v, want its mount refused with EACCES", se)
		}
	})
}
