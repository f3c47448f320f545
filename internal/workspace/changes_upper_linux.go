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
// one), what it hid (recorded within maxBytes, as ScanOptions.MaxBytes);
// the rest of the tree is the lower layers', which no run changes.
//
// A file the overlay copied up into the upper layer counts as modified
// even if its content did not change: the copy is the only trace left.
func DiffUpper(old, new Tree, lower *Root, limit int, maxBytes int64) ([]Change, int, error) {
	cand := map[string]bool{}
	for p := range old {
		cand[p] = true
	}
	for p, n := range new {
		cand[p] = true
		if n.isDir() && n.Opaque && !old[p].Opaque {
			// What the replaced directory held beneath it is gone.
			hid, err := lower.scanIfDir(p, maxBytes)
			if err != nil {
				return nil, 0, err
			}
			for q := range hid {
				cand[q] = true
			}
		}
	}
	var out []Change
	ov, nv := newOverlayView(old, lower), newOverlayView(new, lower)
	for p := range cand {
		o, oe, oUp, err := ov.at(p)
		if err != nil {
			return nil, 0, err
		}
		n, ne, nUp, err := nv.at(p)
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
				if d, ok, _, err := nv.at(dir); err != nil {
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

// overlayView answers what an overlay shows at a path, given a Scan of
// its upper layer and its lower stack, remembering what it learnt of
// each directory so that a deep tree costs the length of its paths, not
// their square.
type overlayView struct {
	up       Tree
	lower    *Root
	dirs     map[string]dirShows // what each directory's children come from
	lowerDir map[string]bool     // whether the lower stack has this directory
}

// dirShows is what the overlay shows beneath a directory.
type dirShows uint8

const (
	showsBoth  dirShows = iota + 1 // the upper layer's entries over the lower stack's
	showsUpper                     // the upper layer's alone (an opaque directory)
	showsNone                      // nothing: it is not a directory there
)

func newOverlayView(up Tree, lower *Root) *overlayView {
	return &overlayView{up: up, lower: lower, dirs: map[string]dirShows{}, lowerDir: map[string]bool{}}
}

func (v *overlayView) shows(d string) dirShows {
	if d == "." {
		return showsBoth
	}
	if s, ok := v.dirs[d]; ok {
		return s
	}
	ps := v.shows(path.Dir(d))
	s := ps
	if u, ok := v.up[d]; ok && ps != showsNone {
		switch {
		case u.Whiteout || !u.isDir():
			s = showsNone
		case u.Opaque:
			s = showsUpper
		}
	} else if ps == showsUpper {
		s = showsNone // not in the upper layer, beneath which nothing shows
	}
	v.dirs[d] = s
	return s
}

// hasLowerDir says whether the lower stack has the directory d.
func (v *overlayView) hasLowerDir(d string) (bool, error) {
	if d == "." {
		return true, nil
	}
	if ok, known := v.lowerDir[d]; known {
		return ok, nil
	}
	ok, err := v.hasLowerDir(path.Dir(d))
	if err != nil {
		return false, err
	}
	if ok {
		var s State
		if s, ok, err = v.lower.lstat(d); err != nil {
			return false, err
		}
		ok = ok && s.isDir()
	}
	v.lowerDir[d] = ok
	return ok, nil
}

// at is what the overlay shows at p: the entry, whether there is one,
// and whether it is the upper layer's.
func (v *overlayView) at(p string) (State, bool, bool, error) {
	parent := path.Dir(p)
	ps := v.shows(parent)
	if ps == showsNone {
		return State{}, false, false, nil
	}
	if s, ok := v.up[p]; ok {
		if s.Whiteout {
			return State{}, false, false, nil
		}
		return s, true, true, nil
	}
	if ps == showsUpper {
		return State{}, false, false, nil
	}
	if ok, err := v.hasLowerDir(parent); err != nil || !ok {
		return State{}, false, false, err
	}
	s, ok, err := v.lower.lstat(p)
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
func (r *Root) scanIfDir(p string, maxBytes int64) (Tree, error) {
	s, ok, err := r.lstat(p)
	if err != nil || !ok || !s.isDir() || strings.HasPrefix(p, "/") {
		return nil, err
	}
	return r.Scan(p, ScanOptions{MaxBytes: maxBytes})
}
