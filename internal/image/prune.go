package image

import (
	"context"
	"fmt"
	"io/fs"
)

// Prune removes from the store every image keep does not want (a nil keep
// wants none) unless a Lease holds it, then every root and layer that no
// remaining image needs, and anything an interrupted pull left. It waits
// for running pulls to finish, up to ctx's deadline, and returns how many
// bytes of file data it freed.
func (s *Store) Prune(ctx context.Context, keep func(Image) bool) (freed int64, err error) {
	lk, err := s.lockStore(ctx, true)
	if err != nil {
		return 0, err
	}
	defer lk.Close()
	if err := s.removeTemps(); err != nil {
		return 0, err
	}
	recs, err := s.records()
	if err != nil {
		return 0, err
	}
	roots, layers := map[string]bool{}, map[string]bool{}
	for key, r := range recs {
		if (keep != nil && keep(s.image(r))) || s.inUse(s.rootRel(r.ChainID)) {
			roots[hexOf(r.ChainID)] = true
			for _, d := range r.DiffIDs {
				layers[hexOf(d)] = true
			}
			continue
		}
		if err := s.root.Remove(imagesDir + "/" + key); err != nil {
			return freed, fmt.Errorf("image store %s: %w", s.dir, err)
		}
	}
	// Roots first: their files are links to the layers' files, which are
	// freed when their last link goes.
	for _, d := range []struct {
		dir  string
		keep map[string]bool
	}{{rootsDir, roots}, {layersDir, layers}} {
		ents, err := fs.ReadDir(s.root.FS(), d.dir)
		if err != nil {
			return freed, fmt.Errorf("image store %s: %w", s.dir, err)
		}
		for _, e := range ents {
			rel := d.dir + "/" + e.Name()
			if d.keep[e.Name()] || (d.dir == rootsDir && s.inUse(rel)) {
				continue
			}
			n, err := s.removeTree(rel)
			freed += n
			if err != nil {
				return freed, err
			}
		}
	}
	return freed, nil
}

// inUse says whether a Lease holds the root rel. The caller holds the
// store's lock exclusively, so no Lease can begin meanwhile.
func (s *Store) inUse(rel string) bool {
	f, err := s.root.Open(rel)
	if err != nil {
		return false
	}
	defer f.Close()
	ok, err := tryLockFile(f, true)
	return err != nil || !ok
}

// removeTree removes rel and returns the bytes of the regular files whose
// last link it removed.
func (s *Store) removeTree(rel string) (int64, error) {
	type inode struct{ seen, nlink uint64 }
	inodes := map[uint64]*inode{}
	sizes := map[uint64]int64{}
	fs.WalkDir(s.root.FS(), rel, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		ino, nlink, ok := linkCount(fi)
		if !ok {
			return nil
		}
		in := inodes[ino]
		if in == nil {
			in = &inode{nlink: nlink}
			inodes[ino] = in
			sizes[ino] = fi.Size()
		}
		in.seen++
		return nil
	})
	if err := s.root.RemoveAll(rel); err != nil {
		return 0, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	var freed int64
	for ino, in := range inodes {
		if in.seen >= in.nlink {
			freed += sizes[ino]
		}
	}
	return freed, nil
}
