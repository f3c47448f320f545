//go:build linux

package launch

import (
	"os"

	"github.com/fumehood/sandbox/internal/wire"
)

// Files are the files an init gets besides stdio: the proxy channel, when
// its Spec has a ProxyPort, and the session's workspace mount, when it has
// WorkspaceMount (a prepared init gets the mount with its program
// instead). They come in this order after stdio in a start request.
type Files struct {
	ProxyChan, Workspace *os.File
}

// List is the files that are set, in their order.
func (f Files) List() []*os.File {
	var l []*os.File
	for _, x := range []*os.File{f.ProxyChan, f.Workspace} {
		if x != nil {
			l = append(l, x)
		}
	}
	return l
}

// check holds the files to what cfg says the init will find.
func (f Files) check(cfg *wire.Config) *wire.SetupError {
	// A prepared init is given its workspace mount with its program.
	wantWorkspace := cfg.WorkspaceMount && !cfg.Prepare
	if (cfg.ProxyPort != 0) != (f.ProxyChan != nil) || wantWorkspace != (f.Workspace != nil) || cfg.Prepare && cfg.ProxyPort != 0 {
		return &wire.SetupError{Stage: "start", Op: "init files", Text: "the proxy channel and the workspace mount must come with their config, and only then"}
	}
	return nil
}

// FilesFrom takes the files of a start request after stdio, as cfg
// says they come.
func FilesFrom(cfg *wire.Config, files []*os.File) (Files, bool) {
	var f Files
	for _, slot := range []struct {
		want bool
		dst  **os.File
	}{{cfg.ProxyPort != 0, &f.ProxyChan}, {cfg.WorkspaceMount, &f.Workspace}} {
		if !slot.want {
			continue
		}
		if len(files) == 0 {
			return f, false
		}
		*slot.dst, files = files[0], files[1:]
	}
	return f, len(files) == 0
}
