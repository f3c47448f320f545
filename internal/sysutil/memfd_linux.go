//go:build linux

package sysutil

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ExecMemfd makes an empty memfd that can be sealed and exec'd.
func ExecMemfd(name string) (*os.File, error) {
	// MFD_EXEC: kernels with vm.memfd_noexec create non-executable memfds
	// otherwise. Older kernels do not know the flag.
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: memfd_create %s (an executable memfd; see the sysctl vm.memfd_noexec): %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Seal makes f's contents final: nothing can write, grow or shrink it,
// nor change its seals.
func Seal(f *os.File) error {
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals)
	return err
}

// CopyAll copies src into dst inside the kernel, in as few calls as the
// kernel allows: a 32 KiB read/write loop would cost milliseconds on every
// start of the command-line tool.
func CopyAll(dst, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	for left := fi.Size(); left > 0; {
		n, err := unix.Sendfile(int(dst.Fd()), int(src.Fd()), nil, int(left))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		left -= int64(n)
	}
	return nil
}
