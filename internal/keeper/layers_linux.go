// The workspace keeper process runs this file: the tmpfs layers that hold
// the workspace, and the overlay or bind mount that makes them one tree.

package keeper

import (
	"fmt"
	"strings"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/workspace"
	"golang.org/x/sys/unix"
)

// maxLayers bounds the overlay's depth (the kernel allows 500 lowers, and
// the lowerdir option must fit a page).
const maxLayers = 200

// pageSize is tmpfs's unit of size.
const pageSize = 4096

// canOverlay tries an overlay over an empty lower layer, with a directory
// made opaque: the step that fails where xattrs cannot be stored.
func (k *keeper) canOverlay() bool {
	if err := unix.Mkdir("probe", 0o700); err != nil {
		return false
	}
	defer unix.Rmdir("probe")
	l, err := k.newLayer(1<<20, 64)
	if err != nil {
		return false
	}
	defer k.freeLayer(l)
	if err := unix.Mkdir(fmt.Sprintf("L%d/u/d", l), 0o700); err != nil {
		return false
	}
	up, err := k.newLayer(1<<20, 64)
	if err != nil {
		return false
	}
	defer k.freeLayer(up)
	if err := unix.Mount("overlay", "probe", "overlay", 0, k.overlayOpts([]int{l}, up)); err != nil {
		return false
	}
	defer unix.Unmount("probe", unix.MNT_DETACH)
	if unix.Rmdir("probe/d") != nil || unix.Mkdir("probe/d", 0o700) != nil {
		return false
	}
	return true
}

func (k *keeper) overlayOpts(lowers []int, upper int) string {
	dirs := make([]string, 0, len(lowers))
	for _, l := range lowers {
		dirs = append(dirs, fmt.Sprintf("L%d/u", l))
	}
	if len(dirs) == 0 {
		dirs = []string{"empty"}
	}
	o := fmt.Sprintf("lowerdir=%s,upperdir=L%d/u,workdir=L%d/w", strings.Join(dirs, ":"), upper, upper)
	if k.cfg.UserNS {
		// Outside the initial user namespace overlay keeps its
		// whiteouts and opaque marks in user.* xattrs.
		o += ",userxattr"
	}
	return o
}

// newLayer mounts a tmpfs of size bytes and inodes files as the next
// layer.
func (k *keeper) newLayer(size, inodes int64) (int, error) {
	l := k.next
	k.next++
	dir := fmt.Sprintf("L%d", l)
	if err := unix.Mkdir(dir, 0o700); err != nil {
		return -1, err
	}
	// A tmpfs of size 0 would be unbounded; one page is "full". The
	// layer's root, u and w take three inodes.
	size, inodes = max(size, 4096), max(inodes, 4)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=0700,size=%d,nr_inodes=%d", size, inodes)); err != nil {
		unix.Rmdir(dir)
		return -1, fmt.Errorf("mount layer tmpfs: %w", err)
	}
	for _, d := range []string{dir + "/u", dir + "/w"} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			k.freeLayer(l)
			return -1, err
		}
	}
	if err := unix.Chown(dir+"/u", k.cfg.UID, k.cfg.GID); err != nil {
		k.freeLayer(l)
		return -1, fmt.Errorf("give the workspace to uid %d gid %d: %w", k.cfg.UID, k.cfg.GID, err)
	}
	return l, nil
}

// freshLayer mounts a new upper layer over stack with what the cap leaves:
// the layers beneath count against both the bytes and the inodes.
func (k *keeper) freshLayer(stack []int) (int, error) {
	size, inodes := k.cfg.Size, recipe.TmpfsInodes(k.cfg.Size)
	for _, l := range stack {
		b, n := used(l)
		size, inodes = size-b, inodes-n
	}
	// tmpfs rounds its size up to a page, and cannot be mounted with
	// none: what is left is rounded down, and a layer that is to hold
	// nothing gets one page, taken at once by a file beside the
	// workspace's directory, so no layer adds a page above the cap.
	size &^= pageSize - 1
	if size > 0 {
		return k.newLayer(size, inodes)
	}
	l, err := k.newLayer(pageSize, max(inodes, 4)+1)
	if err != nil {
		return -1, err
	}
	if err := fillLayer(l); err != nil {
		k.freeLayer(l)
		return -1, err
	}
	return l, nil
}

// fillLayer takes all the room of layer l's tmpfs with a file outside its
// workspace directory.
func fillLayer(l int) error {
	fd, err := unix.Open(fmt.Sprintf("L%d/full", l), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("fill layer: %w", err)
	}
	defer unix.Close(fd)
	for off := int64(0); ; off += pageSize {
		if err := unix.Fallocate(fd, 0, off, pageSize); err == unix.ENOSPC {
			return nil
		} else if err != nil {
			return fmt.Errorf("fill layer: %w", err)
		}
	}
}

func (k *keeper) freeLayer(l int) {
	dir := fmt.Sprintf("L%d", l)
	unix.Unmount(dir, unix.MNT_DETACH)
	unix.Rmdir(dir)
}

// used is the bytes and inodes layer l's tmpfs holds.
func used(l int) (bytes, inodes int64) {
	var st unix.Statfs_t
	if unix.Statfs(fmt.Sprintf("L%d", l), &st) != nil {
		return 0, 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Files - st.Ffree)
}

func (k *keeper) layerRoot(l int) (*workspace.Root, error) {
	return workspace.Open(fmt.Sprintf("L%d/u", l), k.cfg.UID, k.cfg.GID)
}

// copyInto copies a tree into layer l.
func (k *keeper) copyInto(l int, src *workspace.Root) error {
	dst, err := k.layerRoot(l)
	if err != nil {
		return err
	}
	defer dst.Close()
	return src.CopyTo(dst)
}

// mountWorkspace mounts the current stack at ws, replacing what was there.
func (k *keeper) mountWorkspace() error {
	unix.Unmount("ws", unix.MNT_DETACH)
	if k.layered {
		if err := unix.Mount("overlay", "ws", "overlay", unix.MS_NOSUID|unix.MS_NODEV, k.overlayOpts(k.lowers, k.upper)); err != nil {
			return fmt.Errorf("mount workspace overlay: %w", err)
		}
		// The read-only view of the stack is mounted when a run's
		// changes first need it, not on every Restore.
		unix.Unmount("lw", unix.MNT_DETACH)
		k.lowerStale = true
		return nil
	}
	if err := unix.Mount(fmt.Sprintf("L%d/u", k.upper), "ws", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind workspace: %w", err)
	}
	return unix.Mount("", "ws", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, "")
}
