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
// The tree may be as deep as the file system allows (tens of thousands of
// levels: more than a process may hold descriptors), so nothing here
// holds a descriptor per level: a walk is a cursor that goes down with
// O_NOFOLLOW and back up through "..", checked against the device and
// inode it came from, so a directory the program moves meanwhile stops the
// walk with an error instead of leading it elsewhere. No operation holds
// more than MaxDescriptors at once at any depth (CopyTo, the most: a
// cursor and a top in each tree, a listing's, a file's two). Memory is
// one path, a frame per level and the listings of the directories on the
// path, never the tree. WriteTar writes each inode's
// content once (hard links as tar links; maxLinkNames bounds the names it
// keeps for that), a sparse file's data without its holes, names of at
// most MaxTarPath bytes, and no more content than the workspace holds
// (SetSize).
//
// A name above the root is refused with ErrOutside, and so is the root
// itself by every operation that would replace it; RemoveAll of the root
// empties it (as Empty does) and keeps it. ExtractTar reads at most the
// workspace's size (SetSize) of file content, by the sizes the entries
// declare, checked before their content is read.
//
// CopyTo is the copy that snapshots are taken and restored with; its cost
// (BenchmarkSnapshot, BenchmarkRestore) is what the session design is
// measured against.
package workspace

import "errors"

// MaxDescriptors is the most descriptors any operation of a Root holds at
// once, whatever the depth of the tree.
const MaxDescriptors = 8

// ErrOutside is matched by the error for a path that names something
// outside the root ("../x").
var ErrOutside = errors.New("path outside the workspace")

// MaxTarPath is the longest entry name WriteTar writes, in bytes: the
// kernel's PATH_MAX. Nothing in the sandbox can open a longer path by
// name either, and it bounds what one entry's header costs, where a
// chain of n directories would otherwise give a tar of n² bytes.
const MaxTarPath = 4096
