package forkplan

import (
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SharesMemory says whether a Clone with Shared set gets a child that
// shares the caller's memory (on amd64), or a copy of it (elsewhere).
const SharesMemory = true

// cloneShared is in clone_linux_amd64.s.
func cloneShared(args *cloneArgs, size uintptr, c *childArgs, fn uintptr) (pid uintptr, errno syscall.Errno)

// childMainPC is the code of childMain, as a func value holds it: the entry
// for Go's internal calling convention, which cloneShared calls.
var childMainPC = reflect.ValueOf(childMain).Pointer()

// childStackSize is a shared child's stack: run and resetSignals need well
// under a page of it.
const childStackSize = 16 << 10

// childStack is a shared child's stack. A child uses it until it execs or
// exits, which is when awaitShared returns, so one Start at a time does.
type childStack [childStackSize]byte

var childStacks = sync.Pool{New: func() any { return new(childStack) }}

// forkShared clones a child that shares this process's memory and runs c
// on its own stack. Unlike vfork, the clone returns at once, leaving no
// thread stopped in the kernel for the runtime to wait for; awaitShared
// then waits, in an ordinary blocking system call, until the child has
// exec'd or exited: then the memory is this process's alone again.
//
// Sharing spares the copy of the page tables and, above all, the
// copy-on-write faults the parent's other threads would take on every page
// they write after a copying clone.
func forkShared(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	stack := childStacks.Get().(*childStack)
	c.stack = stack
	c.running = 1
	args.flags |= unix.CLONE_VM | unix.CLONE_CHILD_CLEARTID
	args.childTID = uint64(uintptr(unsafe.Pointer(&c.running)))
	args.stack, args.stackSize = uint64(uintptr(unsafe.Pointer(&stack[0]))), childStackSize
	pid, errno := cloneSharedBlocked(args, c)
	if errno != 0 {
		childStacks.Put(stack)
	}
	return pid, errno
}

// cloneSharedBlocked makes the clone with every signal blocked, so that
// the child starts with them blocked until childMain has reset their
// handlers.
//
//go:noinline
//go:norace
//go:nocheckptr
func cloneSharedBlocked(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	all := ^uint64(0)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&c.mask)), 8, 0, 0)
	pid, errno := cloneShared(args, unsafe.Sizeof(*args), c, childMainPC)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&c.mask)), 0, 8, 0, 0)
	return pid, errno
}

// awaitSharedPoll is how long awaitShared waits on the futex word before
// it asks whether the child has exited: older kernels leave the word set
// when the child dumps core.
const awaitSharedPoll = 1e9 // ns

// futexWait is FUTEX_WAIT (linux/futex.h).
const futexWait = 0

// awaitShared waits until the shared child pid has exec'd or exited: the
// kernel then zeroes c.running and wakes the futex on it. The wait is a
// blocking system call as package syscall makes it, so the runtime gives
// this goroutine's P to another thread meanwhile, and a collection does
// not wait for it.
func awaitShared(c *childArgs, pid int) {
	ts := unix.NsecToTimespec(awaitSharedPoll)
	for atomic.LoadUint32(&c.running) != 0 {
		// Not FUTEX_PRIVATE: the kernel's wake is a shared one.
		_, _, errno := syscall.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&c.running)), futexWait, 1, uintptr(unsafe.Pointer(&ts)), 0, 0)
		if errno == unix.ETIMEDOUT && exited(pid) {
			break
		}
	}
	childStacks.Put(c.stack.(*childStack))
	c.stack = nil

}

// exited says whether the child pid has exited, waited for or not.
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == unix.ECHILD || err == nil && info.Signo == int32(unix.SIGCHLD)
}
