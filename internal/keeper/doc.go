// Package keeper runs in the workspace keeper process, which holds a
// session's /workspace between runs: one process per Sandbox, the caller's
// binary re-exec'd into a mount namespace of its own (and, for a caller
// that is not root, a user namespace mapping only the caller's ids). Its
// mounts exist nowhere else, so the keeper's death, whatever kills it,
// frees them all; it exits when the caller's end of its socket closes
// (Close, or the caller's death). The messages it exchanges with the
// caller, and their order, are internal/wire's KeeperConfig, KeeperRequest
// and KeeperReply.
//
// The workspace is an overlay: read-only lower layers (the initial content,
// then one per snapshot) under an upper layer that takes the changes, each
// layer its own tmpfs. Snapshot freezes the upper layer and stacks a fresh
// one on it; Restore and Reset put a fresh upper layer on a snapshot's
// stack. Neither copies a byte, which is why the layers exist: copying 100
// MB in 10,000 files took 0.4 to 0.6 s here (internal/workspace's
// benchmarks). Where the kernel cannot mount an overlay in the keeper's
// user namespace (tmpfs lacks user xattrs before Linux 6.6), the workspace
// is one tmpfs and snapshots are copies ("flat").
//
// A run's changes are a record of the workspace at its start compared
// with it at its end: where it is layered, of the upper layer only, which
// holds all that differs from the stack beneath (mounted read-only at lw
// for looking up what a change replaced); flat, of the whole tree.
//
// Each run gets a detached clone of the workspace mount (open_tree), which
// its init attaches at /workspace: the same files, in the run's own mount
// namespace. The caller gets a directory fd of the workspace for the file
// API.
package keeper
