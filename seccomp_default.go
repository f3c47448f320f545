package sandbox

import "syscall"

// The default policy. It starts from what ordinary programs use (shells,
// coreutils, Python, Node, Go and C toolchains, package managers) and leaves
// out what only an attacker, a debugger or a system manager needs. Names
// missing on the running architecture (open, fork on arm64) are skipped.
//
// Refused, and why (each fails with EPERM and is reported):
//   - namespaces: unshare, setns, clone with CLONE_NEW* flags; clone3 fails
//     with ENOSYS instead, unreported, because a filter cannot read the flags
//     clone3 takes in memory and C libraries fall back to clone on ENOSYS.
//   - mounts: mount, umount2, pivot_root, chroot, the fd-based mount API
//     (open_tree, move_mount, fsopen, fsconfig, fsmount, fspick,
//     mount_setattr, open_tree_attr), and statmount/listmount/listns.
//   - other processes' memory: ptrace, process_vm_readv/writev, pidfd_getfd,
//     process_madvise, process_mrelease, kcmp.
//   - kernel attack surface with a history of exploits: bpf,
//     perf_event_open, userfaultfd, io_uring_*, keyctl, add_key,
//     request_key, fanotify_*, memfd_secret, the lsm_* calls.
//   - the machine's state: kexec_*, init/finit/delete_module, reboot,
//     swapon/swapoff, acct, quotactl(_fd), clock_settime, settimeofday,
//     adjtimex, clock_adjtime, sethostname, setdomainname, syslog, vhangup,
//     iopl, ioperm, modify_ldt, NUMA placement (mbind, set_mempolicy*,
//     migrate_pages, move_pages).
//   - open_by_handle_at and name_to_handle_at (the "shocker" escape).
//   - personality other than PER_LINUX, PER_LINUX32 and the 0xffffffff
//     query (no ADDR_NO_RANDOMIZE: ASLR stays on).
//   - ioctl TIOCSTI and TIOCLINUX, compared on the low 32 bits of the
//     request (the kernel ignores the high ones: CVE-2019-10063). Every
//     other ioctl stays: a shell with job control on its terminal
//     (Cmd.Terminal) needs the termios, process group, window size and
//     pty requests, and the only terminals in a sandbox are its own.
//   - socket families other than AF_UNIX, AF_INET, AF_INET6 and
//     AF_NETLINK with NETLINK_ROUTE: no AF_PACKET, AF_VSOCK (which reaches
//     the Windows host on WSL2), AF_KEY, AF_ALG, AF_TIPC, ... NETLINK_ROUTE
//     stays because C libraries ask it for the interfaces
//     (getaddrinfo's AI_ADDRCONFIG, getifaddrs, Go's net.Interfaces); the
//     sandbox holds no capability in its network namespace, so it can read
//     the loopback device but change nothing. Other netlink protocols
//     (netfilter, xfrm, audit, uevents) are refused.
var defaultAllowed = []string{
	// files and directories
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
	"open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup", "dup2", "dup3",
	"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
	"access", "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
	"rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat", "unlink", "unlinkat",
	"symlink", "symlinkat", "readlink", "readlinkat", "mknod", "mknodat",
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask",
	"truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
	"utime", "utimes", "futimesat", "utimensat", "flock", "fcntl", "readahead", "fadvise64",
	"sendfile", "copy_file_range", "splice", "tee", "vmsplice",
	"setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
	"setxattrat", "getxattrat", "listxattrat", "removexattrat", "file_getattr", "file_setattr",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	"pipe", "pipe2", "memfd_create", "cachestat",
	// asynchronous IO (not io_uring)
	"io_setup", "io_destroy", "io_getevents", "io_pgetevents", "io_submit", "io_cancel",
	// waiting for events
	"select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
	"timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd", "signalfd4",
	// memory
	"brk", "mmap", "munmap", "mremap", "mprotect", "msync", "mincore", "madvise",
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", "get_mempolicy",
	"pkey_mprotect", "pkey_alloc", "pkey_free", "mseal", "map_shadow_stack", "remap_file_pages",
	"membarrier",
	// processes and threads
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal",
	"getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
	"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "rseq_slice_yield",
	"futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
	"arch_prctl", "prctl", "seccomp", "uname", "sysinfo", "getrandom", "getcpu",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"capget", "capset",
	// credentials (one id is mapped and no capability is held: these can
	// only report or give up)
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
	// scheduling and limits
	"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
	"sched_getscheduler", "sched_setscheduler", "sched_get_priority_max", "sched_get_priority_min",
	"sched_rr_get_interval", "sched_getattr", "sched_setattr",
	"getpriority", "setpriority", "ioprio_get", "ioprio_set",
	"getrlimit", "setrlimit", "prlimit64", "getrusage", "times",
	// signals
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
	"rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "pause", "restart_syscall",
	// time
	"time", "gettimeofday", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"alarm", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
	"timer_getoverrun", "timer_delete",
	// sockets (socket and socketpair are conditional, below)
	"connect", "accept", "accept4", "bind", "listen", "shutdown", "getsockname", "getpeername",
	"setsockopt", "getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	// System V and POSIX IPC (the run has its own IPC namespace)
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
}

// Constants of the conditional rules, from the kernel's uapi headers.
const (
	// CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET.
	// CLONE_NEWTIME (0x80) is not among them: clone reads that bit as part
	// of the exit signal, and only clone3 and unshare take it.
	cloneNamespaceFlags = 0x7e020000
	tiocsti             = 0x5412
	tioclinux           = 0x541c
	afUnix              = 1
	afInet              = 2
	afInet6             = 10
	afNetlink           = 16
	netlinkRoute        = 0
	perLinux            = 0
	perLinux32          = 8
	personalityQuery    = 0xffffffff
)

// defaultConditional returns the rules that look at arguments; each rule's
// first name is the one syscall it is about.
func defaultConditional() []SyscallRule {
	eq := func(i int, v uint64) ArgCond { return ArgCond{Index: i, Op: ArgEq, Value: v} }
	allow := func(name string, args ...ArgCond) SyscallRule {
		return SyscallRule{Names: []string{name}, Action: ActAllow, Args: args}
	}
	low32 := func(i int, v uint64) ArgCond { return ArgCond{Index: i, Op: ArgMaskedEq, Mask: 0xffffffff, Value: v} }
	return []SyscallRule{
		allow("clone", ArgCond{Index: 0, Op: ArgMaskedEq, Mask: cloneNamespaceFlags, Value: 0}),
		{Names: []string{"clone3"}, Action: ActErrno(syscall.ENOSYS)},
		{Names: []string{"ioctl"}, Action: ActNotify(syscall.EPERM), Args: []ArgCond{low32(1, tiocsti)}},
		{Names: []string{"ioctl"}, Action: ActNotify(syscall.EPERM), Args: []ArgCond{low32(1, tioclinux)}},
		allow("ioctl"),
		allow("socket", eq(0, afUnix)),
		allow("socket", eq(0, afInet)),
		allow("socket", eq(0, afInet6)),
		allow("socket", eq(0, afNetlink), eq(2, netlinkRoute)),
		allow("socketpair", eq(0, afUnix)),
		allow("personality", eq(0, perLinux)),
		allow("personality", eq(0, perLinux32)),
		allow("personality", eq(0, personalityQuery)),
	}
}
