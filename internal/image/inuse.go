package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// InUse says whether a Lease (Store.Use), of this process or any other,
// holds img's root now. It is a snapshot: a Lease may begin or end as it
// returns. Prune decides the same way, and keeps what is in use.
//
// A root's lease is a shared flock on its directory, and flock has no way
// to ask who holds a lock: InUse tries to take it exclusively, and gives
// it back at once. So that two probes of one root do not see each other's
// exclusive lock as a lease, a probe holds roots/ exclusively (only probes
// lock it); so that it does not meet Prune's, it holds the store's lock
// shared, as a pull does. A Use that meets a probe's lock waits for it.
func (s *Store) InUse(ctx context.Context, img Image) (bool, error) {
	lk, err := s.lockStore(ctx, false)
	if err != nil {
		return false, err
	}
	defer lk.Close()
	probe, err := s.root.Open(rootsDir)
	if err != nil {
		return false, fmt.Errorf("image store %s: %w", s.dir, err)
	}
	defer probe.Close()
	if err := lockFile(ctx, probe, true); err != nil {
		return false, fmt.Errorf("image store %s: waiting for another probe: %w", s.dir, err)
	}
	f, err := s.root.Open(s.rootRel(img.chainID))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // pruned, so used by no one
	}
	if err != nil {
		return false, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	defer f.Close() // releases the lock, if it was taken
	free, err := tryLockFile(f, true)
	if err != nil {
		return false, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return !free, nil
}
