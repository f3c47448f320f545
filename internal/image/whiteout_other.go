//go:build !linux

package image

import (
	"errors"
	"io/fs"
	"os"
)

// The overlay form of whiteouts is Linux's: elsewhere layers keep marker
// files.

var mkWhiteout = func(*os.File, string) error { return errors.ErrUnsupported }

var setOpaque = func(*os.File) error { return errors.ErrUnsupported }

func isOpaque(*os.File) (bool, error) { return false, nil }

func isWhiteoutDevice(fs.FileInfo) bool { return false }
