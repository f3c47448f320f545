// Package workspace reads and writes a sandbox's workspace from the host
// without running anything inside it, and copies it for snapshots.
//
// The workspace's content is written by the sandboxed program, which is
// hostile: it may plant symlinks (to /etc/shadow, to "../../..") and then
// wait for the host to follow them. So every path is resolved beneath the
// workspace's root directory as if that directory were "/": with openat2
// and RESOLVE_IN_ROOT, or, where openat2 is refused (an old kernel, a
// container's seccomp profile that answers ENOSYS), with a walk of our own
// that opens one component at a time with O_NOFOLLOW and resolves symlinks
// itself, never above the root. Nothing here ever opens a host path by
// name below the root. Writes never go through a symlink's target: a file
// is written to a new inode and renamed over the name, so snapshots that
// share inodes with the workspace are never changed in place either.
//
// CopyTo is the copy that snapshots are taken and restored with; its cost
// (BenchmarkSnapshot, BenchmarkRestore) is what the session design is
// measured against.
package workspace

import "errors"

// ErrOutside is matched by the error for a path that names something
// outside the root ("../x").
var ErrOutside = errors.New("path outside the workspace")
