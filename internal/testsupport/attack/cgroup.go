//go:build linux

package attack

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cgroup tries the cgroup v1 release_agent escape, CVE-2022-0492: a
// process that could mount a cgroup v1 hierarchy (after unsharing user,
// mount and cgroup namespaces) wrote release_agent, a path the host kernel
// runs as root when the last process leaves a cgroup with
// notify_on_release set. It also tries to reach the run's own cgroup files
// to lift its limits or move itself out.
//
// Nothing is ever written: an open for writing is the proof. The mounts
// name a hierarchy of their own (name=sbxtest) and a release agent that
// does not exist, so even a mount that worked would run nothing.
//
// args: "wait" makes the attack print "ready" when it is done and read
// standard input to its end before it reports, so the test can look at the
// run's cgroup from the host meanwhile.
func cgroup(r *Report, args []string) {
	b, err := os.ReadFile("/proc/self/cgroup")
	r.See("/proc/self/cgroup", "%s", orErr(strings.TrimSpace(string(b)), err))
	for _, p := range []string{"/sys/fs/cgroup", "/sys", "/proc/self/root/sys/fs/cgroup", "/proc/1/root/sys/fs/cgroup"} {
		_, err := os.Stat(p)
		r.See("stat "+p, "%s", orErr("exists", err))
	}
	const at = "/tmp/sbxtest-cgroup"
	os.MkdirAll(at, 0o755)
	for _, o := range []string{
		"none,name=sbxtest,release_agent=/sbxtest-no-such-agent",
		"memory,release_agent=/sbxtest-no-such-agent",
		"rdma",
		"memory",
		"pids",
	} {
		r.Try("mount cgroup -o "+o, unix.Mount("cgroup", at, "cgroup", 0, o))
	}
	r.Try("mount cgroup2", unix.Mount("cgroup2", at, "cgroup2", 0, ""))
	if fd, err := unix.Fsopen("cgroup", unix.FSOPEN_CLOEXEC); r.Try("fsopen cgroup", err) {
		r.Try("fsconfig cgroup release_agent", unix.FsconfigSetString(fd, "release_agent", "/sbxtest-no-such-agent"))
		unix.Close(fd)
	}
	// The exploit's own order: new user, mount and cgroup namespaces
	// first (from a fresh single-threaded child: a Go process cannot
	// unshare its user namespace), then the mount, as root of the new
	// user namespace.
	r.Try("clone new user+mount+cgroup namespaces, then mount cgroup -o rdma with release_agent",
		mountInNewNamespaces("cgroup", at, "cgroup", "rdma,release_agent=/sbxtest-no-such-agent"))
	r.Try("clone new user+mount+cgroup namespaces, then mount cgroup -o name=sbxtest",
		mountInNewNamespaces("cgroup", at, "cgroup", "none,name=sbxtest"))
	r.Try("unshare user+mount+cgroup namespaces", unix.Unshare(unix.CLONE_NEWUSER|unix.CLONE_NEWNS|unix.CLONE_NEWCGROUP))
	r.Try("unshare mount+cgroup namespaces", unix.Unshare(unix.CLONE_NEWNS|unix.CLONE_NEWCGROUP))

	files := map[string]bool{"release_agent": true, "notify_on_release": true, "cgroup.procs": true, "tasks": true,
		"memory.max": true, "memory.limit_in_bytes": true, "memory.memsw.limit_in_bytes": true, "pids.max": true,
		"cgroup.subtree_control": true, "cpu.max": true, "cpu.cfs_quota_us": true}
	found := 0
	for _, top := range []string{"/sys/fs/cgroup", at, "/proc/self/root/sys/fs/cgroup"} {
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if !d.IsDir() && files[d.Name()] {
				found++
				r.Try("open "+p+" for writing", openClose(p, unix.O_WRONLY))
			}
			return nil
		})
	}
	r.See("cgroup files found", "%d", found)
	if len(args) > 0 && args[0] == "wait" {
		os.Stdout.WriteString("ready\n")
		buf := make([]byte, 512)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				break
			}
		}
	}
}

// mountInNewNamespaces forks a child into new user, mount and cgroup
// namespaces that mounts fstype at target, and returns its result (nil: the
// mount worked). The child is a copy of this Go process without its
// threads and may only make raw system calls; it reports the mount's errno
// as its exit status. A mount that worked dies with the child's namespace.
func mountInNewNamespaces(src, target, fstype, data string) error {
	args := make([]*byte, 4)
	for i, s := range []string{src, target, fstype, data} {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			return err
		}
		args[i] = p
	}
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.SIGCHLD)
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	if pid == 0 {
		_, _, e := unix.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(args[0])), uintptr(unsafe.Pointer(args[1])),
			uintptr(unsafe.Pointer(args[2])), 0, uintptr(unsafe.Pointer(args[3])), 0)
		unix.RawSyscall(unix.SYS_EXIT_GROUP, uintptr(e), 0, 0)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil {
		return err
	}
	if !ws.Exited() {
		return syscall.Errno(unix.ECHILD)
	}
	if code := ws.ExitStatus(); code != 0 {
		return syscall.Errno(code)
	}
	return nil
}

func init() { register("cgroup", cgroup) }
