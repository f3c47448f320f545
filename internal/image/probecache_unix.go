//go:build unix

package image

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fileID names the file at path for as long as it exists: its device,
// inode and change time. A file made again at the path has another inode
// or, where the inode number is reused, a later change time.
func fileID(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return fmt.Sprintf("%d:%d:%d.%09d", st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec), nil
}
