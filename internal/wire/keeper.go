package wire

// The messages between the caller and a session's workspace keeper, over a
// SOCK_SEQPACKET socket pair (one JSON message a packet). The caller
// writes the KeeperConfig before it starts the keeper, whose end of the
// pair is its fd 3; then the two take turns, one request at a time:
//
//	caller                                 keeper
//	KeeperConfig                        →  reads it, makes its scratch tmpfs
//	                                       and the initial workspace (a copy
//	                                       of From, or empty)
//	                                    ←  KeeperReply{}, or
//	                                       KeeperReply{Err, Errno} and exits
//	                                       (a config it cannot read: exits
//	                                       without a reply)
//	KeeperRequest{KeeperMount}          →  clones the workspace mount (open_tree)
//	                                    ←  KeeperReply{} + SCM_RIGHTS(the detached
//	                                       mount, which one run's init attaches
//	                                       at /workspace)
//	KeeperRequest{KeeperRoot}           →  opens the workspace (O_PATH)
//	                                    ←  KeeperReply{} + SCM_RIGHTS(the workspace
//	                                       directory, the caller's file API root)
//	KeeperRequest{KeeperSnapshot}       →  keeps the workspace as it is: freezes
//	                                       its upper layer under a fresh one
//	                                       (flat: copies it)
//	                                    ←  KeeperReply{ID}
//	KeeperRequest{KeeperRestore, ID}    →  puts a fresh upper layer on snapshot
//	                                       ID's stack (flat: copies it), ID 0
//	                                       being the initial content
//	                                    ←  KeeperReply{}
//	KeeperRequest{KeeperDrop, ID}       →  forgets snapshot ID (never 0), frees
//	                                       the layers nothing else holds
//	                                    ←  KeeperReply{}
//	KeeperRequest{KeeperMark}           →  records the workspace's entries (a
//	                                       run about to start)
//	                                    ←  KeeperReply{ID}
//	KeeperRequest{KeeperRunChanges,     →  lists what changed since mark ID, and
//	  ID, Limit}                           forgets the mark
//	                                    ←  KeeperReply{} + SCM_RIGHTS(a memfd
//	                                       holding KeeperChanges)
//	KeeperRequest{KeeperChangesSince,   →  lists what differs between snapshot
//	  ID, Limit}                           ID and the workspace
//	                                    ←  KeeperReply{} + SCM_RIGHTS(a memfd
//	                                       holding KeeperChanges)
//	a request that fails                ←  KeeperReply{Err, Errno, Unsupported},
//	                                       no fd; the keeper serves the next one
//	close (Close, or the caller dies)   →  exits; its mount namespace, and
//	                                       every layer with it, is gone (Close
//	                                       kills a keeper not gone in 5 s)
//
// Only the keeper sends fds, and only in the replies to KeeperMount,
// KeeperRoot, KeeperRunChanges and KeeperChangesSince that succeed.

// KeeperOp names what a KeeperRequest asks the keeper for.
type KeeperOp string

// The requests a keeper serves.
const (
	// KeeperMount asks for a detached clone of the workspace mount, for
	// one run's init to attach at /workspace.
	KeeperMount KeeperOp = "mount"
	// KeeperRoot asks for an O_PATH descriptor of the workspace
	// directory, for the caller's file operations.
	KeeperRoot KeeperOp = "root"
	// KeeperSnapshot asks the keeper to keep the workspace as it is now;
	// the reply's ID names the snapshot.
	KeeperSnapshot KeeperOp = "snapshot"
	// KeeperRestore makes snapshot ID the workspace; ID 0 is the
	// initial content.
	KeeperRestore KeeperOp = "restore"
	// KeeperDrop frees snapshot ID; ID 0 is never dropped.
	KeeperDrop KeeperOp = "drop"
	// KeeperMark records the workspace's entries as they are now, for
	// a KeeperRunChanges once a run is over; the reply's ID names the
	// mark.
	KeeperMark KeeperOp = "mark"
	// KeeperRunChanges lists what changed since mark ID, at most Limit
	// changes, and forgets the mark.
	KeeperRunChanges KeeperOp = "run-changes"
	// KeeperChangesSince lists what differs between snapshot ID (0: the
	// initial content) and the workspace, at most Limit changes.
	KeeperChangesSince KeeperOp = "changes-since"
)

// KeeperConfig is the keeper's first message: the workspace it is to hold.
type KeeperConfig struct {
	Size     int64  // the workspace's cap in bytes, all layers of its stack together
	UID, GID int    // the owner of the workspace's files, in the keeper's ids
	From     string // a host directory copied in as the initial content; "" = empty
	UserNS   bool   // the keeper is in a user namespace of its own

	// Flat holds the workspace in one tmpfs and takes snapshots as
	// copies even where the kernel can mount an overlay in the keeper's
	// namespace: the layout the keeper falls back to by itself where it
	// cannot (before Linux 6.6, tmpfs has no user xattrs).
	Flat bool
}

// KeeperRequest asks the keeper for one thing.
type KeeperRequest struct {
	Op    KeeperOp
	ID    int // the snapshot of KeeperRestore, KeeperDrop and KeeperChangesSince; the mark of KeeperRunChanges
	Limit int // the most changes KeeperRunChanges and KeeperChangesSince list
}

// KeeperChanges is what the memfd of a KeeperRunChanges or
// KeeperChangesSince reply holds, as JSON: the changes sorted by path,
// and how many more there were past the request's Limit.
type KeeperChanges struct {
	Changes []KeeperChange
	Dropped int
}

// KeeperChange is one path that changed. Path is bytes, not a string, so
// that a name that is not UTF-8 crosses JSON unchanged.
type KeeperChange struct {
	Path []byte // relative to the workspace
	Kind uint8  // 1 added, 2 modified, 3 deleted
	Size int64
	Mode uint32 // st_mode
}

// KeeperReply answers the KeeperConfig and then each KeeperRequest, in
// order. Err is empty when the request was served.
type KeeperReply struct {
	ID    int // the snapshot KeeperSnapshot made, the mark KeeperMark made
	Err   string
	Errno int // the system call error in Err's chain, or 0
	// Unsupported says the workspace cannot serve the request at all
	// (a snapshot too many to stack, a dropped snapshot): the caller
	// reports it as the root package's ErrNotSupported.
	Unsupported bool
}
