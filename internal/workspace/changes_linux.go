package workspace

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// State is what a Scan records of one entry: enough to tell later whether
// it changed, without its content.
type State struct {
	Mode  uint32 // the kernel's st_mode: type and permission bits
	Ino   uint64
	Size  int64
	Mtime int64 // nanoseconds since the epoch
	Ctime int64 // likewise; no program can set it
	// Sum is the content's SHA-256, kept only for a regular file whose
	// ctime is at or after the scan's racy bound (see ScanOptions).
	Sum *[sha256.Size]byte
	// Whiteout and Opaque describe an overlay's upper layer (see
	// ScanOptions.Overlay): the entry hides the name beneath it, or the
	// directory hides all that lies beneath it.
	Whiteout, Opaque bool
}

func (s State) isDir() bool  { return s.Mode&unix.S_IFMT == unix.S_IFDIR }
func (s State) isReg() bool  { return s.Mode&unix.S_IFMT == unix.S_IFREG }
func (s State) isLink() bool { return s.Mode&unix.S_IFMT == unix.S_IFLNK }

// Tree is a Scan's record: each entry below the root by its path relative
// to the root.
type Tree map[string]State

// ScanOptions says what a Scan records beyond each entry's stat.
type ScanOptions struct {
	// Racy is the ctime (nanoseconds since the epoch; 0: none) from
	// which a regular file's content is hashed: the file system's clock
	// ticks coarsely, so a file changed again within the tick of a scan
	// may keep its ctime, and only its content can tell the change.
	Racy int64
	// Overlay, if set, is the prefix of an overlay's xattrs ("trusted."
	// or "user."): the tree is an upper layer, whose whiteouts and
	// opaque directories the Scan marks.
	Overlay string
	// MaxBytes, if not 0, bounds the record's memory: its paths' bytes
	// and StateBytes per entry. Past it the Scan stops with
	// ErrRecordTooLarge (a chain of n directories has paths of n² bytes).
	MaxBytes int64
}

// StateBytes is what an entry of a Tree costs beside its path, roughly:
// the State and the map's share.
const StateBytes = 128

// ErrRecordTooLarge is the error of a Scan whose record would pass its
// ScanOptions.MaxBytes.
var ErrRecordTooLarge = errors.New("the tree is too large to record")

// Scan records every entry below rel (not rel itself), by its path
// relative to the root, following no symlink, holding two descriptors at
// any depth.
func (r *Root) Scan(rel string, o ScanOptions) (Tree, error) {
	t := Tree{}
	prefix := ""
	if rel != "." && rel != "" {
		prefix = rel + "/"
	}
	var used int64
	err := r.walk(rel, func(dfd int, name string, p []byte, _ Entry) error {
		if len(p) == 0 {
			return nil // rel itself
		}
		if used += int64(len(prefix)+len(p)) + StateBytes; o.MaxBytes > 0 && used > o.MaxBytes {
			return ErrRecordTooLarge
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // removed meanwhile
			}
			return err
		}
		s := State{Mode: st.Mode, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
		if o.Racy > 0 && s.isReg() && s.Ctime >= o.Racy {
			sum, err := sumAt(dfd, name)
			if err != nil {
				return err
			}
			s.Sum = sum
		}
		if o.Overlay != "" {
			s.Whiteout = s.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
			if s.isDir() {
				var v [1]byte
				n, err := unix.Lgetxattr(fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name), o.Overlay+"overlay.opaque", v[:])
				s.Opaque = err == nil && n == 1 && v[0] == 'y'
			}
		}
		t[prefix+string(p)] = s
		return nil
	})
	return t, err
}

// sumAt hashes the content of the regular file name in dfd.
func sumAt(dfd int, name string) (*[sha256.Size]byte, error) {
	f, err := openFileAt(dfd, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return &sum, nil
}

// ModeOf converts a kernel st_mode, a State's or a Change's, to an
// fs.FileMode.
func ModeOf(m uint32) fs.FileMode { return modeOf(m) }

// ChangeKind says how an entry changed between two Trees.
type ChangeKind uint8

// The kinds of change.
const (
	Added ChangeKind = iota + 1
	Modified
	Deleted
)

// Change is one entry that differs between two Trees. Mode is the kernel's
// st_mode; Size and Mode are the new entry's, or for Deleted the old one's.
type Change struct {
	Path string
	Kind ChangeKind
	Size int64
	Mode uint32
}

// SameFunc reports whether the entry at p, old in one Tree and new in the
// other, is unchanged; both are of the same type.
type SameFunc func(p string, old, new State) (bool, error)

// SameInPlace compares two Scans of one file system: an entry is the same
// if it is the same inode with the same ctime, size, mode and mtime (a
// directory: the same inode and mode; what it holds is compared entry by
// entry), and, when its content was hashed in both, the same content.
func SameInPlace(_ string, o, n State) (bool, error) {
	if o.Ino != n.Ino || o.Mode != n.Mode {
		return false, nil
	}
	if o.isDir() {
		return true, nil
	}
	if o.Ctime != n.Ctime || o.Size != n.Size || o.Mtime != n.Mtime {
		return false, nil
	}
	if o.Sum != nil && (n.Sum == nil || *o.Sum != *n.Sum) {
		return false, nil
	}
	return true, nil
}

// SameContent returns the comparison of two trees on different file
// systems (a snapshot and the workspace), where inodes and ctimes say
// nothing: the same mode, and for a symlink the same target, for a regular
// file the same size and content (read from both when size and mtime are
// equal; a different mtime counts as a change without reading).
func SameContent(old, new *Root) SameFunc {
	return func(p string, o, n State) (bool, error) {
		if o.Mode != n.Mode {
			return false, nil
		}
		switch {
		case o.isLink():
			if o.Size != n.Size {
				return false, nil
			}
			a, err := old.Stat(p)
			if err != nil {
				return false, err
			}
			b, err := new.Stat(p)
			if err != nil {
				return false, err
			}
			return a.Target == b.Target, nil
		case o.isReg():
			if o.Size != n.Size || o.Mtime != n.Mtime {
				return false, nil
			}
			return sameFile(old, new, p)
		}
		return true, nil
	}
}

// sameFile compares the content of the regular file p in two roots.
func sameFile(a, b *Root, p string) (bool, error) {
	fa, err := a.ReadFile(p)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := b.ReadFile(p)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		aEnd := ea == io.EOF || ea == io.ErrUnexpectedEOF
		bEnd := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if ea != nil && !aEnd {
			return false, ea
		}
		if eb != nil && !bEnd {
			return false, eb
		}
		if aEnd || bEnd {
			return aEnd == bEnd, nil
		}
	}
}

// Diff lists what differs from old to new, sorted by path, the first
// limit changes of them, and how many more there were. An entry of
// another type under the same name is Modified. A deleted directory is
// one change: what it held is not listed (what a new one holds is).
func Diff(old, new Tree, same SameFunc, limit int) ([]Change, int, error) {
	var out []Change
	for p, n := range new {
		o, ok := old[p]
		switch {
		case !ok:
			out = append(out, Change{Path: p, Kind: Added, Size: n.Size, Mode: n.Mode})
		case o.Mode&unix.S_IFMT != n.Mode&unix.S_IFMT:
			out = append(out, Change{Path: p, Kind: Modified, Size: n.Size, Mode: n.Mode})
		default:
			eq, err := same(p, o, n)
			if err != nil {
				return nil, 0, err
			}
			if !eq {
				out = append(out, Change{Path: p, Kind: Modified, Size: n.Size, Mode: n.Mode})
			}
		}
	}
	for p, o := range old {
		if _, ok := new[p]; ok {
			continue
		}
		if dir := path.Dir(p); dir != "." {
			if d, ok := new[dir]; !ok || !d.isDir() {
				continue // inside a directory that is gone
			}
		}
		out = append(out, Change{Path: p, Kind: Deleted, Size: o.Size, Mode: o.Mode})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if len(out) > limit {
		return append([]Change(nil), out[:limit]...), len(out) - limit, nil
	}
	return out, 0, nil
}
