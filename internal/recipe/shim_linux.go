//go:build linux

package recipe

import (
	"fmt"
	"os"
	"sync"

	"github.com/fumehood/sandbox/internal/execshim"
	"github.com/fumehood/sandbox/internal/sysutil"
)

// The exec shim (internal/execshim) that an init execs in place of the
// program: one sealed copy per launcher process, made on first use. Every
// init gets it at planShimFd.
var shimMemfd struct {
	once sync.Once
	file *os.File
	err  error
}

// ShimFile returns the exec shim's sealed memfd, or nil on an
// architecture the shim has no code for.
func ShimFile() (*os.File, error) {
	shimMemfd.once.Do(func() { shimMemfd.file, shimMemfd.err = makeShim() })
	return shimMemfd.file, shimMemfd.err
}

func makeShim() (*os.File, error) {
	image := execshim.Image(planConnFd)
	if image == nil {
		return nil, nil
	}
	f, err := sysutil.ExecMemfd("sandbox-exec-shim")
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(image); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: write the exec shim: %w", err)
	}
	if err := sysutil.Seal(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: seal the exec shim: %w", err)
	}
	return f, nil
}
