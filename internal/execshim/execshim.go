// Package execshim makes the exec shim: a tiny static ELF program, written
// here in machine code, that a sandbox's init execs in place of the
// program, and that then execs the program.
//
// The init is a clone of the caller's binary (or of a sealed copy of it)
// until its last exec. An execve resolves a script's interpreter line in
// the execing process, so a program that is a script whose interpreter is
// /proc/self/exe or /proc/1/exe would be interpreted by the caller's own
// code, inside the sandbox, with arguments the script chose. Exec'd from
// the shim, the program's interpreter line is resolved where
// /proc/self/exe (and /proc/1/exe, the init being pid 1) is the shim,
// which interprets nothing: reached as an interpreter, or with any argv
// but the init's, it writes one line to fd 2 and exits 126.
//
// The shim's argv is Args's: Magic, the number of the plan step a failure
// is reported as, the places to try the program in order (at least one:
// with none it holds, see below), an empty string, then the program's own
// argv. Its environment is the program's. It marks the report fd
// close-on-exec, and tries each place as the init's lookup does: a place
// that does not exist (ENOENT, ENOTDIR) goes on to the next, one that
// cannot be executed (EACCES) is remembered, and any other error ends the
// search. If no exec succeeds it writes a
// failure record, as package forkplan's child does (the mark, the step,
// the errno: ENOENT, EACCES if a place had it, or the error that ended
// the search), to the report fd, and exits 125.
//
// With no places at all (HoldArgs's argv, or Args's with none) the shim
// execs nothing: it holds. This is the pid 1 of a live sandbox, which
// must outlive every program started in it, so that its PID namespace
// (and the namespaces its processes hold) stay, and which must reap the
// orphans the kernel gives it, so that none stays a zombie. It sets
// SIGCHLD's action to SIG_IGN, which makes the kernel reap each of its
// children as it exits; checks, with a ppoll that returns at once, that
// the filter lets it wait; closes the report fd, which its launcher reads
// as EOF, as at a program's exec; then waits in ppoll, with no fds and no
// timeout, for ever: only a signal handler could end that wait, it has
// none, and it waits again if the call ever returns. If the sigaction or
// the check fails it writes a failure record with that errno, as for an
// exec, and exits 125. So the filter must allow rt_sigaction, ppoll and
// close besides what a program's start needs.
//
// The holding shim is safe to reach from inside the sandbox (by a signal,
// ptrace, its /proc entries): it runs with the sandbox's own credentials,
// capabilities and filter, holds no descriptor but fds 0-2, which its
// launcher points at /dev/null, and does nothing but wait, so a process
// that takes it over gains nothing it did not have. As pid 1 of its
// namespace, with no handler, it does not even receive signals sent from
// inside; its launcher ends it, and so the sandbox, with SIGKILL from
// outside.
package execshim

import (
	"encoding/binary"
	"runtime"
	"strconv"
)

// Magic is the shim's argv[0] when the init execs it. It holds a tab, a
// space and a newline, none of which a script's interpreter path can hold:
// the kernel ends the path of a "#!" line at the first blank or newline
// and passes that path as the interpreter's argv[0]. So the shim reached
// as an interpreter (through /proc/self/exe, /proc/1/exe or an fd link)
// never sees Magic there, and refuses. The shim compares argv[0]'s first
// 8 bytes as one word: Magic is 7 bytes, and its NUL is the eighth, so a
// longer string that starts with Magic does not match. (argv[0] lies in
// the strings that the kernel copies to the top of the stack, followed by
// at least the exec path and an 8-byte end marker, so the 8-byte load
// never leaves the stack.)
const Magic = "shim\t \n"

// magicWord is Magic with its NUL, as the shim loads it: little-endian on
// both architectures.
var magicWord = binary.LittleEndian.Uint64([]byte(Magic + "\x00"))

// refusal is what the shim writes to fd 2 when it refuses to run.
const refusal = "sandbox exec shim: refused to exec anything: it was run as a script's interpreter or with an argv it does not expect\n"

// Exit statuses of the shim.
const (
	// ExitRefused is the shim's status when it refuses to run.
	ExitRefused = 126
	// ExitFailed is its status after a failure record: every exec failed.
	ExitFailed = 125
)

// Args is the shim's argv for the places to try the program (none may be
// empty) and its argv, with failures reported as plan step step. With no
// places it is HoldArgs's argv followed by argv: the shim holds, neither
// looking for nor running the program, so a caller whose lookup can come
// out empty must fail that itself rather than pass no places.
func Args(step int, places, argv []string) []string {
	out := make([]string, 0, 3+len(places)+len(argv))
	out = append(out, Magic, strconv.Itoa(step))
	out = append(out, places...)
	out = append(out, "")
	return append(out, argv...)
}

// HoldArgs is the shim's argv for hold mode, in which it waits for ever
// as its PID namespace's init, reaping orphans, with a failure to set
// that up reported as plan step step.
func HoldArgs(step int) []string {
	return []string{Magic, strconv.Itoa(step), ""}
}

// Image returns the shim for this process's architecture, reporting
// failures on reportFd, or nil on an architecture it has no code for.
func Image(reportFd int) []byte {
	return ImageFor(runtime.GOARCH, reportFd)
}

// ImageFor is Image for the architecture goarch ("amd64", "arm64").
func ImageFor(goarch string, reportFd int) []byte {
	switch goarch {
	case "amd64":
		return elf(emMachineX86_64, amd64Code(reportFd))
	case "arm64":
		return elf(emMachineAArch64, arm64Code(reportFd))
	}
	return nil
}

// Syscall-level constants the code uses, the same on both architectures.
const (
	fSetFD    = 2  // fcntl F_SETFD
	fdCloexec = 1  // FD_CLOEXEC
	eNOENT    = 2  // ENOENT
	eACCES    = 13 // EACCES
	eNOTDIR   = 20 // ENOTDIR
	failMark  = 'F'

	sigCHLD    = 17 // SIGCHLD
	sigsetSize = 8  // the kernel's sigset_t, rt_sigaction's and ppoll's last argument
)
