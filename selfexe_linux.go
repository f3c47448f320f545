//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"sync"

	"github.com/fumehood/sandbox/internal/sysutil"
)

// The spawner and the workspace keeper are this binary run again,
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
	dst, err := sysutil.ExecMemfd("sandbox-self")
	if err != nil {
		return nil, err
	}
	if err := sysutil.CopyAll(dst, src); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sandbox: copy own executable: %w", err)
	}
	if err := sysutil.Seal(dst); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sandbox: seal own executable: %w", err)
	}
	return dst, nil
}
