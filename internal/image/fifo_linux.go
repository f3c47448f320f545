package image

import (
	"os"

	"golang.org/x/sys/unix"
)

// mkfifo makes a FIFO named base in the directory dir.
func mkfifo(dir *os.File, base string, perm uint32) error {
	return unix.Mkfifoat(int(dir.Fd()), base, perm)
}
