package workspace

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Root is a directory that every operation stays beneath. It is safe for
// concurrent use; the operations are as atomic as the file system makes
// them, no more.
type Root struct {
	fd   int    // O_PATH|O_DIRECTORY of the root
	name string // for messages
	// uid and gid own what is created; -1 leaves the creator's.
	uid, gid int
	// size is what the workspace holds, for WriteTar; 0: its file system's size.
	size atomic.Int64

	mu     sync.RWMutex // guards fd against Close
	closed bool
}

// Open opens dir as a Root. Entries created through it are chowned to
// uid/gid (-1 to leave them as created).
func Open(dir string, uid, gid int) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open workspace", Path: dir, Err: err}
	}
	return &Root{fd: fd, name: dir, uid: uid, gid: gid}, nil
}

// FromFD takes ownership of fd, a directory, as a Root named name.
func FromFD(fd int, name string, uid, gid int) *Root {
	return &Root{fd: fd, name: name, uid: uid, gid: gid}
}

// Close releases the root. Operations after it fail with fs.ErrClosed.
func (r *Root) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return unix.Close(r.fd)
}

// hold returns the root's fd for the duration of one operation.
func (r *Root) hold() (int, func(), error) {
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return -1, nil, fs.ErrClosed
	}
	return r.fd, r.mu.RUnlock, nil
}

// clean turns a workspace path into a clean relative one: "/a/./b" and
// "a/b" are "a/b"; "", "." and "/" are ".". A path that climbs above the
// root is refused rather than clamped, so a caller's mistake is an error.
func clean(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%q: contains NUL: %w", name, fs.ErrInvalid)
	}
	// path.Clean of an absolute path cannot climb; but the name as given
	// may have meant to: "a/../../b" cleans to "/b", ".." to "/". Refuse
	// it.
	depth := 0
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return "", fmt.Errorf("%q: %w", name, ErrOutside)
			}
		default:
			depth++
		}
	}
	p := path.Clean("/" + name)
	if p == "/" {
		return ".", nil
	}
	return p[1:], nil
}

// split returns the parent and last component of a clean relative path.
func split(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// pathErr wraps err for the workspace path name.
func (r *Root) pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}
