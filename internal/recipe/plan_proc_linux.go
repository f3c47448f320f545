//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/forkplan"
	"golang.org/x/sys/unix"
)

func (b *planner) buildProc(devNull forkplan.Slot) {
	t := b.target("/proc", false)
	proc := b.newFS("proc", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	b.attach(proc, t, "/proc", true)
	b.close(t)
	b.tree["/proc"] = nodeOpaque
	const attrs = roAttrs | unix.MOUNT_ATTR_NOEXEC
	hide := func(name string, mount func(fd forkplan.Slot, what string) forkplan.Slot) {
		what := "/proc/" + name
		fd := b.slot()
		// A path this kernel does not have is skipped with its steps.
		open := b.call(forkplan.Where{Stage: "mount", Op: "resolve", Path: what}, unix.SYS_OPENAT2, forkplan.In(proc), forkplan.Str(name),
			forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
			forkplan.Val(unix.SizeofOpenHow)).Save(fd)
		before := b.p.Len()
		m := mount(fd, what)
		b.attach(m, fd, what, false)
		b.close(fd)
		open.SkipOn(uintptr(unix.ENOENT), b.p.Len()-before)
	}
	for _, name := range procMaskedFiles {
		hide(name, func(_ forkplan.Slot, what string) forkplan.Slot { return b.cloneTree(devNull, attrs, what) })
	}
	for _, name := range procMaskedDirs {
		hide(name, func(forkplan.Slot, string) forkplan.Slot { return b.newFS("tmpfs", attrs, "size=0", "mode=0555") })
	}
	for _, name := range procReadOnly {
		hide(name, func(fd forkplan.Slot, what string) forkplan.Slot { return b.cloneTree(fd, attrs, what) })
	}
	b.close(proc)
}
