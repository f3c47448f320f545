package workspace

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// devIno identifies a directory, to check that ".." leads back to it.
type devIno struct{ dev, ino uint64 }

func idOf(fd int) (devIno, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return devIno{}, err
	}
	return devIno{uint64(st.Dev), st.Ino}, nil
}

// errMoved is the error of a walk that, climbing back, did not find the
// directory it came from: the program moved a directory on the walk's
// path meanwhile.
var errMoved = errors.New("a directory on the path was moved during the walk; try again once the program has stopped moving it")

// A cursor is a position in the tree below a top directory that holds one
// descriptor of its own whatever its depth (the workspace allows chains
// of directories tens of thousands deep, more than a process may hold
// descriptors). It goes down by opening a child with O_NOFOLLOW, and
// back up by opening ".." and checking that it is the directory it came
// from (same device and inode), so a directory the program renamed
// meanwhile cannot lead it elsewhere, above the top least of all: at
// depth 0 it is the top, which it never leaves.
type cursor struct {
	top   int      // not owned
	flags int      // how each level is opened: O_RDONLY to list it, or O_PATH
	fd    int      // the current directory; top at depth 0
	ids   []devIno // of the top and each level down to the current one
}

func newCursor(top, flags int) (*cursor, error) {
	id, err := idOf(top)
	if err != nil {
		return nil, err
	}
	return &cursor{top: top, flags: flags, fd: top, ids: []devIno{id}}, nil
}

func (c *cursor) depth() int { return len(c.ids) - 1 }

// down enters the directory name of the current one.
func (c *cursor) down(name string) error {
	fd, err := unix.Openat(c.fd, name, c.flags|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	id, err := idOf(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	c.set(fd)
	c.ids = append(c.ids, id)
	return nil
}

// up returns to the directory the last down came from; at the top it
// stays there.
func (c *cursor) up() error {
	if len(c.ids) == 1 {
		return nil
	}
	c.ids = c.ids[:len(c.ids)-1]
	if len(c.ids) == 1 {
		c.set(c.top)
		return nil
	}
	fd, err := unix.Openat(c.fd, "..", c.flags|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	id, err := idOf(fd)
	if err == nil && id != c.ids[len(c.ids)-1] {
		err = errMoved
	}
	if err != nil {
		unix.Close(fd)
		return err
	}
	c.set(fd)
	return nil
}

// reset returns to the top.
func (c *cursor) reset() {
	c.set(c.top)
	c.ids = c.ids[:1]
}

func (c *cursor) set(fd int) {
	if c.fd != c.top {
		unix.Close(c.fd)
	}
	c.fd = fd
}

// visitor is what a walk does at each entry. Only pre is required.
type visitor struct {
	// pre is called for each entry below the top with the directory
	// holding it; for a directory, descend says whether to enter it.
	pre func(dfd int, name string, e Entry) (descend bool, err error)
	// enter is called once the walk is in the directory name.
	enter func(name string) error
	// leave is called in a directory (the top too) once its entries are
	// done, with its mode and modification time when it was entered.
	leave func(fd int, mode uint32, mtime time.Time) error
	// left is called back in the parent of the directory name just left.
	left func(dfd int, name string) error
}

// frame is one directory of the walk's path: its entries still to visit
// (the listing of one directory; the walk holds those of the directories
// on its path, not of the tree) and how to leave it.
type frame struct {
	names []string
	name  string
	mode  uint32
	mtime time.Time
	plen  int // the path's length before this directory's name
}

// walkTree visits the tree below the cursor's directory, parents before
// children, each directory's entries in name order, following no symlink
// and holding the cursor's one descriptor at any depth. path holds the
// current entry's path relative to the start during each call (the
// caller's to copy); it is the only part of the walk that grows with the
// path's length, with one small frame per level.
func walkTree(c *cursor, path *[]byte, v visitor) error {
	top, err := entryAt(c.fd, ".")
	if err != nil {
		return err
	}
	names, err := readNames(c.fd)
	if err != nil {
		return err
	}
	stack := []frame{{names: names, mode: goMode(top.Mode), mtime: top.ModTime, plen: len(*path)}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if len(f.names) == 0 {
			if v.leave != nil {
				if err := v.leave(c.fd, f.mode, f.mtime); err != nil {
					return err
				}
			}
			name, plen := f.name, f.plen
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				break
			}
			if err := c.up(); err != nil {
				return fmt.Errorf("%s: %w", shortPath(*path), err)
			}
			*path = (*path)[:plen]
			if v.left != nil {
				if err := v.left(c.fd, name); err != nil {
					return err
				}
			}
			continue
		}
		n := f.names[0]
		f.names[0] = ""
		f.names = f.names[1:]
		e, err := entryAt(c.fd, n)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		plen := len(*path)
		if plen > 0 {
			*path = append(*path, '/')
		}
		*path = append(*path, n...)
		if err != nil {
			return fmt.Errorf("%s: %w", shortPath(*path), err)
		}
		descend, err := v.pre(c.fd, n, e)
		if err != nil {
			return err
		}
		if !descend || !e.Mode.IsDir() {
			*path = (*path)[:plen]
			continue
		}
		if err := c.down(n); err != nil {
			if errors.Is(err, unix.ENOENT) {
				*path = (*path)[:plen]
				continue
			}
			return fmt.Errorf("%s: %w", shortPath(*path), err)
		}
		if v.enter != nil {
			if err := v.enter(n); err != nil {
				return err
			}
		}
		names, err := readNames(c.fd)
		if err != nil {
			return fmt.Errorf("%s: %w", shortPath(*path), err)
		}
		stack = append(stack, frame{names: names, name: n, mode: goMode(e.Mode), mtime: e.ModTime, plen: plen})
	}
	return nil
}

// shortPath is a path for a message: a deep one is cut in the middle.
func shortPath(p []byte) string {
	if len(p) <= 200 {
		return string(p)
	}
	return fmt.Sprintf("%s...(%d bytes)...%s", p[:80], len(p), p[len(p)-80:])
}
