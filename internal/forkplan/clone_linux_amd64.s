//go:build !forkplan_copy

#include "textflag.h"

// func cloneShared(args *cloneArgs, size uintptr, c *childArgs, fn uintptr) (pid uintptr, errno uintptr)
//
// clone3 for a child that shares the caller's memory on a stack of its
// own (args.stack). The parent returns as from any system call. The child
// never returns here, since the stack it would return on is the parent's:
// it calls fn(c) on its new stack, and exits if that returns. fn is
// childMain's entry for Go's internal calling convention (c in AX), called
// directly: an assembly call by name would go through a wrapper that, in a
// race-detector build, enters the race runtime with the parent's g.
TEXT ·cloneShared(SB),NOSPLIT|NOFRAME,$0-48
	MOVQ	args+0(FP), DI
	MOVQ	size+8(FP), SI
	MOVQ	c+16(FP), R12	// the child gets the parent's registers
	MOVQ	fn+24(FP), R13
	MOVQ	$435, AX	// SYS_clone3
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$-1, pid+32(FP)
	MOVQ	AX, errno+40(FP)
	RET
ok:
	MOVQ	AX, pid+32(FP)
	MOVQ	$0, errno+40(FP)
	RET
child:
	ANDQ	$~15, SP
	SUBQ	$16, SP	// the callee's spill slot for its argument
	MOVQ	R12, AX
	XORPS	X15, X15	// the zero register the convention expects
	XORQ	R14, R14	// no g: the thread's g is the parent's, and nothing the child runs may use one
	CALL	R13
	MOVL	$127, DI
	MOVL	$231, AX	// SYS_exit_group
	SYSCALL
	INT	$3
