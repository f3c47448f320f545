package execshim

import "encoding/binary"

// amd64Code is the shim for x86-64. At the entry point the kernel leaves
// argc at [rsp], argv[0..argc-1] and a NULL after it, then envp.
//
// Registers: r12 envp, r13 the place being tried, rbx the empty string's
// slot in argv (the end of the places), r14 the program's argv, r15 the
// errno to report, rbp the entry's rsp in hold mode.
func amd64Code(reportFd int) []byte {
	a := newAsm()
	le := binary.LittleEndian
	imm32 := func(v int) []byte { return le.AppendUint32(nil, uint32(v)) }
	// rel32 emits the opcode bytes op of a jump (or a RIP-relative lea)
	// whose last 4 bytes are the distance from the instruction's end to
	// label.
	rel32 := func(label string, op ...byte) {
		a.emit(op...)
		a.ref(len(a.code), label, func(code []byte, at, target int) {
			le.PutUint32(code[at:], uint32(int32(target-(at+4))))
		})
		a.emit(0, 0, 0, 0)
	}

	// Is this the init's exec? argc >= 3 and argv[0] is Magic.
	a.emit(0x48, 0x8B, 0x0C, 0x24)                                            //       mov rcx, [rsp]          ; argc
	a.emit(0x48, 0x83, 0xF9, 0x03)                                            //       cmp rcx, 3
	rel32("refuse", 0x0F, 0x82)                                               //       jb refuse               ; fewer than Magic, step, ""
	a.emit(0x48, 0x8B, 0x7C, 0x24, 0x08)                                      // mov rdi, [rsp+8]        ; argv[0]
	a.emit(append([]byte{0x48, 0xB8}, le.AppendUint64(nil, magicWord)...)...) // movabs rax, Magic word
	a.emit(0x48, 0x39, 0x07)                                                  //      cmp [rdi], rax          ; argv[0]'s first 8 bytes
	rel32("refuse", 0x0F, 0x85)                                               //      jne refuse

	a.emit(0x4C, 0x8D, 0x64, 0xCC, 0x10) // lea r12, [rsp+rcx*8+16] ; envp: past argc, argv and its NULL
	a.emit(0x4C, 0x8D, 0x6C, 0x24, 0x18) // lea r13, [rsp+24]       ; &argv[2], the first place
	a.emit(0x4C, 0x89, 0xEB)             // mov rbx, r13

	// Find the empty string that ends the places.
	a.label("find")
	a.emit(0x48, 0x8B, 0x03)       //          mov rax, [rbx]
	a.emit(0x48, 0x85, 0xC0)       //          test rax, rax
	rel32("refuse", 0x0F, 0x84)    //          jz refuse               ; argv ended first
	a.emit(0x80, 0x38, 0x00)       //          cmp byte [rax], 0
	rel32("found", 0x0F, 0x84)     //          je found
	a.emit(0x48, 0x83, 0xC3, 0x08) //       add rbx, 8
	rel32("find", 0xE9)            //          jmp find
	a.label("found")
	a.emit(0x4C, 0x8D, 0x73, 0x08) //       lea r14, [rbx+8]        ; the program's argv
	a.emit(0x4C, 0x39, 0xEB)       //       cmp rbx, r13            ; no places?
	rel32("hold", 0x0F, 0x84)      //          je hold

	// The report fd must not reach the program.
	a.emit(append([]byte{0xB8}, imm32(72)...)...)           // mov eax, SYS_fcntl
	a.emit(append([]byte{0xBF}, imm32(reportFd)...)...)     // mov edi, reportFd
	a.emit(append([]byte{0xBE}, imm32(fSetFD)...)...)       // mov esi, F_SETFD
	a.emit(append([]byte{0xBA}, imm32(fdCloexec)...)...)    // mov edx, FD_CLOEXEC
	a.emit(0x0F, 0x05)                                      //          syscall
	a.emit(0x48, 0x85, 0xC0)                                //          test rax, rax
	rel32("failed", 0x0F, 0x88)                             //          js failed               ; -errno
	a.emit(append([]byte{0x41, 0xBF}, imm32(eNOENT)...)...) // mov r15d, ENOENT

	// Try each place.
	a.label("try")
	a.emit(0x49, 0x39, 0xDD)                                //      cmp r13, rbx
	rel32("report", 0x0F, 0x84)                             //      je report               ; none left
	a.emit(0x49, 0x8B, 0x7D, 0x00)                          //      mov rdi, [r13]          ; the place
	a.emit(0x4C, 0x89, 0xF6)                                //      mov rsi, r14            ; argv
	a.emit(0x4C, 0x89, 0xE2)                                //      mov rdx, r12            ; envp
	a.emit(append([]byte{0xB8}, imm32(59)...)...)           // mov eax, SYS_execve
	a.emit(0x0F, 0x05)                                      //      syscall                 ; returns only on failure
	a.emit(0x49, 0x83, 0xC5, 0x08)                          //      add r13, 8
	a.emit(0x48, 0x83, 0xF8, byte(0x100-eNOENT))            //  cmp rax, -ENOENT
	rel32("try", 0x0F, 0x84)                                //      je try
	a.emit(0x48, 0x83, 0xF8, byte(0x100-eNOTDIR))           // cmp rax, -ENOTDIR
	rel32("try", 0x0F, 0x84)                                //      je try
	a.emit(0x48, 0x83, 0xF8, byte(0x100-eACCES))            //  cmp rax, -EACCES
	rel32("failed", 0x0F, 0x85)                             //      jne failed
	a.emit(append([]byte{0x41, 0xBF}, imm32(eACCES)...)...) // mov r15d, EACCES
	rel32("try", 0xE9)                                      //      jmp try

	a.label("failed")
	a.emit(0x48, 0xF7, 0xD8) //      neg rax                 ; the errno
	a.emit(0x49, 0x89, 0xC7) //      mov r15, rax

	// The step: argv[1] in decimal.
	a.label("report")
	a.emit(0x48, 0x8B, 0x74, 0x24, 0x10) // mov rsi, [rsp+16]       ; argv[1]
	a.emit(0x31, 0xD2)                   //      xor edx, edx
	a.label("digit")
	a.emit(0x0F, 0xB6, 0x06)    //      movzx eax, byte [rsi]
	a.emit(0x83, 0xE8, '0')     //      sub eax, '0'
	a.emit(0x83, 0xF8, 0x09)    //      cmp eax, 9
	rel32("record", 0x0F, 0x87) //      ja record               ; the NUL, or not a digit
	a.emit(0x6B, 0xD2, 0x0A)    //      imul edx, edx, 10
	a.emit(0x01, 0xC2)          //      add edx, eax
	a.emit(0x48, 0xFF, 0xC6)    //      inc rsi
	rel32("digit", 0xE9)        //      jmp digit

	// The failure record, on the stack: mark, step, errno.
	a.label("record")
	a.emit(0x48, 0x83, 0xEC, 0x10)                                  //      sub rsp, 16
	a.emit(append([]byte{0xC7, 0x04, 0x24}, imm32(failMark)...)...) // mov dword [rsp], 'F'
	a.emit(0x89, 0x54, 0x24, 0x04)                                  //      mov [rsp+4], edx
	a.emit(0x44, 0x89, 0x7C, 0x24, 0x08)                            // mov [rsp+8], r15d
	a.emit(append([]byte{0xB8}, imm32(1)...)...)                    // mov eax, SYS_write
	a.emit(append([]byte{0xBF}, imm32(reportFd)...)...)             // mov edi, reportFd
	a.emit(0x48, 0x89, 0xE6)                                        //      mov rsi, rsp
	a.emit(append([]byte{0xBA}, imm32(12)...)...)                   // mov edx, 12
	a.emit(0x0F, 0x05)                                              //      syscall
	a.emit(append([]byte{0xBF}, imm32(ExitFailed)...)...)           // mov edi, 125
	rel32("exit", 0xE9)                                             //      jmp exit

	// Hold mode: ignore SIGCHLD, check that the filter lets it wait (if
	// ppoll failed at once, the wait would be a busy loop), say "it runs"
	// by closing the report fd, then wait forever. A failure is reported
	// as an exec's is, before the close; rbp keeps the entry's rsp for it,
	// as the record reads argv[1] from there.
	a.label("hold")
	a.emit(0x48, 0x89, 0xE5)                                    //      mov rbp, rsp
	a.emit(0x31, 0xC0)                                          //      xor eax, eax
	a.emit(0x50, 0x50)                                          //      push rax; push rax      ; [rsp+32]: a zero timespec
	a.emit(0x50, 0x50, 0x50)                                    //      push rax (3 times)      ; the action's mask, restorer, flags: none
	a.emit(0x6A, 0x01)                                          //      push 1                  ; its handler: SIG_IGN
	a.emit(append([]byte{0xB8}, imm32(13)...)...)               // mov eax, SYS_rt_sigaction
	a.emit(append([]byte{0xBF}, imm32(sigCHLD)...)...)          // mov edi, SIGCHLD
	a.emit(0x48, 0x89, 0xE6)                                    //      mov rsi, rsp            ; the action
	a.emit(0x31, 0xD2)                                          //      xor edx, edx            ; no old action
	a.emit(append([]byte{0x41, 0xBA}, imm32(sigsetSize)...)...) // mov r10d, 8
	a.emit(0x0F, 0x05)                                          //      syscall
	a.emit(0x48, 0x85, 0xC0)                                    //      test rax, rax
	rel32("holdFailed", 0x0F, 0x88)                             //      js holdFailed
	a.emit(0x31, 0xFF)                                          //      xor edi, edi            ; no fds
	a.emit(0x31, 0xF6)                                          //      xor esi, esi
	a.emit(0x48, 0x8D, 0x54, 0x24, 0x20)                        // lea rdx, [rsp+32]       ; return at once
	a.emit(0x45, 0x31, 0xD2)                                    //      xor r10d, r10d          ; no signal mask
	a.emit(append([]byte{0x41, 0xB8}, imm32(sigsetSize)...)...) // mov r8d, 8
	a.emit(append([]byte{0xB8}, imm32(271)...)...)              // mov eax, SYS_ppoll
	a.emit(0x0F, 0x05)                                          //      syscall
	a.emit(0x48, 0x85, 0xC0)                                    //      test rax, rax
	rel32("holdFailed", 0x0F, 0x88)                             //      js holdFailed
	a.emit(append([]byte{0xB8}, imm32(3)...)...)                // mov eax, SYS_close
	a.emit(append([]byte{0xBF}, imm32(reportFd)...)...)         // mov edi, reportFd
	a.emit(0x0F, 0x05)                                          //      syscall                 ; the fd is gone whatever it returns
	a.label("wait")
	a.emit(0x31, 0xFF)                             //      xor edi, edi            ; no fds
	a.emit(0x31, 0xF6)                             //      xor esi, esi
	a.emit(0x31, 0xD2)                             //      xor edx, edx            ; no timeout
	a.emit(0x45, 0x31, 0xD2)                       //      xor r10d, r10d          ; no signal mask
	a.emit(append([]byte{0xB8}, imm32(271)...)...) // mov eax, SYS_ppoll
	a.emit(0x0F, 0x05)                             //      syscall                 ; returns only if a handler ran: none does
	rel32("wait", 0xE9)                            //      jmp wait
	a.label("holdFailed")
	a.emit(0x48, 0x89, 0xEC) //      mov rsp, rbp
	rel32("failed", 0xE9)    //      jmp failed

	a.label("refuse")
	a.emit(append([]byte{0xB8}, imm32(1)...)...)            // mov eax, SYS_write
	a.emit(append([]byte{0xBF}, imm32(2)...)...)            // mov edi, 2
	rel32("message", 0x48, 0x8D, 0x35)                      // lea rsi, [rip+message]
	a.emit(append([]byte{0xBA}, imm32(len(refusal))...)...) // mov edx, len(message)
	a.emit(0x0F, 0x05)                                      //      syscall
	a.emit(append([]byte{0xBF}, imm32(ExitRefused)...)...)  // mov edi, 126
	a.label("exit")
	a.emit(append([]byte{0xB8}, imm32(231)...)...) // mov eax, SYS_exit_group
	a.emit(0x0F, 0x05)                             //      syscall
	a.emit(0xF4)                                   //      hlt                     ; not reached

	a.label("message")
	a.emit([]byte(refusal)...)
	return a.bytes()
}
