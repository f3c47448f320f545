//go:build linux

package recipe

import (
	"fmt"
	"slices"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

func (b *planner) buildRoot(bindDirs []bool) {
	cfg := b.cfg
	// Open every source first: the staging mount hides part of the host
	// tree.
	type source struct {
		name string
		dir  bool
		fd   forkplan.Slot
	}
	top := b.topEntries()
	rootfs := forkplan.Slot(-1)
	overlay := len(cfg.RootfsLayers) > 0
	switch {
	case overlay:
		rootfs = b.mountLayers()
	case cfg.Rootfs != "":
		rootfs = b.open(cfg.Rootfs, "open source (Options.Root)", unix.O_DIRECTORY)
	}
	var entries []source
	for _, e := range top {
		switch {
		case e.link != "":
		case rootfs >= 0:
			entries = append(entries, source{e.name, e.dir, b.openInRootfs(rootfs, e.name, unix.O_PATH|unix.O_NOFOLLOW)})
		default:
			entries = append(entries, source{e.name, e.dir, b.open("/"+e.name, "open source", unix.O_NOFOLLOW)})
		}
	}
	devs := make([]forkplan.Slot, len(devices))
	for i, d := range devices {
		devs[i] = b.open("/dev/"+d, "open source", 0)
	}
	binds := make([]forkplan.Slot, len(cfg.Binds))
	for i, bd := range cfg.Binds {
		binds[i] = b.open(bd.Source, fmt.Sprintf("open source (Options.Binds[%d])", i), 0)
	}
	workspace := forkplan.Slot(-1)
	if cfg.Workspace != "" {
		workspace = b.open(cfg.Workspace, "open source (Options.Workspace)", 0)
	}
	etcSrc := make([]forkplan.Slot, len(b.etc))
	for i, e := range b.etc {
		etcSrc[i] = -1
		switch {
		case e.kind == etcLink, e.content != nil:
		case rootfs >= 0:
			etcSrc[i] = b.openInRootfs(rootfs, e.path, unix.O_PATH|unix.O_NOFOLLOW)
		default:
			etcSrc[i] = b.open(e.path, "open source", unix.O_NOFOLLOW)
		}
	}

	b.call(forkplan.Where{Stage: "mount", Op: "make / private"}, unix.SYS_MOUNT, forkplan.Str(""), forkplan.Str("/"), forkplan.Str(""),
		forkplan.Val(unix.MS_REC|unix.MS_PRIVATE), forkplan.Str(""))
	if overlay {
		// Attached beneath the new root, so that its entries can be
		// bound (older kernels' open_tree clones only a mount of the
		// caller's namespace); the old root's detach takes it away.
		b.call(forkplan.Where{Stage: "mount", Op: "attach overlay of the image's layers", Path: stagingDir}, unix.SYS_MOVE_MOUNT, forkplan.In(rootfs), forkplan.Str(""),
			forkplan.Val(unix.AT_FDCWD), forkplan.Str(stagingDir), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH))
	}
	b.root = b.newFS("tmpfs", rwAttrs, "mode=0755", "size=4m", "nr_inodes=4096")
	b.call(forkplan.Where{Stage: "mount", Op: "attach new root", Path: stagingDir}, unix.SYS_MOVE_MOUNT, forkplan.In(b.root), forkplan.Str(""),
		forkplan.Val(unix.AT_FDCWD), forkplan.Str(stagingDir), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH))
	for _, e := range top {
		if e.link != "" {
			b.call(forkplan.Where{Stage: "mount", Op: "symlink", Path: "/" + e.name}, unix.SYS_SYMLINKAT, forkplan.Str(e.link),
				forkplan.In(b.root), forkplan.Str(e.name))
			b.tree["/"+e.name], b.links["/"+e.name] = nodeLink, e.link
		}
	}
	for _, e := range entries {
		b.bind(e.fd, e.dir, "/"+e.name, roAttrs)
	}
	b.buildEtc(etcSrc)
	b.buildProc(devs[0])
	b.buildDev(devs)
	b.mountNew("/tmp", "tmpfs", rwAttrs, "mode=1777", fmt.Sprintf("size=%d", cfg.TmpSize), fmt.Sprintf("nr_inodes=%d", TmpfsInodes(cfg.TmpSize)))
	b.tree["/tmp"] = nodeDir
	switch {
	case workspace >= 0:
		b.bind(workspace, true, wire.DefaultDir, rwAttrs)
	case cfg.WorkspaceMount && cfg.Prepare:
		// Given with the program (awaitProgram).
		if _, ok := b.tree[wire.DefaultDir]; !ok {
			b.create(wire.DefaultDir, false)
		}
		b.tree[wire.DefaultDir] = nodeOpaque
	case cfg.WorkspaceMount:
		t := b.target(wire.DefaultDir, false)
		b.call(forkplan.Where{Stage: "mount", Op: "attach", Path: wire.DefaultDir}, unix.SYS_MOVE_MOUNT, forkplan.Val(planWorkspaceFd), forkplan.Str(""),
			forkplan.In(t), forkplan.Str(""), forkplan.Val(unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH))
		b.call(forkplan.Where{Stage: "mount", Op: "close"}, unix.SYS_CLOSE, forkplan.Val(planWorkspaceFd))
		b.close(t)
		b.tree[wire.DefaultDir] = nodeOpaque
	default:
		b.mountNew(wire.DefaultDir, "tmpfs", rwAttrs, "mode=0755", fmt.Sprintf("size=%d", cfg.WorkspaceSize),
			fmt.Sprintf("nr_inodes=%d", TmpfsInodes(cfg.WorkspaceSize)),
			fmt.Sprintf("uid=%d", wire.SandboxUID), fmt.Sprintf("gid=%d", wire.SandboxGID))
		b.tree[wire.DefaultDir] = nodeDir
	}
	for i, bd := range cfg.Binds {
		attrs := uint64(roAttrs)
		if bd.Writable {
			attrs = rwAttrs
		}
		b.bind(binds[i], bindDirs[i], bd.Target, attrs)
	}
	b.setAttrs(b.root, roAttrs, false, forkplan.Where{Stage: "mount", Op: "make root read-only"})
	// Sources are closed before the pivot: nothing of the host tree may
	// stay reachable through an fd.
	for _, s := range slices.Concat([]forkplan.Slot{workspace, rootfs}, devs, binds, etcSrc) {
		if s >= 0 {
			b.close(s)
		}
	}
	for _, e := range entries {
		b.close(e.fd)
	}
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "pivot_root", Op: op} }
	b.call(w("chdir new root"), unix.SYS_FCHDIR, forkplan.In(b.root))
	b.call(w("pivot_root"), unix.SYS_PIVOT_ROOT, forkplan.Str("."), forkplan.Str("."))
	b.call(w("detach old root"), unix.SYS_UMOUNT2, forkplan.Str("."), forkplan.Val(unix.MNT_DETACH))
	b.call(w("chdir /"), unix.SYS_CHDIR, forkplan.Str("/"))
	b.close(b.root)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
