//go:build linux

package recipe

import (
	"golang.org/x/sys/unix"
)

// The host's regular files of HostEtc are copied into each run's root
// rather than bound one by one: a bind is an open_tree, a move_mount and a
// mount_setattr in the init and a mount to tear down at the end, where a
// copy is an open, a write and a close into the root's tmpfs. The bytes
// are read once per process and read again when a file changes.

const (
	// maxCopiedEtcFile is the largest file copied; a larger one is bound.
	// Debian's largest, mime.types, is 72 KiB.
	maxCopiedEtcFile = 128 << 10
	// maxCopiedEtc bounds what all copies take of the root's 4 MiB tmpfs
	// (and of the run's memory); the files past it are bound.
	maxCopiedEtc = 512 << 10
)

// fileStamp is what tells a file's change without reading it: a write
// moves its ctime and mtime, a replacement its inode.
type fileStamp struct {
	ino, size    int64
	mtime, ctime int64
}

func stampOf(st *unix.Stat_t) fileStamp {
	return fileStamp{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// copyHostEtc reads, into each of entries that is a regular file anyone
// may read, its bytes, while they fit the bounds. A file the sandbox user
// could not read through a bind (no read bit for others) stays bound, so
// that a copy never shows more than the host file would.
func copyHostEtc(entries []etcEntry) {
	total := 0
	for i := range entries {
		e := &entries[i]
		if e.kind != etcRegular {
			continue
		}
		data, st, ok := readEtcCopy(e.path, maxCopiedEtc-total)
		if !ok {
			continue
		}
		e.content, e.stamp = data, stampOf(&st)
		total += len(data)
	}
}

// readEtcCopy reads the host file at path whole, if it is a regular file
// anyone may read of at most maxCopiedEtcFile and room bytes. The buffer
// is sized from the file's stat and takes one read, where a growing one
// took a read for each doubling; the raw fd skips the runtime poller,
// which a regular file never uses. A file whose size changes as it is
// read is not copied (bound, as it was).
func readEtcCopy(path string, room int) ([]byte, unix.Stat_t, bool) {
	var st unix.Stat_t
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, false
	}
	defer unix.Close(fd)
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o004 == 0 ||
		st.Size > maxCopiedEtcFile || st.Size > int64(room) {
		return nil, st, false
	}
	// One byte more than the stat says, to see a file that grew.
	buf := make([]byte, st.Size+1)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, st, false
		}
		if m == 0 {
			break
		}
		n += m
	}
	if int64(n) != st.Size {
		return nil, st, false
	}
	return buf[:n:n], st, true
}

// copiesCurrent says whether every copied file of entries is as it was
// when read.
func copiesCurrent(entries []etcEntry) bool {
	for _, e := range entries {
		if e.content == nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(e.path, &st) != nil || stampOf(&st) != e.stamp {
			return false
		}
	}
	return true
}
