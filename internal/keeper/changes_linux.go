// The workspace keeper process runs this file: what a run changed (a
// record of the workspace at the run's start, compared with it at the
// end) and what changed since a snapshot.

package keeper

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fumehood/sandbox/internal/wire"
	"github.com/fumehood/sandbox/internal/workspace"
	"golang.org/x/sys/unix"
)

// maxRecord bounds the memory of one record of the workspace (a run's
// mark, its comparison at the end, each side of changesSince): about
// 200,000 entries of short paths, fewer of long ones.
const maxRecord = 32 << 20

// mark is the workspace as a run found it: where it is layered, its
// upper layer, which holds all that differs from the stack beneath;
// elsewhere the whole tree.
type mark struct {
	tree  workspace.Tree
	racy  int64 // the ctime from which a file's content was hashed
	upper int   // the upper layer scanned, or -1 for the whole tree
}

// racyBound is the ctime from which a file may change again without its
// ctime moving: two ticks of the coarse clock the file system stamps
// times with, before now.
func racyBound() int64 {
	tick := int64(10 * time.Millisecond)
	var res unix.Timespec
	if unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &res) == nil && res.Nano() > 0 {
		tick = res.Nano()
	}
	return time.Now().UnixNano() - 2*tick
}

// scan records the upper layer up (-1: the whole workspace), hashing the
// files changed since racy.
func (k *keeper) scan(up int, racy int64) (workspace.Tree, error) {
	dir, o := "ws", workspace.ScanOptions{Racy: racy, MaxBytes: maxRecord}
	if up >= 0 {
		dir, o.Overlay = fmt.Sprintf("L%d/u", up), "trusted."
		if k.cfg.UserNS {
			o.Overlay = "user."
		}
	}
	r, err := workspace.Open(dir, -1, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	t, err := r.Scan(".", o)
	if err != nil {
		return nil, fmt.Errorf("record the workspace: %w", err)
	}
	return t, nil
}

// mark records the workspace for a run about to start and returns the
// mark's id.
func (k *keeper) mark() (int, error) {
	m := mark{racy: racyBound(), upper: -1}
	if k.layered {
		m.upper = k.upper
		if k.lowerStale {
			if err := k.mountLowerView(); err != nil {
				return 0, err
			}
			k.lowerStale = false
		}
	}
	var err error
	if m.tree, err = k.scan(m.upper, m.racy); err != nil {
		return 0, err
	}
	k.markID++
	k.marks[k.markID] = m
	return k.markID, nil
}

// runChanges lists what changed since mark id, forgets the mark, and
// returns a memfd holding the list.
func (k *keeper) runChanges(id, limit int) (int, error) {
	m, ok := k.marks[id]
	if !ok {
		return -1, fmt.Errorf("no mark %d", id)
	}
	delete(k.marks, id)
	if m.upper >= 0 && m.upper != k.upper {
		// Runs hold the workspace against a Restore or Snapshot.
		return -1, fmt.Errorf("the workspace's upper layer was replaced during the run")
	}
	now, err := k.scan(m.upper, m.racy)
	if err != nil {
		return -1, err
	}
	var cs []workspace.Change
	var dropped int
	if m.upper >= 0 {
		var lower *workspace.Root
		if lower, err = workspace.Open("lw", -1, -1); err != nil {
			return -1, err
		}
		defer lower.Close()
		cs, dropped, err = workspace.DiffUpper(m.tree, now, lower, limit, maxRecord)
	} else {
		cs, dropped, err = workspace.Diff(m.tree, now, workspace.SameInPlace, limit)
	}
	if err != nil {
		return -1, err
	}
	return changesFile(cs, dropped)
}

// mountLowerView mounts the stack beneath the upper layer, read-only, at
// lw (unmounted by mountWorkspace), where a run's changes are looked up;
// with no layer beneath, lw is an empty directory.
func (k *keeper) mountLowerView() error {
	if len(k.lowers) == 0 {
		return nil
	}
	return k.mountStack("lw", k.lowers)
}

// mountStack mounts the layers of stack (top first) read-only at dir,
// over the empty directory, so that an overlay has two lower layers
// however few the stack holds.
func (k *keeper) mountStack(dir string, stack []int) error {
	dirs := make([]string, 0, len(stack)+1)
	for _, l := range stack {
		dirs = append(dirs, fmt.Sprintf("L%d/u", l))
	}
	opts := "lowerdir=" + strings.Join(append(dirs, "empty"), ":")
	if k.cfg.UserNS {
		opts += ",userxattr"
	}
	if err := unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount a read-only stack: %w", err)
	}
	return nil
}

// changesSince lists what differs between snapshot id and the workspace,
// and returns a memfd holding the list.
func (k *keeper) changesSince(id, limit int) (int, error) {
	stack, ok := k.snaps[id]
	if !ok {
		return -1, unsupported("snapshot %d was dropped", id)
	}
	dir := "empty"
	switch {
	case len(stack) == 0:
	case !k.layered:
		dir = fmt.Sprintf("L%d/u", stack[0])
	default:
		// The snapshot's stack, read-only, with the empty directory
		// beneath so that there are always two lower layers.
		dir = "cmp"
		if err := unix.Mkdir(dir, 0o700); err != nil {
			return -1, err
		}
		defer unix.Rmdir(dir)
		if err := k.mountStack(dir, stack); err != nil {
			return -1, fmt.Errorf("snapshot %d: %w", id, err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
	}
	old, err := workspace.Open(dir, -1, -1)
	if err != nil {
		return -1, err
	}
	defer old.Close()
	cur, err := workspace.Open("ws", -1, -1)
	if err != nil {
		return -1, err
	}
	defer cur.Close()
	ot, err := old.Scan(".", workspace.ScanOptions{MaxBytes: maxRecord})
	if err != nil {
		return -1, fmt.Errorf("record snapshot %d: %w", id, err)
	}
	nt, err := cur.Scan(".", workspace.ScanOptions{MaxBytes: maxRecord})
	if err != nil {
		return -1, fmt.Errorf("record the workspace: %w", err)
	}
	cs, dropped, err := workspace.Diff(ot, nt, workspace.SameContent(old, cur), limit)
	if err != nil {
		return -1, err
	}
	return changesFile(cs, dropped)
}

// changesFile writes the list to a memfd, read by the caller.
func changesFile(cs []workspace.Change, dropped int) (int, error) {
	out := wire.KeeperChanges{Changes: make([]wire.KeeperChange, len(cs)), Dropped: dropped}
	for i, c := range cs {
		out.Changes[i] = wire.KeeperChange{Path: []byte(c.Path), Kind: uint8(c.Kind), Size: c.Size, Mode: c.Mode}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return -1, err
	}
	fd, err := unix.MemfdCreate("workspace-changes", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	for off := 0; off < len(data); {
		n, err := unix.Write(fd, data[off:])
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		off += n
	}
	return fd, nil
}
