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
}

// cloneArgs is struct clone_args (linux/sched.h), up to cgroup.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// Start clones a child with c and runs the plan in it. It returns the
// child's pid once cloned; the plan's outcome shows in the child's fds and
// exit. The caller must hold syscall.ForkLock, so that no fd made without
// close-on-exec in another goroutine leaks into the child beyond the
// plan's close steps.
func (p *Plan) Start(c Clone) (int, error) {
	args := &cloneArgs{flags: c.Flags, exitSignal: uint64(unix.SIGCHLD)}
	if c.CgroupFD >= 0 {
		args.flags |= unix.CLONE_INTO_CGROUP
		args.cgroup = uint64(c.CgroupFD)
	}
	// Everything the child touches is allocated here, before the clone.
	slots := append([]uintptr(nil), p.slots...)
	rec := &record{mark: FailureMark}
	pid, errno := forkAndRun(args, p.ops, slots, rec, uintptr(p.reportFd))
	// The child's copy of the address space has its own; these only need
	// to live until the clone.
	keepAlive(p.keep)
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
func forkAndRun(args *cloneArgs, ops []op, slots []uintptr, rec *record, reportFd uintptr) (uintptr, syscall.Errno) {
	beforeFork()
	pid, _, errno := syscall.RawSyscall6(unix.SYS_CLONE3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args), 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		afterFork()
		return pid, errno
	}
	afterForkInChild()
	run(ops, slots, rec, reportFd)
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
