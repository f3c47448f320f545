//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/fumehood/sandbox/internal/execshim"
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
	dst, err := execMemfd("sandbox-self")
	if err != nil {
		return nil, err
	}
	if err := copyAll(dst, src); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sandbox: copy own executable: %w", err)
	}
	if err := seal(dst); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sandbox: seal own executable: %w", err)
	}
	return dst, nil
}

// The exec shim (internal/execshim) that a planned init execs in place of
// the program: one sealed copy per process, made on first use. Every
// planned init gets it at planShimFd.
var shimMemfd struct {
	once sync.Once
	file *os.File
	err  error
}

// shimFile returns the exec shim's sealed memfd, or nil on an
// architecture the shim has no code for.
func shimFile() (*os.File, error) {
	shimMemfd.once.Do(func() { shimMemfd.file, shimMemfd.err = makeShim() })
	return shimMemfd.file, shimMemfd.err
}

func makeShim() (*os.File, error) {
	image := execshim.Image(planConnFd)
	if image == nil {
		return nil, nil
	}
	f, err := execMemfd("sandbox-exec-shim")
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(image); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: write the exec shim: %w", err)
	}
	if err := seal(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: seal the exec shim: %w", err)
	}
	return f, nil
}

// execMemfd makes an empty memfd that can be sealed and exec'd.
func execMemfd(name string) (*os.File, error) {
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

// seal makes f's contents final: nothing can write, grow or shrink it,
// nor change its seals.
func seal(f *os.File) error {
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals)
	return err
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
