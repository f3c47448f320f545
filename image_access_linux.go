//go:build linux

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// checkImageReachable refuses an image whose root the sandbox's host ids
// cannot reach: its init opens the root by path, as that user, and would
// fail with a bare "permission denied". Only root's sandboxes run as
// another user (nobody, or Options.HostUID); a directory above the root
// that is not searchable by them is named with what to do. The mode bits
// judge, as for a Workspace; a directory with an ACL is left to the
// kernel.
func checkImageReachable(ref, root string, uid, gid int) error {
	if os.Getuid() != 0 {
		return nil
	}
	for dir := path.Dir(root); dir != "/" && dir != "."; dir = path.Dir(dir) {
		var st unix.Stat_t
		if unix.Stat(dir, &st) != nil || modeAllows(dir, &st, uid, gid, unix.X_OK) {
			continue
		}
		return fmt.Errorf("sandbox: image %s (Options.Root): its root %s cannot be reached by the sandbox's host uid %d (gid %d), which the program runs as: "+
			"%s above it is owned by %d:%d with mode %04o; let that uid search it (chmod o+x %s), "+
			"or set Image.Store to a directory it can reach: %w",
			ref, root, uid, gid, dir, st.Uid, st.Gid, st.Mode&0o7777, dir, fs.ErrPermission)
	}
	return nil
}
