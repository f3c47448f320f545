//go:build linux

package sandbox

import (
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// checkWritableBy refuses a host path the sandbox is to write (a Workspace,
// a writable Bind) that its host ids cannot reach and write: the program
// would meet only "Permission denied" there. A caller that is not root
// maps its own ids and asks the kernel; root's sandbox maps to other ids,
// judged by the mode bits of the path and of each directory above it. A
// path with an ACL is left to the kernel, which may grant what the bits do
// not.
func checkWritableBy(option, p string, uid, gid int) error {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return nil // the existence check reports it
	}
	want := uint32(unix.W_OK)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		want |= unix.X_OK
	}
	if os.Getuid() != 0 {
		if unix.Access(p, want) == nil {
			return nil
		}
	} else {
		for dir := path.Dir(p); dir != "/" && dir != "."; dir = path.Dir(dir) {
			var ds unix.Stat_t
			if unix.Stat(dir, &ds) == nil && !modeAllows(dir, &ds, uid, gid, unix.X_OK) {
				return optionErr(option, p, "cannot be reached by the sandbox's host uid %d (gid %d), which the program runs as: "+
					"%s above it is owned by %d:%d with mode %04o; let that uid search it (chmod o+x %s), "+
					"or set Options.HostUID and Options.HostGID to ids that can", uid, gid, dir, ds.Uid, ds.Gid, ds.Mode&0o7777, dir)
			}
		}
		if modeAllows(p, &st, uid, gid, want) {
			return nil
		}
	}
	return optionErr(option, p, "is not writable by the sandbox's host uid %d (gid %d), which the program runs as: it is owned by %d:%d with mode %04o; "+
		"chown %d:%d %s (or chmod it), or set Options.HostUID and Options.HostGID to ids that can write it", uid, gid, st.Uid, st.Gid, st.Mode&0o7777, uid, gid, p)
}

// modeAllows says whether the mode bits of p (stat st) give uid and gid
// the access in want (unix.W_OK, X_OK); true where an ACL may decide.
func modeAllows(p string, st *unix.Stat_t, uid, gid int, want uint32) bool {
	if _, err := unix.Getxattr(p, "system.posix_acl_access", nil); err == nil {
		return true
	}
	bits := st.Mode & 7
	switch {
	case int(st.Uid) == uid:
		bits = st.Mode >> 6 & 7
	case int(st.Gid) == gid:
		bits = st.Mode >> 3 & 7
	}
	return bits&want == want
}
