package forkplan

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The runtime's fork hooks, as package syscall uses them: before the
// clone, signals are blocked and the goroutine's stack guard is spoiled so
// that any stack growth in the child throws instead of corrupting memory;
// after it, the parent undoes that and the child resets its signal
// handlers and mask for the program it will exec.

//go:linkname beforeFork syscall.runtime_BeforeFork
func beforeFork()

//go:linkname afterFork syscall.runtime_AfterFork
func afterFork()

//go:linkname afterForkInChild syscall.runtime_AfterForkInChild
func afterForkInChild()

// Clone says how the child is cloned.
type Clone struct {
	Flags    uint64 // CLONE_* flags (namespaces); CLONE_INTO_CGROUP is set from CgroupFD
	CgroupFD int    // a cgroup v2 directory to clone into, or -1

	// Shared asks for a child that shares the caller's memory, as a vfork
	// child does, where SharesMemory says it can: Start then returns only
	// once the child has exec'd or exited. A step that changes something
	// of the whole address space (PR_SET_DUMPABLE) changes it for the
	// caller too.
	Shared bool

	// PidTo, when set, receives the child's pid before the child runs
	// (CLONE_PARENT_SETTID): a goroutine serving a Shared child, while
	// Start waits, learns it there once the child has told it to look.
	PidTo *int32
}

// childArgs is what the child runs: run's arguments.
type childArgs struct {
	ops      []op
	slots    []uintptr
	rec      *record
	reportFd uintptr
}

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
	var (
		pid   uintptr
		errno syscall.Errno
	)
	if c.Shared {
		pid, errno = forkShared(args, ca)
	} else {
		pid, errno = forkAndRun(args, ca)
	}
	// A copying child has its own copy of all this; a shared one is done
	// with it once forkShared returns.
	keepAlive(p.keep)
	keepAlive(c.PidTo)
	if errno != 0 {
		return -1, errno
	}
	return int(pid), nil
}

//go:noinline
func keepAlive(any) {}

// forkAndRun clones the child, which runs ops and never returns here.
// After beforeFork nothing in this frame may call a function that is not
// nosplit.
//
//go:noinline
//go:norace
//go:nocheckptr
func forkAndRun(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	beforeFork()
	pid, _, errno := syscall.RawSyscall6(unix.SYS_CLONE3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args), 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		afterFork()
		return pid, errno
	}
	afterForkInChild()
	run(c.ops, c.slots, c.rec, c.reportFd)
	return 0, 0 // not reached: run ends the child
}

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
