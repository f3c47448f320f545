//go:build linux

package recipe

import (
	"os"

	"github.com/fumehood/sandbox/internal/sysutil"
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
		f, err := os.OpenFile(e.path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o004 == 0 ||
			st.Size > maxCopiedEtcFile || total+int(st.Size) > maxCopiedEtc {
			f.Close()
			continue
		}
		data, err := sysutil.ReadLimited(f, maxCopiedEtcFile)
		f.Close()
		if err != nil || int64(len(data)) != st.Size {
			continue // changing as it is read: bound, as it was
		}
		if data == nil {
			data = []byte{}
		}
		e.content, e.stamp = data, stampOf(&st)
		total += len(data)
	}
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
