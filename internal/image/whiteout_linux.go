package image

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// opaqueXattr marks a directory of a layer in overlay form as opaque: it
// hides what the layers below have in it. overlayfs mounted with
// userxattr, as an unprivileged mount in a user namespace must be, reads
// the user.overlay.* names.
const opaqueXattr = "user.overlay.opaque"

// mkWhiteout makes the whiteout base in the directory dir in overlayfs's
// form: a character device 0/0, which Linux 5.8 and later let any user
// make. A variable so that tests can refuse it as an older kernel would.
var mkWhiteout = func(dir *os.File, base string) error {
	return unix.Mknodat(int(dir.Fd()), base, unix.S_IFCHR, 0)
}

// setOpaque marks the directory f opaque. A variable so that tests can
// refuse it as a file system without user xattrs would.
var setOpaque = func(f *os.File) error {
	return unix.Fsetxattr(int(f.Fd()), opaqueXattr, []byte("y"), 0)
}

// isOpaque says whether the directory f is marked opaque.
func isOpaque(f *os.File) (bool, error) {
	buf := make([]byte, 8)
	n, err := unix.Fgetxattr(int(f.Fd()), opaqueXattr, buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "getxattr", Path: f.Name(), Err: err}
	}
	return string(buf[:n]) == "y", nil
}

// isWhiteoutDevice says whether fi is a whiteout in overlay form. The
// unpacker drops every device node of a layer, so a character device in
// the store is one of its whiteouts.
func isWhiteoutDevice(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}
