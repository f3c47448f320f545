package workspace

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/fumehood/sandbox/internal/sysutil"

	"golang.org/x/sys/unix"
)

// Entry describes one name in the workspace, not following symlinks.
type Entry struct {
	Name    string      // the base name
	Mode    fs.FileMode // type and permission bits
	Size    int64       // bytes, for a regular file
	ModTime time.Time
	Target  string // a symlink's target, as stored (resolve it only inside the workspace)
}

// ReadFile opens the regular file name for reading; symlinks on the way
// resolve inside the workspace.
func (r *Root) ReadFile(name string) (*os.File, error) {
	rel, root, done, err := r.begin("read", name)
	if err != nil {
		return nil, err
	}
	defer done()
	fd, err := openIn(root, rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, r.pathErr("read", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err == nil {
			err = errors.New("not a regular file")
		}
		return nil, r.pathErr("read", name, err)
	}
	// Opened non-blocking so a planted FIFO cannot hang us; a regular
	// file does not care, but the runtime should not poll it.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, r.pathErr("read", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Stat describes name itself: a final symlink is not followed.
func (r *Root) Stat(name string) (Entry, error) {
	rel, root, done, err := r.begin("stat", name)
	if err != nil {
		return Entry{}, err
	}
	defer done()
	dir, base := split(rel)
	dfd, err := openIn(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return Entry{}, r.pathErr("stat", name, err)
	}
	defer unix.Close(dfd)
	if rel == "." {
		base = "."
	}
	e, err := entryAt(dfd, base)
	if err != nil {
		return Entry{}, r.pathErr("stat", name, err)
	}
	return e, nil
}

// List returns the entries of directory name, sorted by name.
func (r *Root) List(name string) ([]Entry, error) {
	rel, root, done, err := r.begin("list", name)
	if err != nil {
		return nil, err
	}
	defer done()
	fd, err := openIn(root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, r.pathErr("list", name, err)
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return nil, r.pathErr("list", name, err)
	}
	var out []Entry
	for _, n := range names {
		e, err := entryAt(fd, n)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, r.pathErr("list", name+"/"+n, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// WriteFile writes the content of data to name with permission bits perm,
// creating missing parent directories. The file is written to a new inode
// and renamed over name, so a reader never sees half of it, a symlink at
// name is replaced rather than followed, and an inode shared with a
// snapshot is never changed.
func (r *Root) WriteFile(name string, data io.Reader, perm fs.FileMode) error {
	return r.writeFile("write", name, data, goMode(perm), holes{})
}

// holes says how writeFile writes: with size > 0, blocks of zeros are
// skipped (left as holes) and the file is then given size bytes.
type holes struct{ size int64 }

// holeBlock is the unit a run of zeros must fill to be left as a hole.
const holeBlock = 4096

func (r *Root) writeFile(op, name string, data io.Reader, mode uint32, h holes) error {
	return r.replace(op, name, func(dfd int, tmp string) error {
		fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		if h.size > 0 {
			err = copySparse(f, data, h.size)
		} else {
			_, err = io.Copy(f, data)
		}
		if err == nil {
			err = r.own(fd, mode)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// copySparse writes size bytes of data to f, seeking over blocks of
// zeros rather than writing them, so they stay holes.
func copySparse(f *os.File, data io.Reader, size int64) error {
	buf := make([]byte, 64<<10)
	var off int64
	for off < size {
		n, err := io.ReadFull(data, buf[:min(int64(len(buf)), size-off)])
		for b := buf[:n]; len(b) > 0; {
			k := min(len(b), holeBlock)
			if !allZero(b[:k]) {
				if _, err := f.WriteAt(b[:k], off); err != nil {
					return err
				}
			}
			off += int64(k)
			b = b[k:]
		}
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return f.Truncate(off)
}

// zeroBlock is a hole's worth of zeros, to compare blocks with.
var zeroBlock [holeBlock]byte

// allZero says whether b holds only zeros, compared a block at a time
// (bytes.Equal is vectorised; a loop over bytes is ten times slower).
func allZero(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:k], zeroBlock[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// Link makes name a new hard link to the regular file target; neither
// resolves to anything outside the workspace, and a final symlink at
// target is not followed.
func (r *Root) Link(target, name string) error {
	trel, root, done, err := r.begin("link", target)
	if err != nil {
		return err
	}
	dir, base := split(trel)
	tfd, err := openIn(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	done()
	if err != nil {
		return r.pathErr("link", target, err)
	}
	defer unix.Close(tfd)
	var st unix.Stat_t
	if err := unix.Fstatat(tfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return r.pathErr("link", target, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return r.pathErr("link", target, errors.New("not a regular file"))
	}
	return r.replace("link", name, func(dfd int, tmp string) error {
		return unix.Linkat(tfd, base, dfd, tmp, 0)
	})
}

// begin cleans name and holds the root for one operation op on it.
func (r *Root) begin(op, name string) (rel string, root int, done func(), err error) {
	if rel, err = clean(name); err != nil {
		return "", -1, nil, r.pathErr(op, name, err)
	}
	if root, done, err = r.hold(); err != nil {
		return "", -1, nil, r.pathErr(op, name, err)
	}
	return rel, root, done, nil
}

// replace puts a new entry at name: create makes it under the temporary
// name tmp in name's directory (created as needed), and it is renamed
// over name, so whatever was at name, a symlink included, is replaced
// whole and never followed.
func (r *Root) replace(op, name string, create func(dfd int, tmp string) error) error {
	rel, root, done, err := r.begin(op, name)
	if err != nil {
		return err
	}
	defer done()
	if rel == "." {
		return r.pathErr(op, name, fmt.Errorf("names the workspace root, which %s would replace: %w", op, ErrOutside))
	}
	dir, base := split(rel)
	dfd, err := r.mkdirAll(root, dir)
	if err != nil {
		return r.pathErr(op, name, err)
	}
	defer unix.Close(dfd)
	tmp := tempName()
	err = create(dfd, tmp)
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return r.pathErr(op, name, err)
	}
	return nil
}

// own sets the mode of fd and gives it to the root's owner.
func (r *Root) own(fd int, mode uint32) error {
	if r.uid >= 0 || r.gid >= 0 {
		if err := unix.Fchown(fd, r.uid, r.gid); err != nil {
			return err
		}
	}
	// After the chown, which clears set-id bits.
	return unix.Fchmod(fd, fileMode(mode))
}

// fileMode maps Go's set-id and sticky bits to the kernel's.
func fileMode(m uint32) uint32 {
	gm := fs.FileMode(m)
	k := uint32(gm.Perm())
	if gm&fs.ModeSetuid != 0 {
		k |= unix.S_ISUID
	}
	if gm&fs.ModeSetgid != 0 {
		k |= unix.S_ISGID
	}
	if gm&fs.ModeSticky != 0 {
		k |= unix.S_ISVTX
	}
	return k
}

// MkdirAll creates directory name and its missing parents (mode 0755).
func (r *Root) MkdirAll(name string) error {
	rel, root, done, err := r.begin("mkdir", name)
	if err != nil {
		return err
	}
	defer done()
	fd, err := r.mkdirAll(root, rel)
	if err != nil {
		return r.pathErr("mkdir", name, err)
	}
	unix.Close(fd)
	return nil
}

// mkdirAll creates rel's missing directories one at a time, each inside
// the one before, and returns an O_PATH fd of the last.
func (r *Root) mkdirAll(root int, rel string) (int, error) {
	fd, err := openIn(root, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	dir, base := split(rel)
	parent, err := r.mkdirAll(root, dir)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, base, 0o755); err != nil && err != unix.EEXIST {
		return -1, err
	}
	fd, err = unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := r.own(fd, 0o755); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// RemoveAll removes name and everything beneath it; symlinks are removed,
// never followed. A missing name is not an error. A name that is the root
// (".", "a/..") empties it, as Empty does: the root itself stays. The
// empty name is refused (fs.ErrInvalid), so that an unset name does not
// empty the workspace. It holds at most MaxDescriptors at any depth.
func (r *Root) RemoveAll(name string) error {
	if name == "" {
		return r.pathErr("remove", name, fmt.Errorf("an empty name; to empty the workspace, name its root: \".\": %w", fs.ErrInvalid))
	}
	rel, root, done, err := r.begin("remove", name)
	if err != nil {
		return err
	}
	if rel == "." {
		done()
		return r.Empty()
	}
	defer done()
	dir, base := split(rel)
	dfd, err := openIn(root, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return r.pathErr("remove", name, err)
	}
	defer unix.Close(dfd)
	if err := removeAt(dfd, base); err != nil {
		return r.pathErr("remove", name, err)
	}
	return nil
}

// Empty removes everything in the root, holding at most MaxDescriptors
// at any depth.
func (r *Root) Empty() error {
	root, done, err := r.hold()
	if err != nil {
		return r.pathErr("empty", ".", err)
	}
	defer done()
	fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = emptyDir(fd)
		unix.Close(fd)
	}
	if err != nil {
		return r.pathErr("empty", ".", err)
	}
	return nil
}

// removeRounds bounds how often a removal starts over because the
// program added entries to a directory being removed.
const removeRounds = 4

// removeAt removes base in the directory dfd (opened for reading),
// recursively for a directory.
func removeAt(dfd int, base string) error {
	err := unix.Unlinkat(dfd, base, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	for range removeRounds {
		c, err := newCursor(dfd, unix.O_RDONLY)
		if err != nil {
			return err
		}
		err = c.down(base)
		if err == nil {
			err = emptyHere(c)
		}
		c.reset()
		if err != nil && err != unix.ENOENT {
			return err
		}
		err = unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
		if err != unix.ENOTEMPTY {
			if err == unix.ENOENT {
				err = nil
			}
			return err
		}
	}
	return fmt.Errorf("%s: entries keep appearing while it is removed: %w", base, unix.ENOTEMPTY)
}

// emptyDir removes everything in the open directory fd.
func emptyDir(fd int) error {
	for range removeRounds {
		c, err := newCursor(fd, unix.O_RDONLY)
		if err != nil {
			return err
		}
		if err := emptyHere(c); err != nil {
			return err
		}
		names, err := readNames(fd)
		if err != nil || len(names) == 0 {
			return err
		}
	}
	return fmt.Errorf("entries keep appearing while the directory is emptied: %w", unix.ENOTEMPTY)
}

// emptyHere removes the tree below the cursor's directory, each
// directory once its entries are gone.
func emptyHere(c *cursor) error {
	var path []byte
	start := c.depth()
	return walkTree(c, &path, visitor{
		pre: func(dfd int, name string, e Entry) (bool, error) {
			if e.Mode.IsDir() {
				return true, nil
			}
			if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
				return false, fmt.Errorf("%s: %w", shortPath(path), err)
			}
			return false, nil
		},
		left: func(dfd int, name string) error {
			if c.depth() < start {
				return nil
			}
			if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
				return fmt.Errorf("%s/%s: %w", shortPath(path), name, err)
			}
			return nil
		},
	})
}

// readNames lists the directory fd (opened for reading), sorted.
func readNames(fd int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// entryAt describes name in dfd without following it.
func entryAt(dfd int, name string) (Entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Entry{}, err
	}
	e := Entry{Name: name, Mode: modeOf(st.Mode), Size: st.Size, ModTime: time.Unix(st.Mtim.Unix())}
	if e.Mode&fs.ModeSymlink != 0 {
		t, err := sysutil.ReadlinkAt(dfd, name)
		if err != nil {
			return Entry{}, err
		}
		e.Target = t
	}
	return e, nil
}

// modeOf converts a kernel st_mode to an fs.FileMode.
func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// tempName is a name for a file being written, unlikely to collide.
func tempName() string {
	var b [8]byte
	rand.Read(b[:])
	return ".sbx-" + hex.EncodeToString(b[:]) + ".tmp"
}
