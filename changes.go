package sandbox

import "io/fs"

// MaxChanges is the most entries a list of workspace changes holds
// (Result.Changes, Sandbox.Changes); past it only a count is kept, so a
// program that makes a million files costs the caller a list of this
// length.
const MaxChanges = 1000

// ChangeKind is how a workspace path changed.
type ChangeKind int

// The kinds of change a path can have.
const (
	// ChangeAdded: the path did not exist before.
	ChangeAdded ChangeKind = iota + 1
	// ChangeModified: the path existed and its content, mode, type or
	// (within a run) inode changed.
	ChangeModified
	// ChangeDeleted: the path existed and is gone.
	ChangeDeleted
)

var changeKindNames = [...]string{"", "added", "modified", "deleted"}

// String returns the kind's lower-case name, e.g. "added".
func (k ChangeKind) String() string {
	if k > 0 && int(k) < len(changeKindNames) {
		return changeKindNames[k]
	}
	return "unknown"
}

// MarshalText makes ChangeKind print as its name in JSON.
func (k ChangeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Change is one workspace path that was added, modified or deleted.
//
// A renamed entry is its old path deleted and its new one added. A
// deleted directory is one Change: what it held is not listed (what a new
// directory holds is). A directory counts as modified only when its own
// mode or identity changed, not when entries were added to it or removed
// from it (those are Changes of their own). Within a run (Result.Changes)
// a file counts as modified when anything about it changed in the kernel's
// eyes, its inode change time (which no program can set): a file written
// with the same bytes, touched, or given another hard link counts, and so
// does one the layered workspace copied up without a change of content.
type Change struct {
	Path string // relative to /workspace, slash-separated, e.g. "src/a.py"
	Kind ChangeKind
	Size int64       // bytes of a regular file, a symlink's target length; for ChangeDeleted, what it had
	Mode fs.FileMode // type and permission bits; for ChangeDeleted, what it had
}
