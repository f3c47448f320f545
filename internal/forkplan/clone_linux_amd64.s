#include "textflag.h"

// func cloneShared(args *cloneArgs, size uintptr, c *childArgs) (pid uintptr, errno uintptr)
//
// clone3 for a child that shares the caller's memory on a stack of its
// own (args.stack). The parent returns as from any system call. The child
// never returns here, since the stack it would return on is the parent's:
// it calls childMain(c) on its new stack, and exits if that returns.
TEXT ·cloneShared(SB),NOSPLIT|NOFRAME,$0-40
	MOVQ	args+0(FP), DI
	MOVQ	size+8(FP), SI
	MOVQ	c+16(FP), R12	// the child gets the parent's registers
	MOVQ	$435, AX	// SYS_clone3
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$-1, pid+24(FP)
	MOVQ	AX, errno+32(FP)
	RET
ok:
	MOVQ	AX, pid+24(FP)
	MOVQ	$0, errno+32(FP)
	RET
child:
	ANDQ	$~15, SP
	SUBQ	$16, SP
	MOVQ	R12, 0(SP)	// childMain's argument, as ABI0 passes it
	CALL	·childMain(SB)
	MOVL	$127, DI
	MOVL	$231, AX	// SYS_exit_group
	SYSCALL
	INT	$3
