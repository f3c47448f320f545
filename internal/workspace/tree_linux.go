package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// walkFunc is called for each entry of a tree walk, with the directory
// holding it (an fd valid during the call), the entry's path relative to
// the walk's top ("" for the top), and its description.
type walkFunc func(dfd int, name, rel string, e Entry) error

// walk visits the tree at rel, parents before children, in name order,
// following no symlink below rel.
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
	if err := fn(top, ".", "", e); err != nil {
		return err
	}
	return walkDir(top, "", fn)
}

func walkDir(dfd int, rel string, fn walkFunc) error {
	names, err := readNames(dfd)
	if err != nil {
		return err
	}
	for _, n := range names {
		e, err := entryAt(dfd, n)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		child := path.Join(rel, n)
		if err := fn(dfd, n, child, e); err != nil {
			return err
		}
		if !e.Mode.IsDir() {
			continue
		}
		fd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		err = walkDir(fd, child, fn)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
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

// WriteTar writes the tree at name to w as a tar stream: directories,
// regular files and symlinks (as symlinks), with their modes and times;
// names are relative to name. Devices, FIFOs and sockets are skipped.
func (r *Root) WriteTar(w io.Writer, name string) error {
	rel, err := clean(name)
	if err != nil {
		return r.pathErr("tar", name, err)
	}
	tw := tar.NewWriter(w)
	err = r.walk(rel, func(dfd int, n, p string, e Entry) error {
		if p == "" {
			return nil
		}
		hdr := &tar.Header{Name: p, Mode: int64(fileMode(goMode(e.Mode))),
			ModTime: e.ModTime, Format: tar.FormatPAX}
		switch {
		case e.Mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
			return tw.WriteHeader(hdr)
		case e.Mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
			return tw.WriteHeader(hdr)
		case e.Mode.IsRegular():
			f, err := openFileAt(dfd, n)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			// A file the program is still writing may grow or shrink;
			// the header's size is what goes out.
			n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
			if err == nil && n < hdr.Size {
				_, err = io.CopyN(tw, zeros{}, hdr.Size-n)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return r.pathErr("tar", name, err)
	}
	return tw.Close()
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// ExtractTar writes the entries of the tar stream from rd beneath name:
// directories, regular files (hard links as copies of their target) and
// symlinks. An entry whose name leaves name, or of another type, is an
// error naming it; what was written before it stays.
func (r *Root) ExtractTar(rd io.Reader, name string) error {
	base, err := clean(name)
	if err != nil {
		return r.pathErr("untar", name, err)
	}
	tr := tar.NewReader(rd)
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
			err = r.WriteFile(target, tr, mode)
		case tar.TypeLink:
			var lrel string
			if lrel, err = clean(hdr.Linkname); err == nil {
				var f *os.File
				if f, err = r.ReadFile(path.Join(base, lrel)); err == nil {
					err = r.WriteFile(target, f, mode)
					f.Close()
				}
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
// are skipped. It is how snapshots are taken and restored.
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
	e, err := entryAt(sfd, ".")
	if err != nil {
		return err
	}
	return dst.copyDir(sfd, dfd, "", e)
}

// copyDir fills the directory dfd with the content of sfd (described by
// e) and then sets its mode and time, which filling it would change.
func (dst *Root) copyDir(sfd, dfd int, rel string, e Entry) error {
	names, err := readNames(sfd)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	for _, n := range names {
		ce, err := entryAt(sfd, n)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path.Join(rel, n), err)
		}
		if err := dst.copyEntry(sfd, dfd, n, path.Join(rel, n), ce); err != nil {
			return err
		}
	}
	if err := dst.own(dfd, goMode(e.Mode)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return setTime(dfd, ".", e)
}

// copyEntry copies the entry n of sfd into dfd.
func (dst *Root) copyEntry(sfd, dfd int, n, rel string, e Entry) error {
	fail := func(err error) error { return fmt.Errorf("%s: %w", rel, err) }
	switch {
	case e.Mode.IsDir():
		if err := unix.Mkdirat(dfd, n, 0o700); err != nil {
			return fail(err)
		}
		cs, err := unix.Openat(sfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		defer unix.Close(cs)
		cd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		defer unix.Close(cd)
		return dst.copyDir(cs, cd, rel, e)
	case e.Mode&fs.ModeSymlink != 0:
		if err := unix.Symlinkat(e.Target, dfd, n); err != nil {
			return fail(err)
		}
		if dst.uid >= 0 || dst.gid >= 0 {
			if err := unix.Fchownat(dfd, n, dst.uid, dst.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fail(err)
			}
		}
		return setTime(dfd, n, e)
	case e.Mode.IsRegular():
		in, err := openFileAt(sfd, n)
		if err != nil {
			return fail(err)
		}
		defer in.Close()
		fd, err := unix.Openat(dfd, n, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fail(err)
		}
		out := os.NewFile(uintptr(fd), n)
		defer out.Close()
		// *os.File to *os.File: copy_file_range, in the kernel.
		if _, err := io.Copy(out, in); err != nil {
			return fail(err)
		}
		if err := dst.own(fd, goMode(e.Mode)); err != nil {
			return fail(err)
		}
		return setTime(dfd, n, e)
	}
	return nil
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
	err = r.walk(rel, func(_ int, _ string, p string, e Entry) error {
		if p != "" {
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
