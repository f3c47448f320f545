package execshim

import "encoding/binary"

// arm64 registers by number; 31 is sp as a base or in add/sub
// immediates, and xzr as the destination of cmp and cmn.
const (
	x0, x1, x2, x3, x4, x8  = 0, 1, 2, 3, 4, 8
	x19, x20, x21, x22, x23 = 19, 20, 21, 22, 23
	x24                     = 24
	sp, xzr                 = 31, 31
)

// Condition codes of b.cond.
const (
	condEQ = 0
	condNE = 1
	condLO = 3
	condHI = 8
)

// arm64Code is the shim for AArch64. At the entry point the kernel leaves
// argc at [sp], argv[0..argc-1] and a NULL after it, then envp. System
// calls take their number in x8 and arguments in x0-x5, and return in x0.
//
// Registers: x19 envp, x20 the place being tried, x21 the empty string's
// slot in argv (the end of the places), x22 the program's argv, x23 the
// errno to report, x24 the entry's sp in hold mode.
func arm64Code(reportFd int) []byte {
	a := newAsm()
	// Each encoder returns one instruction word; the comments name it.
	ldr := func(rt, rn, off int) uint32 { return 0xF9400000 | uint32(off/8)<<10 | uint32(rn)<<5 | uint32(rt) }      // ldr xt, [xn, #off]
	ldrb := func(rt, rn, off int) uint32 { return 0x39400000 | uint32(off)<<10 | uint32(rn)<<5 | uint32(rt) }       // ldrb wt, [xn, #off]
	ldrbPost := func(rt, rn, n int) uint32 { return 0x38400400 | uint32(n&0x1FF)<<12 | uint32(rn)<<5 | uint32(rt) } // ldrb wt, [xn], #n
	str := func(rt, rn, off int) uint32 { return 0xF9000000 | uint32(off/8)<<10 | uint32(rn)<<5 | uint32(rt) }      // str xt, [xn, #off]
	str32 := func(rt, rn, off int) uint32 { return 0xB9000000 | uint32(off/4)<<10 | uint32(rn)<<5 | uint32(rt) }    // str wt, [xn, #off]
	add := func(rd, rn, imm int) uint32 { return 0x91000000 | uint32(imm)<<10 | uint32(rn)<<5 | uint32(rd) }        // add xd, xn, #imm
	sub := func(rd, rn, imm int) uint32 { return 0xD1000000 | uint32(imm)<<10 | uint32(rn)<<5 | uint32(rd) }        // sub xd, xn, #imm
	sub32 := func(rd, rn, imm int) uint32 { return 0x51000000 | uint32(imm)<<10 | uint32(rn)<<5 | uint32(rd) }      // sub wd, wn, #imm
	cmp := func(rn, imm int) uint32 { return 0xF1000000 | uint32(imm)<<10 | uint32(rn)<<5 | xzr }                   // cmp xn, #imm (subs xzr)
	cmn := func(rn, imm int) uint32 { return 0xB1000000 | uint32(imm)<<10 | uint32(rn)<<5 | xzr }                   // cmn xn, #imm (adds xzr)
	cmp32 := func(rn, imm int) uint32 { return 0x71000000 | uint32(imm)<<10 | uint32(rn)<<5 | xzr }                 // cmp wn, #imm
	cmpReg := func(rn, rm int) uint32 { return 0xEB000000 | uint32(rm)<<16 | uint32(rn)<<5 | xzr }                  // cmp xn, xm (subs xzr)
	mov := func(rd, rm int) uint32 { return 0xAA0003E0 | uint32(rm)<<16 | uint32(rd) }                              // mov xd, xm (orr xd, xzr, xm)
	movz := func(rd, imm int) uint32 { return 0xD2800000 | uint32(imm)<<5 | uint32(rd) }                            // mov xd, #imm (movz)
	movz32 := func(rd, imm int) uint32 { return 0x52800000 | uint32(imm)<<5 | uint32(rd) }                          // mov wd, #imm (movz)
	neg := func(rd, rm int) uint32 { return 0xCB0003E0 | uint32(rm)<<16 | uint32(rd) }                              // neg xd, xm (sub xd, xzr, xm)
	madd32 := func(rd, rn, rm, ra int) uint32 {
		return 0x1B000000 | uint32(rm)<<16 | uint32(ra)<<10 | uint32(rn)<<5 | uint32(rd)
	} // madd wd, wn, wm, wa
	// add xd, sp, xm, lsl #3 (the extended-register form, UXTX, which
	// takes sp as its base).
	addSPScaled := func(rd, rm int) uint32 { return 0x8B200000 | uint32(rm)<<16 | 3<<13 | 3<<10 | sp<<5 | uint32(rd) }
	const svc = 0xD4000001 // svc #0

	// Branches: the distance, in instructions, goes into a field of the
	// word at the instruction's offset.
	branch := func(w uint32, label string, shift, bits int) {
		a.ref(len(a.code), label, func(code []byte, at, target int) {
			d := uint32((target-at)/4) & (1<<bits - 1)
			binary.LittleEndian.PutUint32(code[at:], w|d<<shift)
		})
		a.emit32(w)
	}
	b := func(label string) { branch(0x14000000, label, 0, 26) }                         // b label
	bcond := func(cond uint32, label string) { branch(0x54000000|cond, label, 5, 19) }   // b.cond label
	cbz := func(rt int, label string) { branch(0xB4000000|uint32(rt), label, 5, 19) }    // cbz xt, label
	cbz32 := func(rt int, label string) { branch(0x34000000|uint32(rt), label, 5, 19) }  // cbz wt, label
	tbnz63 := func(rt int, label string) { branch(0xB7F80000|uint32(rt), label, 5, 14) } // tbnz xt, #63, label
	ldrLit := func(rt int, label string) { branch(0x58000000|uint32(rt), label, 5, 19) } // ldr xt, label
	adr := func(rd int, label string) {                                                  // adr xd, label: the byte distance, split in immlo and immhi
		a.ref(len(a.code), label, func(code []byte, at, target int) {
			d := uint32(target - at)
			binary.LittleEndian.PutUint32(code[at:], 0x10000000|(d&3)<<29|(d>>2&0x7FFFF)<<5|uint32(rd))
		})
		a.emit32(0)
	}

	// Is this the init's exec? argc >= 3 and argv[0] is Magic.
	a.emit32(ldr(x1, sp, 0)) // ldr x1, [sp]          ; argc
	a.emit32(cmp(x1, 3))     // cmp x1, #3
	bcond(condLO, "refuse")  // b.lo refuse           ; fewer than Magic, step, ""
	a.emit32(ldr(x0, sp, 8)) // ldr x0, [sp, #8]      ; argv[0]
	a.emit32(ldr(x2, x0, 0)) // ldr x2, [x0]          ; its first 8 bytes
	ldrLit(x3, "magic")      // ldr x3, magic
	a.emit32(cmpReg(x2, x3)) // cmp x2, x3
	bcond(condNE, "refuse")  // b.ne refuse

	a.emit32(addSPScaled(x19, x1)) // add x19, sp, x1, lsl #3
	a.emit32(add(x19, x19, 16))    // add x19, x19, #16 ; envp: past argc, argv and its NULL
	a.emit32(add(x20, sp, 24))     // add x20, sp, #24  ; &argv[2], the first place
	a.emit32(mov(x21, x20))        // mov x21, x20

	// Find the empty string that ends the places.
	a.label("find")
	a.emit32(ldr(x0, x21, 0))  // ldr x0, [x21]
	cbz(x0, "refuse")          // cbz x0, refuse        ; argv ended first
	a.emit32(ldrb(x1, x0, 0))  // ldrb w1, [x0]
	cbz32(x1, "found")         // cbz w1, found
	a.emit32(add(x21, x21, 8)) // add x21, x21, #8
	b("find")                  // b find
	a.label("found")
	a.emit32(add(x22, x21, 8)) // add x22, x21, #8      ; the program's argv
	a.emit32(cmpReg(x21, x20)) // cmp x21, x20          ; no places?
	bcond(condEQ, "hold")      // b.eq hold

	// The report fd must not reach the program.
	a.emit32(movz(x8, 25))        // mov x8, #SYS_fcntl
	a.emit32(movz(x0, reportFd))  // mov x0, #reportFd
	a.emit32(movz(x1, fSetFD))    // mov x1, #F_SETFD
	a.emit32(movz(x2, fdCloexec)) // mov x2, #FD_CLOEXEC
	a.emit32(svc)                 // svc #0
	tbnz63(x0, "failed")          // tbnz x0, #63, failed ; -errno
	a.emit32(movz(x23, eNOENT))   // mov x23, #ENOENT

	// Try each place.
	a.label("try")
	a.emit32(cmpReg(x20, x21))  // cmp x20, x21
	bcond(condEQ, "report")     // b.eq report          ; none left
	a.emit32(ldr(x0, x20, 0))   // ldr x0, [x20]        ; the place
	a.emit32(mov(x1, x22))      // mov x1, x22          ; argv
	a.emit32(mov(x2, x19))      // mov x2, x19          ; envp
	a.emit32(movz(x8, 221))     // mov x8, #SYS_execve
	a.emit32(svc)               // svc #0               ; returns only on failure
	a.emit32(add(x20, x20, 8))  // add x20, x20, #8
	a.emit32(cmn(x0, eNOENT))   // cmn x0, #ENOENT
	bcond(condEQ, "try")        // b.eq try
	a.emit32(cmn(x0, eNOTDIR))  // cmn x0, #ENOTDIR
	bcond(condEQ, "try")        // b.eq try
	a.emit32(cmn(x0, eACCES))   // cmn x0, #EACCES
	bcond(condNE, "failed")     // b.ne failed
	a.emit32(movz(x23, eACCES)) // mov x23, #EACCES
	b("try")                    // b try

	a.label("failed")
	a.emit32(neg(x23, x0)) // neg x23, x0               ; the errno

	// The step: argv[1] in decimal.
	a.label("report")
	a.emit32(ldr(x1, sp, 16)) // ldr x1, [sp, #16]  ; argv[1]
	a.emit32(movz32(x2, 0))   // mov w2, #0
	a.emit32(movz32(x4, 10))  // mov w4, #10
	a.label("digit")
	a.emit32(ldrbPost(x3, x1, 1))    // ldrb w3, [x1], #1
	a.emit32(sub32(x3, x3, '0'))     // sub w3, w3, #'0'
	a.emit32(cmp32(x3, 9))           // cmp w3, #9
	bcond(condHI, "record")          // b.hi record        ; the NUL, or not a digit
	a.emit32(madd32(x2, x2, x4, x3)) // madd w2, w2, w4, w3 ; w2 = w2*10 + w3
	b("digit")                       // b digit

	// The failure record, on the stack: mark, step, errno.
	a.label("record")
	a.emit32(sub(sp, sp, 16))      // sub sp, sp, #16
	a.emit32(movz32(x3, failMark)) // mov w3, #'F'
	a.emit32(str32(x3, sp, 0))     // str w3, [sp]
	a.emit32(str32(x2, sp, 4))     // str w2, [sp, #4]
	a.emit32(str32(x23, sp, 8))    // str w23, [sp, #8]
	a.emit32(movz(x8, 64))         // mov x8, #SYS_write
	a.emit32(movz(x0, reportFd))   // mov x0, #reportFd
	a.emit32(add(x1, sp, 0))       // mov x1, sp
	a.emit32(movz(x2, 12))         // mov x2, #12
	a.emit32(svc)                  // svc #0
	a.emit32(movz(x0, ExitFailed)) // mov x0, #125
	b("exit")                      // b exit

	// Hold mode: ignore SIGCHLD, check that the filter lets it wait (if
	// ppoll failed at once, the wait would be a busy loop), say "it runs"
	// by closing the report fd, then wait forever. A failure is reported
	// as an exec's is, before the close; x24 keeps the entry's sp for it,
	// as the record reads argv[1] from there.
	a.label("hold")
	a.emit32(add(x24, sp, 0))      // mov x24, sp
	a.emit32(sub(sp, sp, 48))      // sub sp, sp, #48
	a.emit32(movz(x0, 1))          // mov x0, #SIG_IGN
	a.emit32(str(x0, sp, 0))       // str x0, [sp]         ; the action's handler
	a.emit32(str(xzr, sp, 8))      // str xzr, [sp, #8]    ; its flags, restorer, mask: none
	a.emit32(str(xzr, sp, 16))     // str xzr, [sp, #16]
	a.emit32(str(xzr, sp, 24))     // str xzr, [sp, #24]
	a.emit32(str(xzr, sp, 32))     // str xzr, [sp, #32]   ; [sp+32]: a zero timespec
	a.emit32(str(xzr, sp, 40))     // str xzr, [sp, #40]
	a.emit32(movz(x8, 134))        // mov x8, #SYS_rt_sigaction
	a.emit32(movz(x0, sigCHLD))    // mov x0, #SIGCHLD
	a.emit32(add(x1, sp, 0))       // mov x1, sp           ; the action
	a.emit32(movz(x2, 0))          // mov x2, #0           ; no old action
	a.emit32(movz(x3, sigsetSize)) // mov x3, #8
	a.emit32(svc)                  // svc #0
	tbnz63(x0, "holdFailed")       // tbnz x0, #63, holdFailed
	a.emit32(movz(x8, 73))         // mov x8, #SYS_ppoll
	a.emit32(movz(x0, 0))          // mov x0, #0           ; no fds
	a.emit32(movz(x1, 0))          // mov x1, #0
	a.emit32(add(x2, sp, 32))      // add x2, sp, #32      ; return at once
	a.emit32(movz(x3, 0))          // mov x3, #0           ; no signal mask
	a.emit32(movz(x4, sigsetSize)) // mov x4, #8
	a.emit32(svc)                  // svc #0
	tbnz63(x0, "holdFailed")       // tbnz x0, #63, holdFailed
	a.emit32(movz(x8, 57))         // mov x8, #SYS_close
	a.emit32(movz(x0, reportFd))   // mov x0, #reportFd
	a.emit32(svc)                  // svc #0               ; the fd is gone whatever it returns
	a.label("wait")
	a.emit32(movz(x8, 73)) // mov x8, #SYS_ppoll
	a.emit32(movz(x0, 0))  // mov x0, #0           ; no fds
	a.emit32(movz(x1, 0))  // mov x1, #0
	a.emit32(movz(x2, 0))  // mov x2, #0           ; no timeout
	a.emit32(movz(x3, 0))  // mov x3, #0           ; no signal mask
	a.emit32(svc)          // svc #0               ; returns only if a handler ran: none does
	b("wait")              // b wait
	a.label("holdFailed")
	a.emit32(add(sp, x24, 0)) // mov sp, x24
	b("failed")               // b failed

	a.label("refuse")
	a.emit32(movz(x8, 64))           // mov x8, #SYS_write
	a.emit32(movz(x0, 2))            // mov x0, #2
	adr(x1, "message")               // adr x1, message
	a.emit32(movz(x2, len(refusal))) // mov x2, #len(message)
	a.emit32(svc)                    // svc #0
	a.emit32(movz(x0, ExitRefused))  // mov x0, #126
	a.label("exit")
	a.emit32(movz(x8, 94)) // mov x8, #SYS_exit_group
	a.emit32(svc)          // svc #0
	a.emit32(0)            // udf #0              ; not reached

	a.align(8)
	a.label("magic")
	a.code = binary.LittleEndian.AppendUint64(a.code, magicWord)
	a.label("message")
	a.emit([]byte(refusal)...)
	return a.bytes()
}
