package workspace

import (
	"strings"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/sysutil"

	"golang.org/x/sys/unix"
)

// maxSymlinks bounds the symlinks one resolution follows, as the kernel's
// own limit (40) does.
const maxSymlinks = 40

// noOpenat2 is set once openat2 was refused; from then on the walk of our
// own is used. Tests set it to exercise the walk.
var noOpenat2 atomic.Bool

// openIn opens rel (clean, relative) beneath the directory root, as if
// root were "/": symlinks, absolute or with "..", are resolved inside it
// and never lead out. With O_NOFOLLOW in flags a final symlink is opened
// (or refused) rather than followed.
func openIn(root int, rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_CLOEXEC
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Mode:    uint64(mode),
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		}
		for range 8 {
			fd, err := unix.Openat2(root, rel, &how)
			switch err {
			case nil:
				return fd, nil
			case unix.EAGAIN: // a rename raced the lookup; the kernel asks us to retry
				continue
			case unix.ENOSYS, unix.EPERM:
				// Refused by a seccomp profile or an old kernel (EPERM can
				// also be a real answer; the walk will give it again).
				noOpenat2.Store(true)
			default:
				return -1, err
			}
			break
		}
		if !noOpenat2.Load() {
			return -1, unix.EAGAIN
		}
	}
	return walkOpen(root, rel, flags, mode)
}

// walkOpen is openIn without openat2. It walks with a cursor, so ".." is
// a step back to the directory it came from (checked, never a lookup
// above root) and it holds two descriptors at any depth, and opens every
// component with O_NOFOLLOW, reading symlinks itself.
func walkOpen(root int, rel string, flags int, mode uint32) (int, error) {
	c, err := newCursor(root, unix.O_PATH)
	if err != nil {
		return -1, err
	}
	defer c.reset()
	todo := strings.Split(rel, "/")
	links := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		switch comp {
		case "", ".":
			if len(todo) == 0 {
				return unix.Openat(c.fd, ".", flags&^unix.O_NOFOLLOW, mode)
			}
			continue
		case "..":
			if err := c.up(); err != nil {
				return -1, err
			}
			if len(todo) == 0 {
				return unix.Openat(c.fd, ".", flags&^unix.O_NOFOLLOW, mode)
			}
			continue
		}
		last := len(todo) == 0
		if last && flags&unix.O_NOFOLLOW != 0 {
			return unix.Openat(c.fd, comp, flags, mode)
		}
		// Look before opening: a symlink is expanded here; anything else
		// is opened with O_NOFOLLOW, so one swapped in meanwhile is
		// refused (ELOOP), not followed.
		target, err := sysutil.ReadlinkAt(c.fd, comp)
		if err == unix.EINVAL || err == unix.ENOENT && last {
			if last {
				return unix.Openat(c.fd, comp, flags|unix.O_NOFOLLOW, mode)
			}
			if err := c.down(comp); err != nil {
				return -1, err
			}
			continue
		}
		if err != nil {
			return -1, err
		}
		if links++; links > maxSymlinks {
			return -1, unix.ELOOP
		}
		if strings.HasPrefix(target, "/") {
			c.reset()
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return unix.Openat(c.fd, ".", flags&^unix.O_NOFOLLOW, mode)
}
