package workspace

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// walkFunc is called for each entry of a tree walk, with the directory
// holding it (an fd valid during the call), the entry's path relative to
// the walk's top (empty for the top; valid during the call only), and
// its description.
type walkFunc func(dfd int, name string, rel []byte, e Entry) error

// walk visits the tree at rel, parents before children, in name order,
// following no symlink below rel, holding two descriptors at any depth
// (see cursor).
func (r *Root) walk(rel string, fn walkFunc) error {
	root, done, err := r.hold()
	if err != nil {
		return err
	}
	defer done()
	top, err := openIn(root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(top)
	e, err := entryAt(top, ".")
	if err != nil {
		return err
	}
	if err := fn(top, ".", nil, e); err != nil {
		return err
	}
	c, err := newCursor(top, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer c.reset()
	var path []byte
	return walkTree(c, &path, visitor{pre: func(dfd int, name string, e Entry) (bool, error) {
		return true, fn(dfd, name, path, e)
	}})
}

// openFileAt opens the regular file name in dfd without following it.
func openFileAt(dfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err == nil {
			err = errors.New("changed from a regular file while being read")
		}
		return nil, err
	}
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), name), nil
}

// ExtractTar writes the entries of the tar stream from rd beneath name:
// directories, regular files, hard links (to a regular file written
// before) and symlinks. Runs of zero blocks in a file (a sparse file's
// holes) are left as holes, not written. An entry whose name leaves name,
// or of another type, is an error naming it; what was written before it
// stays.
//
// Its cost is bounded by the stream's length and the workspace's size
// (SetSize), never by a size the stream declares: a file entry's size is
// checked before its content is read, and one that would take the files
// of the stream past the workspace's size is refused with an error
// matching EFBIG that names it, its size and that limit. A sparse
// entry's holes are read back from archive/tar as zeros, which is why
// they count too. Cancelling ctx stops it between reads.
func (r *Root) ExtractTar(ctx context.Context, rd io.Reader, name string) error {
	base, err := clean(name)
	if err != nil {
		return r.pathErr("untar", name, err)
	}
	limit, err := r.sizeLimit()
	if err != nil {
		return r.pathErr("untar", name, err)
	}
	tr := tar.NewReader(ctxReader{ctx, rd})
	content := ctxReader{ctx, tr}
	var declared int64 // the sizes of the file entries so far
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return r.pathErr("untar", name, err)
		}
		rel, err := clean(hdr.Name)
		if err != nil {
			return r.pathErr("untar", hdr.Name, err)
		}
		target := path.Join(base, rel)
		// The tar mode is the kernel's permission, set-id and sticky bits.
		mode := modeOf(uint32(hdr.Mode) &^ unix.S_IFMT)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = r.mkdirMode(target, mode)
		case tar.TypeReg:
			if hdr.Size > limit-declared {
				err = tooLarge(hdr.Size, declared, limit)
				break
			}
			declared += hdr.Size
			err = r.writeFile("write", target, content, goMode(mode), holes{size: hdr.Size})
		case tar.TypeLink:
			var lrel string
			if lrel, err = clean(hdr.Linkname); err == nil {
				err = r.Link(path.Join(base, lrel), target)
			}
		case tar.TypeSymlink:
			err = r.Symlink(hdr.Linkname, target)
		default:
			err = fmt.Errorf("entry type %q is not a directory, file or link", hdr.Typeflag)
		}
		if err != nil {
			return r.pathErr("untar", hdr.Name, err)
		}
	}
}

// tooLarge is the error for a file entry of size bytes after files of
// before bytes, refused since the workspace holds limit bytes.
func tooLarge(size, before, limit int64) error {
	if before == 0 {
		return fmt.Errorf("a file of %d bytes, more than the %d bytes the workspace holds (refused before reading it): %w", size, limit, unix.EFBIG)
	}
	return fmt.Errorf("a file of %d bytes, which with the %d bytes of files before it in the tar is more than the %d bytes the workspace holds (refused before reading it): %w",
		size, before, limit, unix.EFBIG)
}

// sizeLimit is the most file content the workspace holds (contentLimit).
func (r *Root) sizeLimit() (int64, error) {
	root, done, err := r.hold()
	if err != nil {
		return 0, err
	}
	defer done()
	return r.contentLimit(root), nil
}

// ctxReader reads from r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// mkdirMode makes directory name, and its missing parents, and gives it
// mode m (also when it existed).
func (r *Root) mkdirMode(name string, m fs.FileMode) error {
	rel, root, done, err := r.begin("mkdir", name)
	if err != nil {
		return err
	}
	defer done()
	fd, err := r.mkdirAll(root, rel)
	if err != nil {
		return r.pathErr("mkdir", name, err)
	}
	defer unix.Close(fd)
	dir, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = r.own(dir, goMode(m))
		unix.Close(dir)
	}
	if err != nil {
		return r.pathErr("mkdir", name, err)
	}
	return nil
}

// Symlink creates (or replaces) name as a symlink to target. The target is
// stored as given; it means something only inside the workspace.
func (r *Root) Symlink(target, name string) error {
	return r.replace("symlink", name, func(dfd int, tmp string) error {
		if err := unix.Symlinkat(target, dfd, tmp); err != nil {
			return err
		}
		if r.uid >= 0 || r.gid >= 0 {
			return unix.Fchownat(dfd, tmp, r.uid, r.gid, unix.AT_SYMLINK_NOFOLLOW)
		}
		return nil
	})
}

// CopyTo copies the whole tree of r into dst, which should be empty:
// directories, regular files and symlinks with their modes and
// modification times, owned by dst's owner. Devices, FIFOs and sockets
// are skipped. A file with several hard links is copied once and linked
// (by its path in dst, which nothing but CopyTo changes while it runs).
// It is how snapshots are taken and restored. It holds at most
// MaxDescriptors at any depth.
func (r *Root) CopyTo(dst *Root) error {
	sroot, sdone, err := r.hold()
	if err != nil {
		return err
	}
	defer sdone()
	droot, ddone, err := dst.hold()
	if err != nil {
		return err
	}
	defer ddone()
	sfd, err := unix.Openat(sroot, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	dfd, err := unix.Openat(droot, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	src, err := newCursor(sfd, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer src.reset()
	to, err := newCursor(dfd, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer to.reset()
	var path []byte
	links := &linkCopies{top: dfd, path: &path, first: map[devIno]string{}}
	return walkTree(src, &path, visitor{
		pre: func(sfd int, n string, e Entry) (bool, error) {
			if err := dst.copyEntry(sfd, to.fd, n, e, links); err != nil {
				return false, fmt.Errorf("%s: %w", shortPath(path), err)
			}
			return true, nil
		},
		enter: func(n string) error {
			if err := to.down(n); err != nil {
				return fmt.Errorf("%s: %w", shortPath(path), err)
			}
			return nil
		},
		// A directory's mode and time once it is filled, which filling
		// it would change.
		leave: func(_ int, mode uint32, mtime time.Time) error {
			err := dst.own(to.fd, mode)
			if err == nil {
				err = setTime(to.fd, ".", Entry{ModTime: mtime})
			}
			if err == nil {
				err = to.up()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", shortPath(path), err)
			}
			return nil
		},
	})
}

// linkCopies is how CopyTo keeps hard links: the path (relative to both
// tops) of the first copy of each file with more links, within
// maxLinkNames bytes of paths; a file beyond them, or whose path is
// longer than MaxTarPath, is copied again.
type linkCopies struct {
	top   int     // the destination's top
	path  *[]byte // the walk's current path
	first map[devIno]string
	names int
}

// link makes n in dfd a link to the copy of the file described by st if
// there is one, and otherwise notes n as its copy.
func (l *linkCopies) link(st *unix.Stat_t, dfd int, n string) (bool, error) {
	if st.Nlink < 2 {
		return false, nil
	}
	id := devIno{uint64(st.Dev), st.Ino}
	if p, ok := l.first[id]; ok {
		return true, unix.Linkat(l.top, p, dfd, n, 0)
	}
	if p := *l.path; len(p) <= MaxTarPath && l.names+len(p) <= maxLinkNames {
		l.first[id] = string(p)
		l.names += len(p)
	}
	return false, nil
}

// copyEntry makes the entry n of sfd in dfd; a directory is made empty
// (the walk fills it). A file with more hard links is copied once.
func (dst *Root) copyEntry(sfd, dfd int, n string, e Entry, links *linkCopies) error {
	switch {
	case e.Mode.IsDir():
		return unix.Mkdirat(dfd, n, 0o700)
	case e.Mode&fs.ModeSymlink != 0:
		if err := unix.Symlinkat(e.Target, dfd, n); err != nil {
			return err
		}
		if dst.uid >= 0 || dst.gid >= 0 {
			if err := unix.Fchownat(dfd, n, dst.uid, dst.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		return setTime(dfd, n, e)
	case e.Mode.IsRegular():
		in, err := openFileAt(sfd, n)
		if err != nil {
			return err
		}
		defer in.Close()
		var st unix.Stat_t
		if err := unix.Fstat(int(in.Fd()), &st); err != nil {
			return err
		}
		if linked, err := links.link(&st, dfd, n); linked || err != nil {
			return err
		}
		fd, err := unix.Openat(dfd, n, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		out := os.NewFile(uintptr(fd), n)
		defer out.Close()
		if err := copyData(out, in, &st); err != nil {
			return err
		}
		if err := dst.own(fd, goMode(e.Mode)); err != nil {
			return err
		}
		return setTime(dfd, n, e)
	}
	return nil
}

// copyData copies the content of in, described by st, to out: a sparse
// file's data extents only, so its holes stay holes.
func copyData(out, in *os.File, st *unix.Stat_t) error {
	if st.Blocks*512 < st.Size {
		ext, err := extents(int(in.Fd()), st.Size)
		if err != nil {
			return err
		}
		if ext != nil {
			for _, e := range ext {
				if _, err := io.Copy(io.NewOffsetWriter(out, e.off), io.NewSectionReader(in, e.off, e.len)); err != nil {
					return err
				}
			}
			return out.Truncate(st.Size)
		}
	}
	// *os.File to *os.File: copy_file_range, in the kernel.
	_, err := io.Copy(out, in)
	return err
}

// goMode keeps the permission, set-id and sticky bits of m, for own.
func goMode(m fs.FileMode) uint32 {
	return uint32(m.Perm() | m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

// setTime sets the modification time of name in dfd, not following it.
func setTime(dfd int, name string, e Entry) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.ModTime.UnixNano())}
	return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// Usage counts the bytes of regular files and the entries beneath name.
func (r *Root) Usage(name string) (bytes, entries int64, err error) {
	rel, err := clean(name)
	if err != nil {
		return 0, 0, r.pathErr("usage", name, err)
	}
	err = r.walk(rel, func(_ int, _ string, p []byte, e Entry) error {
		if len(p) > 0 {
			entries++
		}
		if e.Mode.IsRegular() {
			bytes += e.Size
		}
		return nil
	})
	if err != nil {
		return 0, 0, r.pathErr("usage", name, err)
	}
	return bytes, entries, nil
}

// String names the root, for messages.
func (r *Root) String() string { return strings.TrimSpace(r.name) }
