package workspace

import (
	"errors"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// DiffUpper lists what changed in an overlay between two Scans of its
// upper layer (ScanOptions.Overlay set), old and new, as Diff does for
// two Scans of the whole tree: the first limit changes sorted by path,
// and how many more there were. lower is the read-only stack beneath the
// upper layer, the same for both. Only the names the upper layer holds
// are looked at, and beneath a directory the program replaced (an opaque
// one), what it hid; the rest of the tree is the lower layers', which no
// run changes.
//
// A file the overlay copied up into the upper layer counts as modified
// even if its content did not change: the copy is the only trace left.
func DiffUpper(old, new Tree, lower *Root, limit int) ([]Change, int, error) {
	cand := map[string]bool{}
	for p := range old {
		cand[p] = true
	}
	for p, n := range new {
		cand[p] = true
		if n.isDir() && n.Opaque && !old[p].Opaque {
			// What the replaced directory held beneath it is gone.
			hid, err := lower.scanIfDir(p)
			if err != nil {
				return nil, 0, err
			}
			for q := range hid {
				cand[q] = true
			}
		}
	}
	var out []Change
	for p := range cand {
		o, oe, oUp, err := merged(old, p, lower)
		if err != nil {
			return nil, 0, err
		}
		n, ne, nUp, err := merged(new, p, lower)
		if err != nil {
			return nil, 0, err
		}
		kind := ChangeKind(0)
		switch {
		case !oe && !ne:
		case !oe:
			kind = Added
		case !ne:
			if dir := path.Dir(p); dir != "." {
				if d, ok, _, err := merged(new, dir, lower); err != nil {
					return nil, 0, err
				} else if !ok || !d.isDir() {
					continue // inside a directory that is gone
				}
			}
			out = append(out, Change{Path: p, Kind: Deleted, Size: o.Size, Mode: o.Mode})
			continue
		case o.Mode&unix.S_IFMT != n.Mode&unix.S_IFMT:
			kind = Modified
		case oUp && nUp:
			if same, _ := SameInPlace(p, o, n); !same || o.Opaque != n.Opaque {
				kind = Modified
			}
		case nUp:
			// Copied up: a directory only to hold a change beneath
			// it, unless it was replaced; anything else for a change
			// of its own.
			if !n.isDir() || n.Opaque || n.Mode != o.Mode {
				kind = Modified
			}
		case oUp:
			kind = Modified // the upper entry went and the lower one shows again
		}
		if kind != 0 {
			out = append(out, Change{Path: p, Kind: kind, Size: n.Size, Mode: n.Mode})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if len(out) > limit {
		return append([]Change(nil), out[:limit]...), len(out) - limit, nil
	}
	return out, 0, nil
}

// merged is what the overlay shows at p given its upper layer's Scan up:
// the entry, whether there is one, and whether it is the upper layer's.
func merged(up Tree, p string, lower *Root) (State, bool, bool, error) {
	onlyUpper := false
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		if s, ok := up[p[:i]]; ok {
			if s.Whiteout || !s.isDir() {
				return State{}, false, false, nil
			}
			onlyUpper = onlyUpper || s.Opaque
		}
	}
	if s, ok := up[p]; ok {
		if s.Whiteout {
			return State{}, false, false, nil
		}
		return s, true, true, nil
	}
	if onlyUpper {
		return State{}, false, false, nil
	}
	s, ok, err := lower.lstat(p)
	return s, ok, false, err
}

// lstat describes p without following a final symlink; ok is false when
// there is nothing there.
func (r *Root) lstat(p string) (State, bool, error) {
	root, done, err := r.hold()
	if err != nil {
		return State{}, false, err
	}
	defer done()
	dir, base := split(p)
	dfd, err := openIn(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return State{}, false, nil
	} else if err != nil {
		return State{}, false, err
	}
	return State{Mode: st.Mode, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true, nil
}

// scanIfDir is the Scan of the directory p, or nothing if p is not one.
func (r *Root) scanIfDir(p string) (Tree, error) {
	s, ok, err := r.lstat(p)
	if err != nil || !ok || !s.isDir() || strings.HasPrefix(p, "/") {
		return nil, err
	}
	return r.Scan(p, ScanOptions{})
}
