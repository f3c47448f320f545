//go:build linux

package recipe

import (
	"fmt"
	"os"
	"path"
	"slices"

	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// A Rootfs (a RootDir or an image, Options.Root) takes the place of the host's system
// directories: each of its top-level entries, but those the sandbox makes
// itself (rootfsSkip), is bound read-only at the top of the new root, or
// recreated there when it is a symlink, and /etc takes the HostEtc paths
// from the rootfs's /etc instead of the host's. The planner reads the
// rootfs when it plans; the child opens every source beneath the rootfs
// directory it opened as the sandbox's user, and fails if one is gone.

// rootfsEntry is one top-level entry of a rootfs.
type rootfsEntry struct {
	name string
	link string // a symlink's target, recreated as is
	dir  bool
}

// readRootfs reads what the plan takes from cfg.Rootfs: its top-level
// entries and the HostEtc paths of its /etc. Links inside the rootfs
// resolve inside it.
func (b *planner) readRootfs() *wire.SetupError {
	dir := b.cfg.Rootfs
	fail := func(op, p string, err error) *wire.SetupError {
		return &wire.SetupError{Stage: "mount", Op: op, Path: p, Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	f, err := os.Open(dir)
	if err != nil {
		return fail("open source (Options.Root)", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fail("read rootfs (Options.Root)", dir, err)
	}
	slices.Sort(names)
	dirfd := int(f.Fd())
	for _, name := range names {
		if rootfsSkip[name] {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail("stat source", path.Join(dir, name), err)
		}
		e := rootfsEntry{name: name, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if e.link, err = sysutil.ReadlinkAt(dirfd, name); err != nil {
				return fail("readlink", path.Join(dir, name), err)
			}
		}
		b.rootfs = append(b.rootfs, e)
	}
	entries, err := etcEntriesIn(dirfd, true)
	if err != nil {
		return fail("read /etc of the rootfs (Options.Root)", dir, err)
	}
	b.etc = entries
	return nil
}

// etcEntriesIn lists the HostEtc paths that exist beneath the directory
// dirfd (the host's root, or a rootfs with rootfs set), resolved inside
// it. A link is recreated, never followed: what it points to is visible
// only if the sandbox has it.
func etcEntriesIn(dirfd int, rootfs bool) ([]etcEntry, error) {
	readdir := func(dir string) []string {
		fd, err := sysutil.OpenInRoot(dirfd, dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), dir)
		defer f.Close()
		names, _ := f.Readdirnames(-1)
		return names
	}
	var out []etcEntry
	for _, p := range etcPaths(rootfs, readdir) {
		fd, err := sysutil.OpenInRoot(dirfd, p, unix.O_PATH|unix.O_NOFOLLOW)
		if err == unix.ENOENT || err == unix.ENOTDIR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", p, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		e := etcEntry{path: p}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			e.kind = etcLink
			if err == nil {
				e.link, err = sysutil.ReadlinkAt(fd, "")
			}
		case unix.S_IFDIR:
			e.kind = etcDir
		case unix.S_IFREG:
			e.kind = etcRegular
		default:
			e.kind = 0 // a device or socket describes no system
		}
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if e.kind != 0 {
			out = append(out, e)
		}
	}
	return out, nil
}

// topEntries are the entries at the top of the new root besides what the
// sandbox makes itself: the host's system directories, or the rootfs's.
func (b *planner) topEntries() []rootfsEntry {
	if b.cfg.Rootfs != "" {
		return b.rootfs
	}
	var out []rootfsEntry
	for _, e := range b.facts.entries {
		out = append(out, rootfsEntry{name: e.name, link: e.link, dir: true})
	}
	return out
}

// openInRootfs adds the open of p beneath the rootfs, whose directory is
// in slot dir, as openInRoot does.
func (b *planner) openInRootfs(dir forkplan.Slot, p string, flags int) forkplan.Slot {
	s := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "open source", Path: path.Join(b.cfg.Rootfs, p)}, unix.SYS_OPENAT2, forkplan.In(dir), forkplan.Str(p),
		forkplan.Ptr(&unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
		forkplan.Val(unix.SizeofOpenHow)).Save(s)
	return s
}
