//go:build linux

package attack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procs tries to see, signal, trace and read the memory of processes
// outside the sandbox, and to reach the host's filesystem through another
// process's /proc/<pid>/root and /proc/<pid>/cwd: the moves of breakouts
// that reach a host process (CVE-2019-5736 read and rewrote the runtime
// through /proc/<pid>/exe; CVE-2024-21626 walked out from a working
// directory the runtime had left outside the container's root).
//
// args[0] is a host process the attack tries to kill (the test's sentinel);
// the rest are other host pids it tries to signal, open and trace. Signals
// other than the sentinel's are 0, which probes without harm.
func procs(r *Report, args []string) {
	visible := procPids()
	r.See("pids", "%s", strings.Join(visible, " "))
	r.See("npids", "%d", len(visible))
	mine := map[string]bool{}
	for _, p := range visible {
		mine[p] = true
	}
	for i, arg := range args {
		pid, err := strconv.Atoi(arg)
		if err != nil {
			r.See("bad arg "+arg, "%v", err)
			continue
		}
		if mine[arg] {
			// The number names a process of the sandbox's own: what
			// works on it says nothing about the host's.
			r.See("host pid "+arg, "collides with a pid inside")
			continue
		}
		r.Try("kill 0 host pid "+arg, unix.Kill(pid, 0))
		if i == 0 {
			r.Try("kill SIGKILL host pid "+arg, unix.Kill(pid, unix.SIGKILL))
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if r.Try("pidfd_open host pid "+arg, err) {
			unix.Close(fd)
		}
		r.Try("ptrace attach host pid "+arg, ptrace(unix.PTRACE_ATTACH, pid))
		r.Try("ptrace seize host pid "+arg, ptrace(unix.PTRACE_SEIZE, pid))
		r.Try("process_vm_readv host pid "+arg, vmRead(pid))
		_, err = unix.Getpgid(pid)
		r.Try("getpgid host pid "+arg, err)
		var rl unix.Rlimit
		r.Try("prlimit host pid "+arg, unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &rl))
		for _, f := range []string{"stat", "environ", "root/etc/shadow"} {
			r.Try("read /proc/"+arg+"/"+f, readSome("/proc/"+arg+"/"+f))
		}
	}
	child(r)
	r.Try("ptrace traceme", ptrace(unix.PTRACE_TRACEME, 0))
	for _, p := range procPids() {
		walks(r, p)
	}
}

// child starts a process of the sandbox's own and tries to trace it and
// read its memory: ptrace is refused outright by the policy, also where
// the kernel would allow it (same uid, a descendant).
func child(r *Report) {
	cmd := exec.Command("/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		r.See("child", "start /bin/sleep: %v", err)
		return
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	r.Try("ptrace attach own child", ptrace(unix.PTRACE_ATTACH, pid))
	r.Try("ptrace seize own child", ptrace(unix.PTRACE_SEIZE, pid))
	r.Try("process_vm_readv own child", vmRead(pid))
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		r.See("pidfd_open own child", "%v", err)
		return
	}
	defer unix.Close(pfd)
	// pidfd_getfd takes another process's file descriptor: the child's
	// stdin, which the caller would not otherwise hold.
	fd, _, errno := unix.Syscall(unix.SYS_PIDFD_GETFD, uintptr(pfd), 0, 0)
	if errno == 0 {
		unix.Close(int(fd))
		r.Try("pidfd_getfd own child", nil)
	} else {
		r.Try("pidfd_getfd own child", errno)
	}
}

// walks opens pid's /proc entries that lead into its filesystem view, and
// climbs ".." from its root and working directory: every one must end at
// the sandbox's own "/". A directory outside the root (a leaked host
// directory) would climb to the host's root instead.
func walks(r *Report, pid string) {
	base := "/proc/" + pid
	r.Try("read "+base+"/root/etc/shadow", readSome(base+"/root/etc/shadow"))
	// The sandbox's own processes: their environment and memory are the
	// program's to read; what is there is for the test to judge.
	if b, err := os.ReadFile(base + "/environ"); err == nil {
		var names []string
		for _, kv := range strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
		r.See("environ "+pid, "%s", strings.Join(names, " "))
	} else {
		r.See("environ "+pid, "%v", errName(err))
	}
	if f, err := os.Open(base + "/mem"); err == nil {
		f.Close()
		r.See("mem "+pid, "opened")
	} else {
		r.See("mem "+pid, "%v", errName(err))
	}
	var rootSt unix.Stat_t
	if err := unix.Stat("/", &rootSt); err != nil {
		r.See("stat /", "%v", err)
		return
	}
	for _, link := range []string{"root", "cwd"} {
		top, err := climb(base + "/" + link)
		if err != nil {
			r.See("climb "+base+"/"+link, "%v", errName(err))
			continue
		}
		var out error
		if top.Dev == rootSt.Dev && top.Ino == rootSt.Ino {
			out = errors.New("ends at the sandbox's own root")
		}
		r.Try("climb out of "+base+"/"+link, out)
	}
}

// climb opens path and follows ".." until it no longer moves, and returns
// the top it reached.
func climb(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, err
	}
	defer func() { unix.Close(fd) }()
	if err := unix.Fstat(fd, &st); err != nil {
		return st, err
	}
	for range 4096 {
		up, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return st, err
		}
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			unix.Close(up)
			return st, err
		}
		unix.Close(fd)
		fd = up
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			return st, nil
		}
		st = ust
	}
	return st, fmt.Errorf("%s: no top after 4096 steps", path)
}

// procPids lists the numeric entries of /proc.
func procPids() []string {
	des, _ := os.ReadDir("/proc")
	var pids []int
	for _, de := range des {
		if n, err := strconv.Atoi(de.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	sort.Ints(pids)
	out := make([]string, len(pids))
	for i, p := range pids {
		out[i] = strconv.Itoa(p)
	}
	return out
}

// ptrace makes one ptrace request with no address or data. Should an
// attach work, the tracee is released at once.
func ptrace(req int, pid int) error {
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, uintptr(req), uintptr(pid), 0, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	if req == unix.PTRACE_ATTACH || req == unix.PTRACE_SEIZE {
		unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, 0, 0, 0)
	}
	return nil
}

// vmRead reads a page of pid's memory at a low address that is mapped in
// no process: a refusal shows as EPERM or ESRCH, a permitted read as
// EFAULT, which counts as success (the call went through).
func vmRead(pid int) error {
	buf := make([]byte, 64)
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: 0x10000, Len: len(buf)}}
	_, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if errors.Is(err, unix.EFAULT) {
		return nil
	}
	return err
}

// readSome reads up to 4 KiB of path; reading nothing counts as a failure.
func readSome(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = errors.New("read nothing")
	}
	return err
}

func init() { register("procs", procs) }
