package sysutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// ReceivedFiles are the fds that arrived as SCM_RIGHTS in the control
// message oob, as files; a malformed message yields none.
func ReceivedFiles(oob []byte) []*os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files
}

// CloseFiles closes every file of files.
func CloseFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
