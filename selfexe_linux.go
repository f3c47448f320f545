//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The spawner, the workspace keeper and probes are this binary run again,
// never inside a sandbox. It is exec'd from a sealed in-memory copy, made
// once per process, rather than from /proc/self/exe: the spawner, whose
// clones become sandboxes' inits, then holds no file that anything could
// write (the CVE-2019-5736 class), and a binary replaced on disk
// mid-flight does not change what runs.
var self struct {
	once sync.Once
	file *os.File // kept referenced: its finalizer would close the fd
	path string
	err  error
}

// selfExe returns the path through which the sealed copy can be exec'd.
func selfExe() (string, error) {
	self.once.Do(func() {
		if self.file, self.err = sealSelf(); self.err == nil {
			self.path = fmt.Sprintf("/proc/self/fd/%d", self.file.Fd())
		}
	})
	return self.path, self.err
}

func sealSelf() (*os.File, error) {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("sandbox: open own executable: %w", err)
	}
	defer src.Close()
	// MFD_EXEC: kernels with vm.memfd_noexec create non-executable memfds
	// otherwise. Older kernels do not know the flag.
	fd, err := unix.MemfdCreate("sandbox-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate("sandbox-init", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: memfd_create: %w", err)
	}
	dst := os.NewFile(uintptr(fd), "sandbox-init")
	if err := copyAll(dst, src); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sandbox: copy own executable: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(dst.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sandbox: seal own executable: %w", err)
	}
	return dst, nil
}

// copyAll copies src into dst inside the kernel, in as few calls as the
// kernel allows: a 32 KiB read/write loop would cost milliseconds on every
// start of the command-line tool.
func copyAll(dst, src *os.File) error {
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
