package sysutil

import "golang.org/x/sys/unix"

// OpenInRoot opens p beneath the directory dirfd as if it were the root:
// no "..", absolute link or magic link leads out of it.
func OpenInRoot(dirfd int, p string, flags int) (int, error) {
	return unix.Openat2(dirfd, p, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
}

// ReadlinkAt reads the symlink name in dirfd ("" for dirfd itself, an
// O_PATH fd of the link); EINVAL means it is not one.
func ReadlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
