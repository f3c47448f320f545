package sandbox

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/fumehood/sandbox/internal/workspace"
)

// ErrClosed is matched by the error of every call on a closed Sandbox.
var ErrClosed = errors.New("sandbox closed")

// ErrOutsideWorkspace is matched by the error of a file operation whose path
// leaves the workspace ("../x", "/etc/passwd"). Symlinks the program left in
// the workspace are followed only within it, as if /workspace were the root.
var ErrOutsideWorkspace = workspace.ErrOutside

// MaxTarPath is the longest entry name, in bytes, that Sandbox.WriteTar
// writes (the kernel's PATH_MAX, past which nothing in the sandbox can
// open a path by name either); a longer path stops it with an error.
const MaxTarPath = workspace.MaxTarPath

// WorkspaceEntry describes one name in the workspace. Symlinks are not
// followed: a symlink is described, and Target is what it points to.
type WorkspaceEntry struct {
	Name    string      // the base name
	Mode    fs.FileMode // type and permission bits
	Size    int64       // bytes, for a regular file
	ModTime time.Time
	Target  string // a symlink's target, as stored
}

// A Snapshot is the content of a session's workspace at one moment; see
// Sandbox.Snapshot. It belongs to the Sandbox that took it and lives until
// Release or the Sandbox's Close.
type Snapshot struct {
	s  *Sandbox
	id int
}

// workspacePath turns a file operation's name into one relative to the
// workspace: "src/a.py", "/workspace/src/a.py" and "./src/a.py" are the
// same; another absolute path is refused.
func workspacePath(name string) (string, error) {
	if !strings.HasPrefix(name, "/") {
		return name, nil
	}
	p := path.Clean(name)
	if p == DefaultDir {
		return ".", nil
	}
	if rel, ok := strings.CutPrefix(p, DefaultDir+"/"); ok {
		return rel, nil
	}
	return "", &fs.PathError{Op: "resolve", Path: name, Err: ErrOutsideWorkspace}
}
