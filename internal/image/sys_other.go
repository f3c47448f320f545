//go:build !unix

package image

import (
	"context"
	"errors"
	"io/fs"
	"os"
)

// errNoFlock: the store's locking needs flock, which this system lacks.
var errNoFlock = errors.New("image store: needs flock, a Unix system call")

func lockFile(context.Context, *os.File, bool) error { return errNoFlock }

func tryLockFile(*os.File, bool) (bool, error) { return false, errNoFlock }

func linkCount(fs.FileInfo) (ino, nlink uint64, ok bool) { return 0, 0, false }
