//go:build linux

package recipe

import (
	"path"
	"strings"
	"unsafe"

	"github.com/fumehood/sandbox/internal/forkplan"
	"golang.org/x/sys/unix"
)

// open adds an O_PATH open of a host path.
func (b *planner) open(p, op string, flags int) forkplan.Slot {
	s := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: op, Path: p}, unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(p),
		forkplan.Val(unix.O_PATH|unix.O_CLOEXEC|flags)).Save(s)
	return s
}

// newFS adds the steps of a detached mount of a new fstype filesystem.
func (b *planner) newFS(fstype string, attrs int, opts ...string) forkplan.Slot {
	fs, m := b.slot(), b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "fsopen " + fstype}, unix.SYS_FSOPEN, forkplan.Str(fstype), forkplan.Val(unix.FSOPEN_CLOEXEC)).Save(fs)
	for _, o := range opts {
		w := forkplan.Where{Stage: "mount", Op: "fsconfig " + fstype + " " + o}
		if k, v, hasValue := strings.Cut(o, "="); hasValue {
			b.call(w, unix.SYS_FSCONFIG, forkplan.In(fs), forkplan.Val(unix.FSCONFIG_SET_STRING), forkplan.Str(k), forkplan.Str(v), forkplan.Val(0))
		} else {
			b.call(w, unix.SYS_FSCONFIG, forkplan.In(fs), forkplan.Val(unix.FSCONFIG_SET_FLAG), forkplan.Str(k), forkplan.Val(0), forkplan.Val(0))
		}
	}
	b.call(forkplan.Where{Stage: "mount", Op: "fsconfig create " + fstype}, unix.SYS_FSCONFIG, forkplan.In(fs),
		forkplan.Val(unix.FSCONFIG_CMD_CREATE), forkplan.Val(0), forkplan.Val(0), forkplan.Val(0))
	b.call(forkplan.Where{Stage: "mount", Op: "fsmount " + fstype}, unix.SYS_FSMOUNT, forkplan.In(fs), forkplan.Val(unix.FSMOUNT_CLOEXEC),
		forkplan.Val(attrs)).Save(m)
	b.close(fs)
	return m
}

func (b *planner) setAttrs(fd forkplan.Slot, attrs uint64, recursive bool, w forkplan.Where) {
	flags := unix.AT_EMPTY_PATH
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	b.call(w, unix.SYS_MOUNT_SETATTR, forkplan.In(fd), forkplan.Str(""), forkplan.Val(flags),
		forkplan.Ptr(&unix.MountAttr{Attr_set: attrs}), forkplan.Val(unsafe.Sizeof(unix.MountAttr{})))
}

// cloneTree adds the steps of a detached recursive copy of the mount at src.
func (b *planner) cloneTree(src forkplan.Slot, attrs uint64, what string) forkplan.Slot {
	m := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "bind", Path: what}, unix.SYS_OPEN_TREE, forkplan.In(src), forkplan.Str(""),
		forkplan.Val(unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)).Save(m)
	if attrs != 0 {
		b.setAttrs(m, attrs, true, forkplan.Where{Stage: "mount", Op: "set flags of bind", Path: what})
	}
	return m
}

// attach moves the detached mount m onto target t and closes m; with
// keep, m stays open to build beneath it.
func (b *planner) attach(m, t forkplan.Slot, what string, keep bool) {
	b.call(forkplan.Where{Stage: "mount", Op: "attach", Path: what}, unix.SYS_MOVE_MOUNT, forkplan.In(m), forkplan.Str(""),
		forkplan.In(t), forkplan.Str(""), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH))
	if !keep {
		b.close(m)
	}
}

// target adds the steps that create p beneath the new root (a directory,
// or an empty file), with its missing parents, and open it. Where the
// model knows the parent (a directory the plan made), it creates what is
// missing; beneath what it does not know (a host tree, the workspace, a
// symlink, a Rootfs's entry), the child creates each missing element as
// it goes (create).
func (b *planner) target(p string, file bool) forkplan.Slot {
	p = b.resolve(path.Clean("/" + p))
	if _, ok := b.tree[p]; !ok {
		b.create(p, file)
	}
	t := b.slot()
	b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: p}, unix.SYS_OPENAT2, forkplan.In(b.root), forkplan.Str(p),
		forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
		forkplan.Val(unix.SizeofOpenHow)).Save(t)
	return t
}

// maxLinks bounds the symlinks resolve follows for one path, as the
// kernel's own limit does for a lookup.
const maxLinks = 40

// resolve follows the symlinks the plan made on the way to p, inside the
// new root: a target reached through one (a Rootfs's top-level link, say,
// dangling or not) is made where the link leads, as a program inside
// would find it. Links in trees the model does not know the insides of
// are followed by the child, which fails on a dangling one.
func (b *planner) resolve(p string) string {
	for range maxLinks {
		link, rest := "", ""
		for q := p; q != "/"; q = path.Dir(q) {
			if kind := b.tree[q]; kind == nodeLink {
				link, rest = q, strings.TrimPrefix(p, q)
			} else if kind == nodeOpaque {
				link = ""
			}
		}
		if link == "" {
			return p
		}
		next := b.links[link]
		if !path.IsAbs(next) {
			next = path.Join(path.Dir(link), next)
		}
		p = path.Clean("/" + next + rest)
	}
	return p
}

// create adds the steps that create p, whose parent is made first if the
// model has it not. Beneath a node the model does not know the insides
// of, the child resolves the parent inside the new root and creates p in
// it unless it exists: in a read-only tree that fails (EROFS) unless p is
// there, and a symlink in the way is followed, inside the root.
func (b *planner) create(p string, file bool) {
	dir := path.Dir(p)
	kind, known := b.tree[dir]
	if !known {
		b.create(dir, false)
		kind = b.tree[dir]
	}
	rel := strings.TrimPrefix(p, "/")
	w := forkplan.Where{Stage: "mount", Op: "create target", Path: p}
	if kind != nodeDir {
		parent := b.slot()
		b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: p}, unix.SYS_OPENAT2, forkplan.In(b.root), forkplan.Str(dir),
			forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
			forkplan.Val(unix.SizeofOpenHow)).Save(parent)
		if file {
			// mknod makes a regular file without privilege, and without
			// an fd to close.
			b.call(w, unix.SYS_MKNODAT, forkplan.In(parent), forkplan.Str(path.Base(p)), forkplan.Val(unix.S_IFREG|0o644), forkplan.Val(0)).
				PassOn(uintptr(unix.EEXIST))
		} else {
			b.call(w, unix.SYS_MKDIRAT, forkplan.In(parent), forkplan.Str(path.Base(p)), forkplan.Val(0o755)).PassOn(uintptr(unix.EEXIST))
		}
		b.close(parent)
		b.tree[p] = nodeOpaque
		return
	}
	if file {
		fd := b.slot()
		b.call(w, unix.SYS_OPENAT, forkplan.In(b.root), forkplan.Str(rel),
			forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
		b.close(fd)
		b.tree[p] = nodeFile
		return
	}
	b.call(w, unix.SYS_MKDIRAT, forkplan.In(b.root), forkplan.Str(rel), forkplan.Val(0o755))
	b.tree[p] = nodeDir
}

// bind adds the steps of a bind of the source at src onto target.
func (b *planner) bind(src forkplan.Slot, srcIsDir bool, target string, attrs uint64) {
	t := b.target(target, !srcIsDir)
	m := b.cloneTree(src, attrs, target)
	b.attach(m, t, target, false)
	b.close(t)
	b.tree[b.resolve(path.Clean("/"+target))] = nodeOpaque
}

// mountNew adds the steps of a new filesystem attached at target.
func (b *planner) mountNew(target, fstype string, attrs int, opts ...string) {
	t := b.target(target, false)
	m := b.newFS(fstype, attrs, opts...)
	b.attach(m, t, target, false)
	b.close(t)
}
