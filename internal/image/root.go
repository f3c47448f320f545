package image

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// buildRoot makes the root of a stack of stored layers, roots/<chain ID
// hex>, unless it exists. It is built in work and renamed into place, so a
// root in place is always whole.
//
// The root holds hard links to the layers' files, not copies: a root costs
// directories and links, not data. Layers are applied bottom to top; a
// whiteout removes what the layers below put at its name, an opaque
// directory what they put in it, and an entry replaces whatever lower
// layers had at its name (a directory over a symlink replaces the symlink,
// so building never follows a link an image made). Whiteouts themselves
// never appear in the root. Layers in either form (layerForm) are read:
// the marker form's files, and the overlay form's whiteout devices and
// opaque directories, which mean the same.
func (s *Store) buildRoot(chain string, diffIDs []string, work string) error {
	rel := s.rootRel(chain)
	if s.exists(rel) {
		return nil
	}
	tmp := work + "/root"
	if err := s.root.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("root %s: %w", chain, err)
	}
	if err := s.root.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("root %s: %w", chain, err)
	}
	for _, d := range diffIDs {
		if err := s.mergeDir(s.layerRel(d)+"/"+layerFS, tmp, s.layerForm(d) == formOverlay); err != nil {
			return fmt.Errorf("root %s: layer %s: %w", chain, d, err)
		}
	}
	if err := s.root.Rename(tmp, rel); err != nil && !s.exists(rel) {
		return fmt.Errorf("root %s: %w", chain, err)
	}
	return nil
}

// mergeDir applies the directory src of a layer onto the directory dst of
// a root being built; both are paths in the store, and dst is a directory
// this build made. With overlay, the layer is in overlay form.
func (s *Store) mergeDir(src, dst string, overlay bool) error {
	ents, err := fs.ReadDir(s.root.FS(), src)
	if err != nil {
		return err
	}
	if overlay {
		if err := s.applyOverlayWhiteouts(src, dst, ents); err != nil {
			return err
		}
	}
	// Whiteouts first: they remove only what lower layers put here.
	for _, e := range ents {
		n := e.Name()
		if n == whiteoutOpaque {
			if err := s.emptyDir(dst); err != nil {
				return err
			}
			continue
		}
		target, ok := strings.CutPrefix(n, whiteoutPrefix)
		if !ok {
			continue
		}
		if target == "" || target == "." || target == ".." {
			return fmt.Errorf("whiteout %q in %s: %w", n, src, ErrBadImage)
		}
		if err := s.root.RemoveAll(dst + "/" + target); err != nil {
			return err
		}
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, whiteoutPrefix) || e.Type()&fs.ModeCharDevice != 0 {
			continue
		}
		from, to := src+"/"+n, dst+"/"+n
		if !e.IsDir() {
			err := s.root.Link(from, to)
			if errors.Is(err, fs.ErrExist) {
				if err = s.root.RemoveAll(to); err == nil {
					err = s.root.Link(from, to)
				}
			}
			if err != nil {
				return err
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if fi, err := s.root.Lstat(to); err == nil && !fi.IsDir() {
			if err := s.root.RemoveAll(to); err != nil {
				return err
			}
		}
		if err := s.root.Mkdir(to, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := s.root.Chmod(to, info.Mode()&(fs.ModePerm|fs.ModeSticky)|0o700); err != nil {
			return err
		}
		if err := s.mergeDir(from, to, overlay); err != nil {
			return err
		}
	}
	return nil
}

// applyOverlayWhiteouts removes from dst what the overlay form's
// whiteouts in src, a directory of a layer, delete: everything if src is
// opaque, and each name a whiteout device holds. The store holds no other
// device (the unpacker drops them), and none is ever linked into a root.
func (s *Store) applyOverlayWhiteouts(src, dst string, ents []fs.DirEntry) error {
	f, err := s.root.Open(src)
	if err != nil {
		return err
	}
	opaque, err := isOpaque(f)
	f.Close()
	if err != nil {
		return err
	}
	if opaque {
		if err := s.emptyDir(dst); err != nil {
			return err
		}
	}
	for _, e := range ents {
		if e.Type()&fs.ModeCharDevice == 0 {
			continue
		}
		if err := s.root.RemoveAll(dst + "/" + e.Name()); err != nil {
			return err
		}
	}
	return nil
}

// emptyDir removes everything in dst, a directory of a root being built:
// what the layers below put in a directory an upper layer made opaque.
func (s *Store) emptyDir(dst string) error {
	below, err := fs.ReadDir(s.root.FS(), dst)
	if err != nil {
		return err
	}
	for _, b := range below {
		if err := s.root.RemoveAll(dst + "/" + b.Name()); err != nil {
			return err
		}
	}
	return nil
}
