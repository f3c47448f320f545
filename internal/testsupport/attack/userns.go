//go:build linux

package attack

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// userns tries to regain capabilities through new namespaces, to join
// other namespaces, and to become root: the first step of most breakouts
// that need privilege (nested user namespaces give CAP_SYS_ADMIN over
// their own mounts, which a kernel bug then turns into the host's).
func userns(r *Report, _ []string) {
	r.See("status", "%s", capLines())
	for _, c := range []struct {
		name string
		flag int
	}{
		{"user", unix.CLONE_NEWUSER}, {"mount", unix.CLONE_NEWNS}, {"pid", unix.CLONE_NEWPID},
		{"net", unix.CLONE_NEWNET}, {"ipc", unix.CLONE_NEWIPC}, {"uts", unix.CLONE_NEWUTS},
		{"cgroup", unix.CLONE_NEWCGROUP}, {"time", unix.CLONE_NEWTIME},
	} {
		r.Try("unshare "+c.name, unix.Unshare(c.flag))
		if c.flag != unix.CLONE_NEWTIME { // clone reads 0x80 as part of the exit signal
			r.Try("clone with a new "+c.name+" namespace", rawClone(uintptr(c.flag)))
		}
	}
	// clone3 takes its flags in memory, where a filter cannot look.
	r.Try("clone3 with a new user namespace", clone3(unix.CLONE_NEWUSER))
	for _, ns := range []string{"user", "mnt", "pid", "net", "cgroup"} {
		// Opening is allowed (the namespaces are the program's own).
		f, err := os.Open("/proc/self/ns/" + ns)
		if err != nil {
			r.See("open /proc/self/ns/"+ns, "%v", err)
			continue
		}
		r.Try("setns "+ns, unix.Setns(int(f.Fd()), 0))
		f.Close()
	}
	r.Try("setuid 0", unix.Setuid(0))
	r.Try("setgid 0", unix.Setgid(0))
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	all := [2]unix.CapUserData{{Effective: ^uint32(0), Permitted: ^uint32(0), Inheritable: ^uint32(0)},
		{Effective: ^uint32(0), Permitted: ^uint32(0), Inheritable: ^uint32(0)}}
	r.Try("capset every capability", unix.Capset(&hdr, &all[0]))
	var got [2]unix.CapUserData
	if err := unix.Capget(&hdr, &got[0]); err == nil {
		var eff error
		if got[0].Effective == 0 && got[1].Effective == 0 && got[0].Permitted == 0 && got[1].Permitted == 0 {
			eff = fmt.Errorf("no capability held")
		}
		r.Try("hold a capability", eff)
	}
}

// capLines is the identity and capability lines of /proc/self/status.
func capLines() string {
	b, _ := os.ReadFile("/proc/self/status")
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Cap") || strings.HasPrefix(l, "Uid") || strings.HasPrefix(l, "Gid") ||
			strings.HasPrefix(l, "NoNewPrivs") || strings.HasPrefix(l, "Seccomp") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "; ")
}

// rawClone forks with the extra clone flags. Should it work, the child
// leaves at once: it is a copy of a Go process without its threads, and
// may run nothing but exit.
func rawClone(flags uintptr) error {
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, flags|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	return forked(pid, errno)
}

// forked ends a raw clone: the child exits at once, the parent reaps it.
func forked(pid uintptr, errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	if pid == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws unix.WaitStatus
	unix.Wait4(int(pid), &ws, 0, nil)
	return nil
}

// clone3 is rawClone through clone3.
func clone3(flags uint64) error {
	// struct clone_args as of Linux 5.3: flags, pidfd, child_tid,
	// parent_tid, exit_signal, stack, stack_size, tls.
	args := [8]uint64{0: flags, 4: uint64(unix.SIGCHLD)}
	pid, _, errno := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	return forked(pid, errno)
}

func init() { register("userns", userns) }
