//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// stagingDir is where the new root is attached before pivot_root. Every
// source is opened before that, so what it hides does not matter.
const stagingDir = "/tmp"

// hostSystemDirs are the host directories bound read-only (or recreated as
// symlinks, on merged-/usr systems) when no Rootfs is given.
var hostSystemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// rootfsSkip are top-level entries of a caller's rootfs that the sandbox
// provides itself or leaves out.
var rootfsSkip = map[string]bool{"proc": true, "dev": true, "sys": true, "tmp": true, "run": true,
	"etc": true, "workspace": true, "lost+found": true}

// devices are the host device nodes bound into /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// maxPtys is how many ptys one sandbox may hold open at once.
const maxPtys = 64

// devFS is a filesystem mounted in /dev.
type devFS struct {
	name, fstype string
	attrs        int // MOUNT_ATTR_* of its mount
	opts         []string
}

// devFilesystems are /dev's own filesystems, in the order they are
// mounted: a private devpts and a tmpfs /dev/shm.
//
// The devpts is a new instance, the sandbox's own: its ptys are the only
// ones reachable, and /dev/ptmx (a link to pts/ptmx) opens them. Its mount
// must allow device nodes (no nodev), or opening ptmx fails with EACCES; a
// devpts made in a user namespace may hold only its own pty nodes (the
// kernel clears SB_I_NODEV for devpts alone), so no other device becomes
// reachable. Without gid=, a pty's slave gets the group of the process
// that opened it: the sandbox's own group, which /etc/group names. The
// host's ptys are one pool (kernel.pty.max, of which kernel.pty.reserve
// stays for the host's own devpts): maxPtys keeps one sandbox from taking
// what the others need.
func devFilesystems(cfg *wire.Config) []devFS {
	return []devFS{
		{"pts", "devpts", unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC, []string{"ptmxmode=0666", "mode=0620", fmt.Sprintf("max=%d", maxPtys)}},
		{"shm", "tmpfs", unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC,
			[]string{"mode=1777", fmt.Sprintf("size=%d", cfg.TmpSize), fmt.Sprintf("nr_inodes=%d", tmpfsInodes(cfg.TmpSize))}},
	}
}

// devLinks are the symlinks of /dev.
var devLinks = map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
	"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}

// Paths in /proc hidden the way runc hides them: files behind /dev/null,
// directories behind an empty read-only tmpfs, and trees made read-only.
var (
	procMaskedFiles = []string{"kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug"}
	procMaskedDirs  = []string{"acpi", "asound", "scsi"}
	procReadOnly    = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
)

const (
	roAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	rwAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
)

// entry is one top-level entry of the new root taken from the host or rootfs.
type entry struct {
	name string
	link string // symlink target, recreated as is
	fd   int    // O_PATH fd of a directory or file to bind, when link is ""
}

// rootBuilder assembles the sandbox's filesystem.
type rootBuilder struct {
	cfg    *wire.Config
	rootfs int   // the caller's rootfs directory, when Rootfs is set
	root   int   // the new root's mount
	fds    []int // closed when done
}

// buildRoot builds the new root and pivots into it.
func buildRoot(cfg *wire.Config) error {
	b := &rootBuilder{cfg: cfg, root: -1}
	defer b.closeAll()
	var err error
	// The init opens the caller's paths with the sandbox's host uid: what
	// that uid cannot reach cannot be bound.
	if cfg.Rootfs != "" {
		if b.rootfs, err = b.open(cfg.Rootfs, "open source (Options.Rootfs)"); err != nil {
			return err
		}
	}
	// Open every source first: afterwards the staging mount hides part of
	// the host tree, and fds cannot be redirected by later path changes.
	entries, err := b.systemEntries()
	if err != nil {
		return err
	}
	devs := make([]int, len(devices))
	for i, d := range devices {
		if devs[i], err = b.open("/dev/"+d, "open source"); err != nil {
			return err
		}
	}
	binds := make([]int, len(cfg.Binds))
	for i, bd := range cfg.Binds {
		if binds[i], err = b.open(bd.Source, fmt.Sprintf("open source (Options.Binds[%d])", i)); err != nil {
			return err
		}
	}
	workspace := -1
	if cfg.Workspace != "" {
		if workspace, err = b.open(cfg.Workspace, "open source (Options.Workspace)"); err != nil {
			return err
		}
	}
	etcSrc, err := b.etcSources()
	if err != nil {
		return err
	}

	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &initError{Stage: "mount", Op: "make / private", Err: err}
	}
	if b.root, err = newFS("tmpfs", rwAttrs, "mode=0755", "size=4m", "nr_inodes=4096"); err != nil {
		return err
	}
	if err := unix.MoveMount(b.root, "", unix.AT_FDCWD, stagingDir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return &initError{Stage: "mount", Op: "attach new root", Path: stagingDir, Err: err}
	}
	for _, e := range entries {
		if err := b.addEntry(e); err != nil {
			return err
		}
	}
	steps := []func() error{
		func() error { return b.buildEtc(etcSrc) },
		func() error { return b.buildProc(devs[0]) },
		func() error { return b.buildDev(devs) },
		func() error {
			return b.mountNew("/tmp", "tmpfs", rwAttrs, "mode=1777", fmt.Sprintf("size=%d", cfg.TmpSize),
				fmt.Sprintf("nr_inodes=%d", tmpfsInodes(cfg.TmpSize)))
		},
		func() error { return b.buildWorkspace(workspace) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	for i, bd := range cfg.Binds {
		attrs := uint64(roAttrs)
		if bd.Writable {
			attrs = rwAttrs
		}
		if err := b.bind(binds[i], bd.Target, attrs); err != nil {
			return err
		}
	}
	if err := setAttrs(b.root, roAttrs, false); err != nil {
		return &initError{Stage: "mount", Op: "make root read-only", Err: err}
	}
	return b.pivot()
}

func (b *rootBuilder) closeAll() {
	for _, fd := range b.fds {
		unix.Close(fd)
	}
}

// keep records fd for closing and returns it.
func (b *rootBuilder) keep(fd int) int {
	b.fds = append(b.fds, fd)
	return fd
}

// open opens a host path as an O_PATH fd, following symlinks: the caller's
// options name trusted host paths.
func (b *rootBuilder) open(p, op string) (int, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &initError{Stage: "mount", Op: op, Path: p, Err: err}
	}
	return b.keep(fd), nil
}

// base returns the directory the system entries come from: the caller's
// rootfs, or the host's root.
func (b *rootBuilder) base() (int, error) {
	if b.cfg.Rootfs != "" {
		return b.rootfs, nil
	}
	return b.open("/", "open root source")
}

// rootfsNames lists the rootfs's top-level entries except the ones the
// sandbox provides itself.
func rootfsNames(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "rootfs")
	defer f.Close()
	all, err := f.Readdirnames(-1)
	var names []string
	for _, n := range all {
		if !rootfsSkip[n] {
			names = append(names, n)
		}
	}
	return names, err
}

// systemEntries lists what goes at the top of the new root besides what the
// sandbox makes itself: the host's system directories, or a rootfs's entries.
func (b *rootBuilder) systemEntries() ([]entry, error) {
	dir, names := "/", hostSystemDirs
	dirfd, err := b.base()
	if err != nil {
		return nil, err
	}
	if b.cfg.Rootfs != "" {
		dir = b.cfg.Rootfs
		if names, err = rootfsNames(dirfd); err != nil {
			return nil, &initError{Stage: "mount", Op: "read rootfs", Path: dir, Err: err}
		}
	}
	var entries []entry
	for _, name := range names {
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, &initError{Stage: "mount", Op: "open source", Path: path.Join(dir, name), Err: err}
		}
		b.keep(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &initError{Stage: "mount", Op: "stat source", Path: path.Join(dir, name), Err: err}
		}
		e := entry{name: name, fd: fd}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(fd, "", buf)
			if err != nil {
				return nil, &initError{Stage: "mount", Op: "readlink", Path: path.Join(dir, name), Err: err}
			}
			e.link = string(buf[:n])
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func (b *rootBuilder) addEntry(e entry) error {
	if e.link != "" {
		if err := unix.Symlinkat(e.link, b.root, e.name); err != nil {
			return &initError{Stage: "mount", Op: "symlink", Path: "/" + e.name, Err: err}
		}
		return nil
	}
	return b.bind(e.fd, "/"+e.name, roAttrs)
}

// bind attaches a recursive copy of the mount at src on target, creating
// the target (a directory, or a file if src is not one) beneath the root.
func (b *rootBuilder) bind(src int, target string, attrs uint64) error {
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return &initError{Stage: "mount", Op: "stat bind source", Path: target, Err: err}
	}
	t, err := b.target(target, st.Mode&unix.S_IFMT != unix.S_IFDIR)
	if err != nil {
		return err
	}
	mfd, err := cloneTree(src, attrs, target)
	if err != nil {
		return err
	}
	return attach(mfd, t, target)
}

// attachKept attaches the detached mount mfd onto target but keeps mfd
// open (until closeAll), to build beneath it.
func (b *rootBuilder) attachKept(mfd, target int, what string) error {
	b.keep(mfd)
	if err := unix.MoveMount(mfd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &initError{Stage: "mount", Op: "attach", Path: what, Err: err}
	}
	return nil
}

// mountNew attaches a new filesystem at target.
func (b *rootBuilder) mountNew(target, fstype string, attrs int, opts ...string) error {
	t, err := b.target(target, false)
	if err != nil {
		return err
	}
	mfd, err := newFS(fstype, attrs, opts...)
	if err != nil {
		return err
	}
	return attach(mfd, t, target)
}

// target resolves p beneath the new root and returns an O_PATH fd of it,
// creating it first (a directory, or an empty file if file is set) along
// with missing parents.
func (b *rootBuilder) target(p string, file bool) (int, error) {
	return b.targetIn(b.root, p, file)
}

func (b *rootBuilder) targetIn(root int, p string, file bool) (int, error) {
	return b.targetDepth(root, p, file, 0)
}

// maxLinks bounds the symlinks followed while creating one target, as the
// kernel's own limit does for lookups.
const maxLinks = 40

func (b *rootBuilder) targetDepth(root int, p string, file bool, links int) (int, error) {
	fd, err := openIn(root, p)
	if err == nil {
		return b.keep(fd), nil
	}
	if !errors.Is(err, unix.ENOENT) || p == "/" || links > maxLinks {
		return -1, &initError{Stage: "mount", Op: "resolve target", Path: p, Err: err}
	}
	dir, name := path.Split(p)
	dir = path.Clean(dir)
	parent, err := b.targetDepth(root, dir, false, links)
	if err != nil {
		return -1, err
	}
	if file {
		var nfd int
		nfd, err = unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(nfd)
		}
	} else {
		err = unix.Mkdirat(parent, name, 0o755)
	}
	if errors.Is(err, unix.EEXIST) {
		// A dangling symlink: create what it points to, inside the root.
		buf := make([]byte, unix.PathMax)
		n, lerr := unix.Readlinkat(parent, name, buf)
		if lerr != nil {
			return -1, &initError{Stage: "mount", Op: "resolve target", Path: p, Err: lerr}
		}
		next := string(buf[:n])
		if !path.IsAbs(next) {
			next = path.Join(dir, next)
		}
		return b.targetDepth(root, path.Clean("/"+next), file, links+1)
	}
	if err != nil {
		return -1, &initError{Stage: "mount", Op: "create target", Path: p, Err: err}
	}
	if fd, err = openIn(root, p); err != nil {
		return -1, &initError{Stage: "mount", Op: "resolve target", Path: p, Err: err}
	}
	return b.keep(fd), nil
}

// etcSource is one path of hostEtc found in the host (or rootfs), opened.
type etcSource struct {
	etcEntry
	fd int // O_PATH fd of a file or directory to bind
}

// etcSources opens what the generated /etc takes from the host (or
// rootfs): the hostEtc paths that exist there. Paths resolve inside the
// rootfs, whose links cannot lead out of it; a link is recreated, not
// followed.
func (b *rootBuilder) etcSources() ([]etcSource, error) {
	base := ""
	if b.cfg.Rootfs != "" {
		base = b.cfg.Rootfs
	}
	basefd, err := b.base()
	if err != nil {
		return nil, err
	}
	readdir := func(dir string) []string {
		fd, err := unix.Openat2(basefd, dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), dir)
		defer f.Close()
		names, _ := f.Readdirnames(-1)
		return names
	}
	var srcs []etcSource
	for _, p := range etcPaths(base != "", readdir) {
		fd, err := unix.Openat2(basefd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, &initError{Stage: "mount", Op: "open source", Path: base + p, Err: err}
		}
		b.keep(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &initError{Stage: "mount", Op: "stat source", Path: base + p, Err: err}
		}
		src := etcSource{etcEntry{path: p}, fd}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(fd, "", buf)
			if err != nil {
				return nil, &initError{Stage: "mount", Op: "readlink", Path: base + p, Err: err}
			}
			src.kind, src.link = etcLink, string(buf[:n])
		case unix.S_IFDIR:
			src.kind = etcDir
		case unix.S_IFREG:
			src.kind = etcRegular
		default:
			continue // a device or socket describes no system
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

// buildEtc writes the generated /etc (the sandbox user, loopback names,
// the files-only name service), brings in hostEtc, and extends the trust
// store with Options.TrustedCAs; everything else of the host's /etc stays
// out.
func (b *rootBuilder) buildEtc(srcs []etcSource) error {
	etc, err := b.target("/etc", false)
	if err != nil {
		return err
	}
	for _, f := range etcFiles(b.cfg) {
		if err := writeAt(etc, f.name, f.content); err != nil {
			return &initError{Stage: "mount", Op: "write", Path: "/etc/" + f.name, Err: err}
		}
	}
	for _, src := range srcs {
		if src.kind != etcLink {
			if err := b.bind(src.fd, src.path, roAttrs); err != nil {
				return err
			}
			continue
		}
		dir, err := b.target(path.Dir(src.path), false)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(src.link, dir, path.Base(src.path)); err != nil {
			return &initError{Stage: "mount", Op: "symlink", Path: src.path, Err: err}
		}
	}
	return b.extendTrust()
}

// trustName is the name, in the new root, of the nth extended bundle
// while it is bound into place; it is unlinked right after.
func trustName(n int) string { return fmt.Sprintf(".trusted-ca-%d", n) }

// extendTrust shows Options.TrustedCAs in every bundle of trustBundles
// present in the new root: a copy of the bundle with them appended is
// bound over it. Without any, it writes them as newTrustBundle.
func (b *rootBuilder) extendTrust() error {
	extra := b.cfg.TrustedCAs
	if len(extra) == 0 {
		return nil
	}
	seen := map[[2]uint64]bool{}
	n := 0
	for _, p := range trustBundles {
		if b.cfg.Rootfs != "" && !strings.HasPrefix(p, "/etc/") {
			continue
		}
		t, err := openIn(b.root, p)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			return &initError{Stage: "mount", Op: "resolve CA bundle (Options.TrustedCAs)", Path: p, Err: err}
		}
		b.keep(t)
		var st unix.Stat_t
		if err := unix.Fstat(t, &st); err != nil {
			return &initError{Stage: "mount", Op: "stat CA bundle (Options.TrustedCAs)", Path: p, Err: err}
		}
		id := [2]uint64{st.Dev, st.Ino}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || seen[id] {
			continue
		}
		seen[id] = true
		bundle, err := readIn(b.root, p, maxTrustBundle)
		if err != nil {
			return &initError{Stage: "mount", Op: "read CA bundle (Options.TrustedCAs)", Path: p, Err: err}
		}
		name := trustName(n)
		n++
		if err := writeAt(b.root, name, string(mergeTrust(bundle, extra))); err != nil {
			return &initError{Stage: "mount", Op: "write CA bundle (Options.TrustedCAs)", Path: p, Err: err}
		}
		src, err := unix.Openat(b.root, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &initError{Stage: "mount", Op: "open CA bundle (Options.TrustedCAs)", Path: p, Err: err}
		}
		b.keep(src)
		mfd, err := cloneTree(src, roAttrs, p)
		if err != nil {
			return err
		}
		if err := attach(mfd, t, p); err != nil {
			return err
		}
		if err := unix.Unlinkat(b.root, name, 0); err != nil {
			return &initError{Stage: "mount", Op: "unlink", Path: "/" + name, Err: err}
		}
	}
	if n > 0 {
		return nil
	}
	dir, err := b.target(path.Dir(newTrustBundle), false)
	if err != nil {
		return err
	}
	if err := writeAt(dir, path.Base(newTrustBundle), string(extra)); err != nil {
		return &initError{Stage: "mount", Op: "write CA bundle (Options.TrustedCAs)", Path: newTrustBundle, Err: err}
	}
	return nil
}

// readIn reads the file p beneath root, as openIn resolves it, up to
// limit bytes (EFBIG beyond).
func readIn(root int, p string, limit int64) ([]byte, error) {
	fd, err := unix.Openat2(root, p, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = unix.EFBIG
	}
	return data, err
}

// etcFile is one file of the generated /etc.
type etcFile struct{ name, content string }

// etcFiles are the files of the minimal /etc: the sandbox user, loopback
// names, and the files-only name service.
func etcFiles(cfg *wire.Config) []etcFile {
	nsswitch := "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n"
	files := []etcFile{
		{"passwd", fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsandbox:x:%d:%d:sandbox:%s:/bin/sh\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", SandboxUID, SandboxGID, DefaultDir)},
		{"group", fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", SandboxGID)},
		{"hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + cfg.Hostname + "\n"},
		{"hostname", cfg.Hostname + "\n"},
	}
	// Only the host's network has a resolver to name; elsewhere a
	// resolv.conf would invite queries that cannot be answered.
	if cfg.HostNetwork {
		nsswitch = strings.Replace(nsswitch, "hosts: files", "hosts: files dns", 1)
		if conf, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			files = append(files, etcFile{"resolv.conf", string(conf)})
		}
	}
	return append(files, etcFile{"nsswitch.conf", nsswitch})
}

func writeAt(dirfd int, name, content string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(content))
	return err
}

// buildProc mounts a new proc for the sandbox's PID namespace and hides
// what it must not see or change.
func (b *rootBuilder) buildProc(devNull int) error {
	t, err := b.target("/proc", false)
	if err != nil {
		return err
	}
	proc, err := newFS("proc", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	if err := b.attachKept(proc, t, "/proc"); err != nil {
		return err
	}
	// Each hidden path gets a mount of its kind, resolved inside this proc
	// only (RESOLVE_IN_ROOT against its own root).
	const attrs = roAttrs | unix.MOUNT_ATTR_NOEXEC
	hides := []struct {
		names []string
		mount func(fd int, what string) (int, error)
	}{
		{procMaskedFiles, func(_ int, what string) (int, error) { return cloneTree(devNull, attrs, what) }},
		{procMaskedDirs, func(int, string) (int, error) { return newFS("tmpfs", attrs, "size=0", "mode=0555") }},
		{procReadOnly, func(fd int, what string) (int, error) { return cloneTree(fd, attrs, what) }},
	}
	for _, h := range hides {
		for _, name := range h.names {
			what := "/proc/" + name
			fd, err := openIn(proc, name)
			if errors.Is(err, unix.ENOENT) {
				continue // this kernel does not have it
			}
			if err != nil {
				return &initError{Stage: "mount", Op: "resolve", Path: what, Err: err}
			}
			b.keep(fd)
			mfd, err := h.mount(fd, what)
			if err != nil {
				return err
			}
			if err := attach(mfd, fd, what); err != nil {
				return err
			}
		}
	}
	return nil
}

// buildDev makes a minimal read-only /dev: the harmless host devices, a
// private devpts, a tmpfs /dev/shm and the usual symlinks.
func (b *rootBuilder) buildDev(devs []int) error {
	t, err := b.target("/dev", false)
	if err != nil {
		return err
	}
	dev, err := newFS("tmpfs", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, "mode=0755", "size=64k", "nr_inodes=64")
	if err != nil {
		return err
	}
	if err := b.attachKept(dev, t, "/dev"); err != nil {
		return err
	}
	for i, name := range devices {
		t, err := b.targetIn(dev, name, true)
		if err != nil {
			return err
		}
		// Device nodes need a mount without nodev.
		mfd, err := cloneTree(devs[i], unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, "/dev/"+name)
		if err != nil {
			return err
		}
		if err := attach(mfd, t, "/dev/"+name); err != nil {
			return err
		}
	}
	for _, fs := range devFilesystems(b.cfg) {
		t, err := b.targetIn(dev, fs.name, false)
		if err != nil {
			return err
		}
		mfd, err := newFS(fs.fstype, fs.attrs, fs.opts...)
		if err != nil {
			return err
		}
		if err := attach(mfd, t, "/dev/"+fs.name); err != nil {
			return err
		}
	}
	for name, to := range devLinks {
		if err := unix.Symlinkat(to, dev, name); err != nil {
			return &initError{Stage: "mount", Op: "symlink", Path: "/dev/" + name, Err: err}
		}
	}
	if err := setAttrs(dev, unix.MOUNT_ATTR_RDONLY, false); err != nil {
		return &initError{Stage: "mount", Op: "make read-only", Path: "/dev", Err: err}
	}
	return nil
}

// buildWorkspace mounts /workspace: the caller's directory read-write, the
// session's workspace (a mount its keeper cloned for this run), or a tmpfs
// owned by the sandbox user.
func (b *rootBuilder) buildWorkspace(hostDir int) error {
	if hostDir >= 0 {
		return b.bind(hostDir, DefaultDir, rwAttrs)
	}
	if b.cfg.WorkspaceMount {
		t, err := b.target(DefaultDir, false)
		if err != nil || b.cfg.Prepare {
			return err // a prepared init attaches it once given it
		}
		// The keeper made it nosuid and nodev; the clone keeps that.
		return attach(workspaceMountFd(b.cfg), t, DefaultDir)
	}
	return b.mountNew(DefaultDir, "tmpfs", rwAttrs, "mode=0755", fmt.Sprintf("size=%d", b.cfg.WorkspaceSize),
		fmt.Sprintf("nr_inodes=%d", tmpfsInodes(b.cfg.WorkspaceSize)),
		fmt.Sprintf("uid=%d", SandboxUID), fmt.Sprintf("gid=%d", SandboxGID))
}

// attachWorkspace attaches a prepared init's session workspace, the
// detached mount fd, at /workspace of the root it has pivoted into. fd
// stays open.
func attachWorkspace(fd int) error {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &initError{Stage: "mount", Op: "open root", Path: "/", Err: err}
	}
	defer unix.Close(root)
	t, err := openIn(root, DefaultDir)
	if err != nil {
		return &initError{Stage: "mount", Op: "resolve target", Path: DefaultDir, Err: err}
	}
	defer unix.Close(t)
	mfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return &initError{Stage: "mount", Op: "dup workspace mount", Err: err}
	}
	return attach(mfd, t, DefaultDir)
}

// tmpfsInodes is how many files a writable tmpfs of size bytes may hold:
// one per page of its size, and at least 4096. The size counts pages of
// content only, and an empty file or a directory takes none, yet each
// costs the kernel about 1 KiB; without this bound a program could fill
// kernel memory with empty files, beyond its memory limit once its cgroup
// is gone (a session's workspace outlives its runs). A file with content
// takes a page of the size anyway, so only trees of empty files meet
// this bound before the size.
func tmpfsInodes(size int64) int64 {
	return max(size/4096, 4096)
}

// pivot makes the new root the process's root and detaches the old one, so
// nothing of the host tree stays reachable.
func (b *rootBuilder) pivot() error {
	if err := unix.Fchdir(b.root); err != nil {
		return &initError{Stage: "pivot_root", Op: "chdir new root", Err: err}
	}
	// pivot_root(".", ".") stacks the old root on top of the new one;
	// detaching "." then removes it without needing a directory for it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return &initError{Stage: "pivot_root", Op: "pivot_root", Err: err}
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return &initError{Stage: "pivot_root", Op: "detach old root", Err: err}
	}
	if err := unix.Chdir("/"); err != nil {
		return &initError{Stage: "pivot_root", Op: "chdir /", Err: err}
	}
	return nil
}
