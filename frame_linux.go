//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The messages between a launcher and an init travel over a stream socket
// as frames: a 4-byte little-endian length, then that many bytes of JSON.
// A frame has an end of its own because a prepared init's socket stays
// open both ways between its config and its program, so EOF cannot end
// one. A frame's fds, if any, ride on its first byte.

// maxFrame bounds what an init reads: as much as the spawner takes.
const maxFrame = maxMessage

// writeFrame sends msg as one frame, with fds attached.
func writeFrame(conn *os.File, msg []byte, fds []int) error {
	buf := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(msg)), uint32(len(msg)))
	buf = append(buf, msg...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for len(buf) > 0 {
		n, err := unix.SendmsgN(int(conn.Fd()), buf, oob, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		buf, oob = buf[n:], nil
	}
	return nil
}

// readFrame reads one frame, and the fds that came with it when withFds.
func readFrame(conn *os.File, withFds bool) ([]byte, []*os.File, error) {
	var (
		head  [4]byte
		files []*os.File
		got   int
	)
	oob := make([]byte, unix.CmsgSpace(8*4))
	for got < len(head) {
		n, oobn, _, _, err := unix.Recvmsg(int(conn.Fd()), head[got:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			closeFiles(files)
			return nil, nil, err
		}
		files = append(files, receivedFiles(oob[:oobn])...)
		if n == 0 {
			closeFiles(files)
			return nil, nil, io.ErrUnexpectedEOF
		}
		got += n
	}
	if !withFds {
		closeFiles(files)
		files = nil
	}
	size := binary.LittleEndian.Uint32(head[:])
	if size > maxFrame {
		closeFiles(files)
		return nil, nil, fmt.Errorf("frame of %d bytes, more than %d", size, maxFrame)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		closeFiles(files)
		return nil, nil, err
	}
	return body, files, nil
}
