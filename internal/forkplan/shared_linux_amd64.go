//go:build !forkplan_copy

package forkplan

import (
	"reflect"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SharesMemory says whether a Clone with Shared set gets a child that
// shares the caller's memory (on amd64), or a copy of it (elsewhere, and
// built with the tag forkplan_copy).
const SharesMemory = true

// The runtime's system call hooks, as package syscall uses them around a
// blocking call: between them the goroutine's P may go to another thread,
// so the thread that waits in a shared clone until its child execs holds
// none, and a collection does not wait for it. They are the one link into
// the runtime this module keeps, for vfork: the kernel's OOM killer passes
// over a child in vfork (in_vfork), while a child that merely shares the
// caller's memory (CLONE_VM alone) can be its victim, and killing it kills
// every process that shares that memory, the caller or the spawner with
// it. A toolchain without them fails to link this file; the tag
// forkplan_copy builds without it, with copying clones.
//
//go:linkname entersyscall runtime.entersyscall
func entersyscall()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// cloneShared is in clone_linux_amd64.s.
func cloneShared(args *cloneArgs, size uintptr, c *childArgs, fn uintptr) (pid uintptr, errno syscall.Errno)

// childMainPC is the code of childMain, as a func value holds it: the entry
// for Go's internal calling convention, which cloneShared calls.
var childMainPC = reflect.ValueOf(childMain).Pointer()

// childStackSize is a shared child's stack: run and resetSignals need well
// under a page of it.
const childStackSize = 16 << 10

// childStack is a shared child's stack. A child uses it until it execs or
// exits, which is when its clone returns, so one Start at a time does.
type childStack [childStackSize]byte

var childStacks = sync.Pool{New: func() any { return new(childStack) }}

// forkShared clones a child that shares this process's memory and runs c
// on its own stack, and waits, as vfork does, until the child has exec'd
// or exited: then the memory is this process's alone again.
//
// Sharing spares the copy of the page tables and, above all, the
// copy-on-write faults the parent's other threads would take on every page
// they write after a copying clone.
func forkShared(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	stack := childStacks.Get().(*childStack)
	args.flags |= unix.CLONE_VM | unix.CLONE_VFORK
	args.stack, args.stackSize = uint64(uintptr(unsafe.Pointer(&stack[0]))), childStackSize
	pid, errno := cloneSharedBlocked(args, c)
	keepAlive(c)
	childStacks.Put(stack)
	return pid, errno
}

// cloneSharedBlocked makes the clone with every signal blocked, so that
// the child starts with them blocked until childMain has reset their
// handlers. The thread stays in a system call throughout.
//
//go:noinline
//go:norace
//go:nocheckptr
func cloneSharedBlocked(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	all := ^uint64(0)
	entersyscall()
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&c.mask)), 8, 0, 0)
	pid, errno := cloneShared(args, unsafe.Sizeof(*args), c, childMainPC)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&c.mask)), 0, 8, 0, 0)
	exitsyscall()
	return pid, errno
}
