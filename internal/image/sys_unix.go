//go:build unix

package image

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// flockPoll is how often a lock that is taken is tried again: flock has no
// timeout, and waiting must end with the caller's ctx.
const flockPoll = 10 * time.Millisecond

// lockFile takes an flock on f, shared or exclusive, waiting until ctx ends.
// flock locks belong to the open file description, so two opens in one
// process exclude each other as two processes do, and a lock dies with its
// process: a crash never leaves a store locked.
func lockFile(ctx context.Context, f *os.File, exclusive bool) error {
	for {
		ok, err := tryLockFile(f, exclusive)
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(flockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// tryLockFile takes an flock on f if no other holder prevents it.
func tryLockFile(f *os.File, exclusive bool) (bool, error) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}

// linkCount is a file's inode number and number of hard links.
func linkCount(fi fs.FileInfo) (ino, nlink uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Ino), uint64(st.Nlink), true
}
