package sandbox

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

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

// UnmarshalText reads the name MarshalText writes.
func (k *ChangeKind) UnmarshalText(b []byte) error {
	i := slices.Index(changeKindNames[:], string(b))
	if i <= 0 {
		return fmt.Errorf("sandbox: change kind %q: not one of %q", b, changeKindNames[1:])
	}
	*k = ChangeKind(i)
	return nil
}

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
	Path string      `json:"path"`       // relative to /workspace, slash-separated, e.g. "src/a.py"
	Kind ChangeKind  `json:"kind"`       // its name, e.g. "added"
	Size int64       `json:"size_bytes"` // bytes of a regular file, a symlink's target length; for ChangeDeleted, what it had
	Mode fs.FileMode `json:"mode"`       // type and permission bits, as fs.FileMode.String writes them, e.g. "-rw-r--r--"; for ChangeDeleted, what it had
}

// changeJSON is a Change with its Mode as text.
type changeJSON struct {
	plainChange
	Mode string `json:"mode"`
}

// plainChange is a Change without its methods, for changeJSON.
type plainChange Change

// MarshalJSON writes c with its mode as text.
func (c Change) MarshalJSON() ([]byte, error) {
	return json.Marshal(changeJSON{plainChange(c), c.Mode.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change) UnmarshalJSON(b []byte) error {
	var j changeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	mode, err := parseMode(j.Mode)
	if err != nil {
		return err
	}
	*c = Change(j.plainChange)
	c.Mode = mode
	return nil
}

// modeTypes are the letters fs.FileMode.String writes for its bits from
// the highest down, before the nine permission letters.
const modeTypes = "dalTLDpSugct?"

// parseMode reads what fs.FileMode.String writes.
func parseMode(s string) (fs.FileMode, error) {
	if len(s) < 10 {
		return 0, fmt.Errorf("sandbox: mode %q: want its type letters and nine permission letters, e.g. -rw-r--r--", s)
	}
	types, perm := s[:len(s)-9], s[len(s)-9:]
	var m fs.FileMode
	if types != "-" {
		for _, c := range types {
			i := strings.IndexRune(modeTypes, c)
			if i < 0 {
				return 0, fmt.Errorf("sandbox: mode %q: %q is not a type letter of %q", s, c, modeTypes)
			}
			m |= 1 << (31 - i)
		}
	}
	for i, c := range perm {
		switch c {
		case rune("rwxrwxrwx"[i]):
			m |= 1 << (8 - i)
		case '-':
		default:
			return 0, fmt.Errorf("sandbox: mode %q: permission letter %d is %q, want %q or '-'", s, i+1, c, "rwxrwxrwx"[i])
		}
	}
	return m, nil
}
