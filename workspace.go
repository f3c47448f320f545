package sandbox

// Workspace is what a Sandbox's /workspace is, Options.Workspace:
// SessionWorkspace, FreshWorkspace or HostWorkspace. Only those implement
// it. Nil means SessionWorkspace{}.
type Workspace interface{ isWorkspace() }

// SessionWorkspace is the default: a tmpfs /workspace that the Sandbox's
// Runs share, held by a small helper process of the session's own from the
// first Run or file operation until Close. Snapshot, Restore, Reset and the
// file operations work on it.
type SessionWorkspace struct {
	// Size caps the tmpfs, in bytes, across Runs: what its files hold,
	// together with, where the workspace is layered (see Sessions in the
	// package documentation), the snapshot layers it stands on. Zero
	// means DefaultWorkspaceSize. The number of files and directories is
	// capped too, at one per 4 KiB of the size (at least 4096): empty
	// files take no size but kernel memory.
	Size int64
	// From, if set, is a host directory whose tree the workspace starts
	// with, copied once when the session starts; Reset returns to it.
	From string
	// TrackChanges lists in each Run's Result.Changes the workspace
	// paths the Run added, modified and deleted. The session's keeper
	// records the workspace when a Run starts and compares it when the
	// Run ends: where the workspace is layered, only the layer that
	// takes changes (what lies beneath a snapshot costs nothing), else
	// the whole tree; about 5 µs per recorded file and 0.25 ms per Run
	// here (see Sessions in the package documentation). False: no list,
	// and no cost. Not with Options.Live, whose calls share a workspace
	// with the processes they leave running.
	TrackChanges bool
}

// FreshWorkspace gives every Run an empty tmpfs /workspace of its own, gone
// when the Run ends: no session state, for unrelated programs run through
// one Sandbox. The file operations, Snapshot, Restore and Reset are then
// refused.
type FreshWorkspace struct {
	// Size caps each Run's tmpfs, in bytes, as SessionWorkspace.Size
	// does. Zero means DefaultWorkspaceSize.
	Size int64
}

// HostWorkspace is a host directory bound read-write at /workspace, shared
// by every Run and kept after Close.
type HostWorkspace struct {
	// Dir is the directory, an absolute host path. It must exist (it is
	// used as it is, never made) and be writable by the sandbox's host
	// uid (see Options.HostUID and Options.HostIDs): New refuses it
	// otherwise, as it refuses a writable Bind that uid cannot write,
	// and an empty Dir.
	Dir string
}

func (SessionWorkspace) isWorkspace() {}
func (FreshWorkspace) isWorkspace()   {}
func (HostWorkspace) isWorkspace()    {}
