//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/forkplan"
	"golang.org/x/sys/unix"
)

func (b *planner) buildDev(devs []forkplan.Slot) {
	t := b.target("/dev", false)
	dev := b.newFS("tmpfs", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, "mode=0755", "size=64k", "nr_inodes=64")
	b.attach(dev, t, "/dev", true)
	b.close(t)
	in := func(name string, file bool) forkplan.Slot {
		w := forkplan.Where{Stage: "mount", Op: "create target", Path: "/dev/" + name}
		if file {
			fd := b.slot()
			b.call(w, unix.SYS_OPENAT, forkplan.In(dev), forkplan.Str(name),
				forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
			b.close(fd)
		} else {
			b.call(w, unix.SYS_MKDIRAT, forkplan.In(dev), forkplan.Str(name), forkplan.Val(0o755))
		}
		t := b.slot()
		b.call(forkplan.Where{Stage: "mount", Op: "resolve target", Path: "/dev/" + name}, unix.SYS_OPENAT, forkplan.In(dev), forkplan.Str(name),
			forkplan.Val(unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW)).Save(t)
		return t
	}
	for i, name := range devices {
		t := in(name, true)
		// Device nodes need a mount without nodev.
		m := b.cloneTree(devs[i], unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, "/dev/"+name)
		b.attach(m, t, "/dev/"+name, false)
		b.close(t)
	}
	for _, fs := range devFilesystems(b.cfg) {
		t := in(fs.name, false)
		m := b.newFS(fs.fstype, fs.attrs, fs.opts...)
		b.attach(m, t, "/dev/"+fs.name, false)
		b.close(t)
	}
	for _, name := range sortedKeys(devLinks) {
		b.call(forkplan.Where{Stage: "mount", Op: "symlink", Path: "/dev/" + name}, unix.SYS_SYMLINKAT, forkplan.Str(devLinks[name]),
			forkplan.In(dev), forkplan.Str(name))
	}
	b.setAttrs(dev, unix.MOUNT_ATTR_RDONLY, false, forkplan.Where{Stage: "mount", Op: "make read-only", Path: "/dev"})
	b.close(dev)
	b.tree["/dev"] = nodeOpaque
}
