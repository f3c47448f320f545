package forkplan

import (
	"runtime"
	"syscall"
	"unsafe"

	"github.com/fumehood/sandbox/internal/sysutil"
	"golang.org/x/sys/unix"
)

// A child must not run a Go signal handler: it would run on the thread
// state (TLS, g, signal stack) of the thread that cloned it, which a child
// sharing the memory shares with that thread as it runs on. So the clone is
// made with every signal blocked on the cloning thread, which the child
// inherits, and the child starts with every caught signal at SIG_DFL
// (CLONE_CLEAR_SIGHAND, Linux 5.5) or sets each so itself (resetSignals),
// as package syscall's fork child does, before it restores the mask the
// thread had. Nothing between the blocking and the clone may grow the
// stack or yield: every function called there is nosplit.

// Clone says how the child is cloned.
type Clone struct {
	Flags    uint64 // CLONE_* flags (namespaces); CLONE_INTO_CGROUP is set from CgroupFD
	CgroupFD int    // a cgroup v2 directory to clone into, or -1

	// Shared asks for a child that shares the caller's memory, as a vfork
	// child does (CLONE_VM|CLONE_VFORK), where SharesMemory says it can:
	// Start then returns only once the child has exec'd or exited. A step
	// that changes something of the whole address space (PR_SET_DUMPABLE)
	// changes it for the caller too.
	Shared bool

	// PidTo, when set, receives the child's pid before the child runs
	// (CLONE_PARENT_SETTID): a goroutine serving a Shared child, while
	// Start waits, learns it there once the child has told it to look.
	PidTo *int32
}

// childArgs is what the child runs: run's arguments, and the signal mask
// to restore once its handlers are reset.
type childArgs struct {
	ops      []op
	slots    []uintptr
	rec      *record
	reportFd uintptr
	mask     uint64
	cleared  bool // the clone reset the handlers (CLONE_CLEAR_SIGHAND)
}

// clearsHandlers says whether clone3 takes CLONE_CLEAR_SIGHAND here, which
// spares the child a sigaction per signal.
var clearsHandlers = sysutil.KernelAtLeast(5, 5)

// cloneArgs is struct clone_args (linux/sched.h), up to cgroup.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// Start clones a child with c and runs the plan in it. It returns the
// child's pid once cloned, or for a Shared child once it has exec'd or
// exited; the plan's outcome shows in the child's fds and exit. An fd that
// another goroutine makes without close-on-exec meanwhile may reach the
// child: a plan closes what it does not use before it execs.
func (p *Plan) Start(c Clone) (int, error) {
	p.refs.take()
	defer p.Release()
	args := &cloneArgs{flags: c.Flags, exitSignal: uint64(unix.SIGCHLD)}
	if c.CgroupFD >= 0 {
		args.flags |= unix.CLONE_INTO_CGROUP
		args.cgroup = uint64(c.CgroupFD)
	}
	if c.PidTo != nil {
		args.flags |= unix.CLONE_PARENT_SETTID
		args.parentTID = uint64(uintptr(unsafe.Pointer(c.PidTo)))
	}
	// Everything the child touches is allocated here, before the clone.
	ca := &childArgs{ops: p.ops, slots: append([]uintptr(nil), p.slots...), rec: &record{mark: FailureMark}, reportFd: uintptr(p.reportFd)}
	if clearsHandlers {
		args.flags |= unix.CLONE_CLEAR_SIGHAND
		ca.cleared = true
	}
	var (
		pid   uintptr
		errno syscall.Errno
	)
	// The signal mask is the thread's from blocking to restoring it.
	runtime.LockOSThread()
	if c.Shared {
		pid, errno = forkShared(args, ca)
	} else {
		pid, errno = forkAndRun(args, ca)
	}
	runtime.UnlockOSThread()
	// A copying child has its own copy of all this; a shared one is done
	// with it once forkShared returns.
	keepAlive(ca)
	keepAlive(p.keep)
	keepAlive(c.PidTo)
	if errno != 0 {
		return -1, errno
	}
	return int(pid), nil
}

//go:noinline
func keepAlive(any) {}

// forkAndRun clones a child with a copy of this process's memory, which
// resets its signals, runs ops and never returns here. Between the
// blocking of signals and the child's exec or exit, nothing in this frame
// may call a function that is not nosplit.
//
//go:noinline
//go:norace
//go:nocheckptr
func forkAndRun(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	all := ^uint64(0)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&c.mask)), 8, 0, 0)
	pid, _, errno := syscall.RawSyscall6(unix.SYS_CLONE3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args), 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&c.mask)), 0, 8, 0, 0)
		return pid, errno
	}
	childMain(c)
	return 0, 0 // not reached: run ends the child
}

// childMain is the child: it resets the signal handlers and mask for the
// steps and the program, then runs the steps. A child sharing the memory
// runs it on its own stack, and must not write anything the parent uses.
//
//go:nosplit
//go:norace
//go:nocheckptr
func childMain(c *childArgs) {
	resetSignals(c.mask, c.cleared)
	run(c.ops, c.slots, c.rec, c.reportFd)
}

// resetSignals sets every signal that has a handler to SIG_DFL, unless the
// clone has (cleared), and the signal mask to mask. Ignored signals stay
// ignored, as across an exec.
//
//go:nosplit
//go:norace
//go:nocheckptr
func resetSignals(mask uint64, cleared bool) {
	if cleared {
		syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&mask)), 0, 8, 0, 0)
		return
	}
	// The kernel's struct sigaction on 64-bit Linux: handler, flags,
	// restorer (where the architecture has one) and mask; 32 bytes at most.
	var act, dfl [4]uint64
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig == uintptr(unix.SIGKILL) || sig == uintptr(unix.SIGSTOP) {
			continue
		}
		if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, 0, uintptr(unsafe.Pointer(&act)), 8, 0, 0); e != 0 {
			continue
		}
		if act[0] != sigDfl && act[0] != sigIgn {
			syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		}
	}
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&mask)), 0, 8, 0, 0)
}

// The handlers that are not functions.
const (
	sigDfl = 0
	sigIgn = 1
)

// run interprets ops in the child. It ends with an exec among ops, or by
// exiting: 125 after a failure record, 126 if the steps ran out.
//
//go:nosplit
//go:norace
//go:nocheckptr
func run(ops []op, slots []uintptr, rec *record, reportFd uintptr) {
	var a [6]uintptr
	for i := 0; i < len(ops); i++ {
		o := &ops[i]
		for j := 0; j < 6; j++ {
			a[j] = o.args[j]
			if o.inSlots&(1<<j) != 0 {
				a[j] = slots[a[j]]
			}
		}
		var r uintptr
		var errno syscall.Errno
		switch o.kind {
		case kindStore:
			*o.at = int32(a[0])
			continue
		case kindFail:
			errno = syscall.Errno(a[0])
		case kindCheck:
			if uintptr(*o.check) != a[0] {
				errno = syscall.Errno(a[1])
			}
		case kindLoad:
			r = *o.from
		case kindExit:
			if a[0] != 0 {
				syscall.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
			}
			continue
		default:
			r, _, errno = syscall.RawSyscall6(o.trap, a[0], a[1], a[2], a[3], a[4], a[5])
		}
		if errno == 0 && o.wantSet != 0 && r != o.want {
			errno = syscall.EPROTO
		}
		if errno == 0 {
			if o.save >= 0 {
				slots[o.save] = r
			}
			continue
		}
		e := uintptr(errno)
		switch {
		case o.kind == kindFail || o.kind == kindCheck:
		case e == o.passOn[0] || e == o.passOn[1]:
			continue
		case e == o.noteOn:
			slots[o.noteSlot] = e
			continue
		case e == o.skipOn:
			i += o.skip
			continue
		}
		rec.step, rec.errno = uint32(i), uint32(e)
		syscall.RawSyscall(unix.SYS_WRITE, reportFd, uintptr(unsafe.Pointer(rec)), FailureLen)
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, 125, 0, 0)
	}
	syscall.RawSyscall(unix.SYS_EXIT_GROUP, 126, 0, 0)
}
