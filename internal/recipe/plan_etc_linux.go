//go:build linux

package recipe

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

func (b *planner) buildEtc(srcs []forkplan.Slot) {
	t := b.target("/etc", false)
	for _, f := range etcFiles(b.cfg) {
		b.writeFile(t, "/etc/"+f.name, []byte(f.content))
	}
	for i, e := range b.etc {
		if e.content != nil {
			// A file's copy costs three calls where its bind costs a
			// mount, and the mount's teardown at the run's end.
			if d := path.Dir(e.path); d != "/etc" {
				dir := b.target(d, false)
				b.writeFile(dir, e.path, e.content)
				b.close(dir)
				continue
			}
			b.writeFile(t, e.path, e.content)
			continue
		}
		if e.kind != etcLink {
			b.bind(srcs[i], e.kind == etcDir, e.path, roAttrs)
			continue
		}
		dir := b.target(path.Dir(e.path), false)
		b.call(forkplan.Where{Stage: "mount", Op: "symlink", Path: e.path}, unix.SYS_SYMLINKAT, forkplan.Str(e.link),
			forkplan.In(dir), forkplan.Str(path.Base(e.path)))
		b.close(dir)
		b.tree[e.path], b.links[e.path] = nodeLink, e.link
	}
	b.close(t)
	b.extendTrust()
}

// writeFile adds the steps that write a new file p, named by its last
// element in the directory dir.
func (b *planner) writeFile(dir forkplan.Slot, p string, content []byte) {
	fd := b.slot()
	w := forkplan.Where{Stage: "mount", Op: "write", Path: p}
	b.call(w, unix.SYS_OPENAT, forkplan.In(dir), forkplan.Str(path.Base(p)),
		forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
	b.call(w, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf(content), forkplan.Val(len(content))).Want(uintptr(len(content)))
	b.close(fd)
	b.tree[p] = nodeFile
}

// extendTrust adds Options.TrustedCAs to the trust bundles, as read now
// from the host or the Rootfs: each present in the new root is covered by a copy
// with Options.TrustedCAs appended, and without any they become
// newTrustBundle. A bundle the host has but the root does not is skipped
// with its steps.
func (b *planner) extendTrust() {
	extra := b.cfg.TrustedCAs
	if len(extra) == 0 {
		return
	}
	seen := map[string]bool{}
	n := 0
	for _, p := range trustBundles {
		id, bundle, err := b.readBundle(p)
		if err != nil {
			b.fail(&wire.SetupError{Stage: "mount", Op: "read CA bundle (Options.TrustedCAs)", Path: p, Errno: sysutil.ErrnoOf(err), Text: err.Error()})
			return
		}
		if bundle == nil || seen[id] {
			continue
		}
		seen[id] = true
		t := b.slot()
		open := b.call(forkplan.Where{Stage: "mount", Op: "resolve CA bundle (Options.TrustedCAs)", Path: p}, unix.SYS_OPENAT2, forkplan.In(b.root),
			forkplan.Str(p), forkplan.Ptr(&unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}),
			forkplan.Val(unix.SizeofOpenHow)).Save(t)
		before := b.p.Len()
		name := trustName(n)
		n++
		fd := b.slot()
		w := forkplan.Where{Stage: "mount", Op: "write CA bundle (Options.TrustedCAs)", Path: p}
		merged := mergeTrust(bundle, extra)
		b.call(w, unix.SYS_OPENAT, forkplan.In(b.root), forkplan.Str(name),
			forkplan.Val(unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC), forkplan.Val(0o644)).Save(fd)
		b.call(w, unix.SYS_WRITE, forkplan.In(fd), forkplan.Buf(merged), forkplan.Val(len(merged))).Want(uintptr(len(merged)))
		b.close(fd)
		src := b.slot()
		b.call(forkplan.Where{Stage: "mount", Op: "open CA bundle (Options.TrustedCAs)", Path: p}, unix.SYS_OPENAT, forkplan.In(b.root),
			forkplan.Str(name), forkplan.Val(unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)).Save(src)
		m := b.cloneTree(src, roAttrs, p)
		b.attach(m, t, p, false)
		b.close(src)
		b.call(forkplan.Where{Stage: "mount", Op: "unlink", Path: "/" + name}, unix.SYS_UNLINKAT, forkplan.In(b.root), forkplan.Str(name), forkplan.Val(0))
		b.close(t)
		open.SkipOn(uintptr(unix.ENOENT), b.p.Len()-before)
	}
	if n > 0 {
		return
	}
	dir := b.target(path.Dir(newTrustBundle), false)
	b.writeFile(dir, newTrustBundle, extra)
	b.close(dir)
}

// readBundle reads the trust bundle p as the new root will show it, and
// names the file it is (bundles are often links to one another): from
// the host, or from a Rootfs, whose bundles outside /etc the sandbox does
// not take. A bundle that is not there, or is not a regular file, reads
// as nil.
func (b *planner) readBundle(p string) (id string, data []byte, err error) {
	if b.cfg.Rootfs == "" {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", nil, nil
		}
		if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
			return "", nil, nil
		}
		data, err := readBounded(real, MaxTrustBundle)
		return real, data, err
	}
	if !strings.HasPrefix(p, "/etc/") {
		return "", nil, nil
	}
	dir, err := os.Open(b.cfg.Rootfs)
	if err != nil {
		return "", nil, err
	}
	defer dir.Close()
	fd, err := sysutil.OpenInRoot(int(dir.Fd()), p, unix.O_RDONLY|unix.O_NOCTTY)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", nil, err
	}
	data, err = sysutil.ReadLimited(f, MaxTrustBundle)
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), data, err
}

// readBounded reads the host file p, up to limit bytes.
func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sysutil.ReadLimited(f, limit)
}
