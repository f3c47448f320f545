//go:build linux

package sandbox

import (
	"strings"

	"golang.org/x/sys/unix"
)

// The sandbox's filesystem is built with the fd-based mount API: every mount
// is created detached, given its flags while nobody can see it, and then
// attached to a target that was resolved beneath the new root with
// RESOLVE_IN_ROOT. Symlinks in a caller's rootfs therefore cannot redirect a
// mount outside the root, and no path is looked up twice.

// newFS creates a detached mount of a new fstype filesystem. opts are
// "key=value" or bare "flag" strings; attrs are MOUNT_ATTR_* flags.
func newFS(fstype string, attrs int, opts ...string) (int, error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, &initError{Stage: "mount", Op: "fsopen " + fstype, Err: err}
	}
	defer unix.Close(fsfd)
	for _, o := range opts {
		k, v, hasValue := strings.Cut(o, "=")
		if hasValue {
			err = unix.FsconfigSetString(fsfd, k, v)
		} else {
			err = unix.FsconfigSetFlag(fsfd, k)
		}
		if err != nil {
			return -1, &initError{Stage: "mount", Op: "fsconfig " + fstype + " " + o, Err: err}
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, &initError{Stage: "mount", Op: "fsconfig create " + fstype, Err: err}
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, &initError{Stage: "mount", Op: "fsmount " + fstype, Err: err}
	}
	return mfd, nil
}

// cloneTree returns a detached recursive copy of the mount tree at srcfd (a
// bind mount) with attrs set on every mount in it.
func cloneTree(srcfd int, attrs uint64, what string) (int, error) {
	mfd, err := unix.OpenTree(srcfd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, &initError{Stage: "mount", Op: "bind", Path: what, Err: err}
	}
	if attrs != 0 {
		if err := setAttrs(mfd, attrs, true); err != nil {
			unix.Close(mfd)
			return -1, &initError{Stage: "mount", Op: "set flags of bind", Path: what, Err: err}
		}
	}
	return mfd, nil
}

// setAttrs sets MOUNT_ATTR_* flags on the mount at fd, and on the mounts
// beneath it if recursive.
func setAttrs(fd int, attrs uint64, recursive bool) error {
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	return unix.MountSetattr(fd, "", flags, &unix.MountAttr{Attr_set: attrs})
}

// attach moves the detached mount mfd onto the target fd and closes mfd.
func attach(mfd, target int, what string) error {
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &initError{Stage: "mount", Op: "attach", Path: what, Err: err}
	}
	return nil
}

// openIn resolves p beneath the directory fd root, as if root were "/":
// symlinks and ".." cannot leave it. The result is an O_PATH fd.
func openIn(root int, p string) (int, error) {
	return unix.Openat2(root, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}
