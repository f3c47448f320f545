package image

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
	"syscall"
	"time"
)

// Whiteout names, as the OCI image spec defines them: a layer's
// ".wh.NAME" deletes NAME of the layers below, and ".wh..wh..opq" in a
// directory hides everything the layers below have in it.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// unpackTar writes the tar stream of one layer into dir, which is empty and
// private to the caller. The stream is hostile. Every path goes through
// dir (an os.Root), so no name, symlink or hard link can reach outside it;
// names that are absolute or climb out are refused before that, as are
// hard links to missing targets. What is kept:
//
//   - regular files, directories, symlinks (stored as they are: they are
//     only ever resolved inside a sandbox's root), hard links, FIFOs;
//   - permission bits and the sticky bit; set-uid and set-gid are dropped,
//     so nothing in an image can raise a program's privileges;
//   - directories get rwx for the owner whatever the layer says, so the
//     store's owner can always walk and remove them;
//   - modification times of regular files (compiled Python files compare
//     them with their sources).
//
// Device nodes and anything else are dropped, and so is every extended
// attribute a layer carries (tar's SCHILY.xattr and LIBARCHIVE.xattr
// records): security.capability, since a file capability raises a
// program's privileges as set-uid does; security.* and trusted.*, which
// are the kernel's and its security modules'; user.overlay.*, which would
// steer the overlay of the layers (an opaque or redirected directory the
// layer did not earn by its whiteouts); and the other user.* too, so that
// an image's tree is the same on every store, including file systems
// that keep no user xattrs. The only xattrs in a layer's directory are
// the store's own marks of its form (layerForm). Ownership is not applied:
// files belong to the store's owner, who may not be root, and the sandbox
// maps its own ids and sees the root read-only, so an image's owners give
// no one anything.
//
// Whiteout entries are kept in form (see layerForm), unless form is
// formNone; they are refused when naming "." or "..".
func unpackTar(ctx context.Context, tr *tar.Reader, dir *os.Root, form layerForm) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return badEntry("", fmt.Errorf("reading tar: %w", err))
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return badEntry(hdr.Name, err)
		}
		if name == "." {
			continue
		}
		if err := unpackEntry(tr, hdr, name, dir, form); err != nil {
			return err
		}
	}
}

// errClimbs: a name in a layer leads out of it.
var errClimbs = errors.New("path leads outside the layer")

// entryName is the clean form of a name in a tar, relative to the layer.
func entryName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("absolute path: %w", errClimbs)
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errClimbs
	}
	return c, nil
}

// badEntry is the error for a refused entry of a layer: the image's
// fault, unless the host or the transfer failed.
func badEntry(name string, err error) error {
	if hostError(err) || errors.Is(err, ErrTransfer) {
		return fmt.Errorf("entry %q: %w", name, err)
	}
	if name == "" {
		return fmt.Errorf("%w: %w", ErrBadImage, err)
	}
	return fmt.Errorf("%w: entry %q: %w", ErrBadImage, name, err)
}

// hostError says whether err is the host's fault, not the image's: a
// full disk or quota, an I/O error, a file system with no more links for
// an inode. Telling the caller the image is bad would send them looking in
// the wrong place.
func hostError(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS, syscall.EMLINK} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// permOf is the mode an entry is stored with: permission bits and sticky,
// never set-uid or set-gid, and readable (and, where anyone may execute
// it, executable) by everyone. Every file belongs to the store's owner,
// and a sandbox's user is never that owner when the caller is root (it
// maps to nobody): it sees the files as "other". In a container the
// image's files are read by its root, whom modes do not stop, so the
// store gives everyone what that root could do but write.
func permOf(hdr *tar.Header) fs.FileMode {
	m := fs.FileMode(hdr.Mode & 0o777)
	m |= 0o444
	if m&0o111 != 0 || hdr.Typeflag == tar.TypeDir {
		m |= 0o111
	}
	if hdr.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func unpackEntry(tr *tar.Reader, hdr *tar.Header, name string, dir *os.Root, form layerForm) error {
	base := path.Base(name)
	parent := path.Dir(name)
	if err := mkParents(dir, parent); err != nil {
		return badEntry(hdr.Name, err)
	}
	if form != formNone && strings.HasPrefix(base, whiteoutPrefix) {
		target := strings.TrimPrefix(base, whiteoutPrefix)
		if base != whiteoutOpaque && (target == "" || target == "." || target == ".." || strings.HasPrefix(target, whiteoutPrefix)) {
			return badEntry(hdr.Name, errors.New("whiteout of no name"))
		}
		if form == formOverlay {
			return wrapEntry(hdr.Name, overlayWhiteout(dir, parent, base))
		}
		return replace(dir, name, func() error {
			return dir.WriteFile(name, nil, 0o600)
		})
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		fi, err := dir.Lstat(name)
		if err == nil && fi.IsDir() {
			return wrapEntry(hdr.Name, dir.Chmod(name, permOf(hdr)|0o700))
		}
		// A directory in place of this layer's own whiteout: the layers
		// below give it nothing.
		opaque := err == nil && isWhiteoutDevice(fi)
		return replace(dir, name, func() error {
			if err := dir.Mkdir(name, 0o700); err != nil {
				return err
			}
			if opaque {
				if err := markOpaque(dir, name); err != nil {
					return err
				}
			}
			return dir.Chmod(name, permOf(hdr)|0o700)
		})
	case tar.TypeReg: // tar.Reader reads the old TypeRegA as TypeReg
		return replace(dir, name, func() error {
			f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if err == nil {
				err = f.Chmod(permOf(hdr))
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if !hdr.ModTime.IsZero() {
				return dir.Chtimes(name, time.Time{}, hdr.ModTime)
			}
			return nil
		})
	case tar.TypeSymlink:
		return replace(dir, name, func() error {
			return dir.Symlink(hdr.Linkname, name)
		})
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil || target == "." {
			return badEntry(hdr.Name, fmt.Errorf("hard link to %q: %w", hdr.Linkname, errClimbs))
		}
		fi, err := dir.Lstat(target)
		if err != nil {
			// Missing, or reached through a symlink that leads out.
			return badEntry(hdr.Name, fmt.Errorf("hard link to %q: %w", hdr.Linkname, err))
		}
		if fi.IsDir() {
			return badEntry(hdr.Name, fmt.Errorf("hard link to directory %q", hdr.Linkname))
		}
		if isWhiteoutDevice(fi) {
			// Deleted, as far as this layer goes.
			return badEntry(hdr.Name, fmt.Errorf("hard link to %q: %w", hdr.Linkname, fs.ErrNotExist))
		}
		if target == name {
			return nil
		}
		return replace(dir, name, func() error {
			return dir.Link(target, name)
		})
	case tar.TypeFifo:
		return replace(dir, name, func() error {
			d, err := dir.Open(parent)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := mkfifo(d, base, 0o600); err != nil {
				return err
			}
			// mkfifo's mode passes through the umask; the layer's does not.
			return dir.Chmod(name, permOf(hdr))
		})
	default:
		// Device nodes, and types tar readers do not agree on, give a
		// sandbox nothing it should have.
		return nil
	}
}

// mkParents makes the parents of an entry that a tar leaves out, with mode
// 0755 as docker does, whatever the caller's umask. Paths resolve within
// dir: a parent that is a symlink leading out is an error, not a way out.
func mkParents(dir *os.Root, parent string) error {
	if parent == "." {
		return nil
	}
	p := ""
	for _, c := range strings.Split(parent, "/") {
		p = path.Join(p, c)
		fi, err := dir.Lstat(p)
		if err == nil && !isWhiteoutDevice(fi) {
			continue
		}
		// This layer's own whiteout becomes a directory that the layers
		// below give nothing.
		whiteout := err == nil
		if whiteout {
			if err := dir.Remove(p); err != nil {
				return err
			}
		}
		if err := dir.Mkdir(p, 0o700); err != nil {
			return err
		}
		if whiteout {
			if err := markOpaque(dir, p); err != nil {
				return err
			}
		}
		if err := dir.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// replace removes what name holds, as a later entry of a layer replaces an
// earlier one, then makes it anew with mk.
func replace(dir *os.Root, name string, mk func() error) error {
	if _, err := dir.Lstat(name); err == nil {
		if err := dir.RemoveAll(name); err != nil {
			return badEntry(name, err)
		}
	}
	return wrapEntry(name, mk())
}

func wrapEntry(name string, err error) error {
	if err == nil {
		return nil
	}
	return badEntry(name, err)
}

// overlayWhiteout stores the whiteout base of the directory parent in
// overlay form. A whiteout deletes only what the layers below have (the
// OCI image spec), so what this layer itself put at its name stays: a
// directory becomes opaque, since the layers below give it nothing (as
// the marker form's merge has it), and anything else hides what is below
// by being there.
func overlayWhiteout(dir *os.Root, parent, base string) error {
	if base == whiteoutOpaque {
		return markOpaque(dir, parent)
	}
	name := path.Join(parent, strings.TrimPrefix(base, whiteoutPrefix))
	if fi, err := dir.Lstat(name); err == nil {
		if fi.IsDir() {
			return markOpaque(dir, name)
		}
		return nil
	}
	d, err := dir.Open(parent)
	if err != nil {
		return err
	}
	defer d.Close()
	return mkWhiteout(d, path.Base(name))
}

// markOpaque marks the directory name opaque (overlay form).
func markOpaque(dir *os.Root, name string) error {
	f, err := dir.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return setOpaque(f)
}
