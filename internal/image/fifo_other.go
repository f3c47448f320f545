//go:build !linux

package image

import (
	"errors"
	"os"
)

// mkfifo fails: the store makes FIFOs only on Linux, where sandboxes run.
func mkfifo(*os.File, string, uint32) error {
	return errors.ErrUnsupported
}
