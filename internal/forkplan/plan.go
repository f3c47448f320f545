// Package forkplan runs a list of system calls, fixed in advance, in a
// child cloned without the Go runtime.
//
// A forked Go process cannot run Go code: only the forking thread exists
// in the child, and the runtime's locks and allocator may be held by
// threads that are gone. The syscall package's ForkExec therefore only
// makes raw system calls between clone and exec, and so does this package.
// What it adds is that the calls are the caller's: a Plan lists them, with
// their arguments prepared in memory before the clone, and the child
// interprets the list without allocating, growing its stack or calling
// anything but the raw system call entry.
//
// This lets a sandbox's init (mounts, pivot_root, seccomp, exec) run in the
// cloned child itself, instead of in a re-exec of the whole program, whose
// runtime start and package inits cost more than everything the init does.
//
// A child may share the caller's memory until it execs (Clone.Shared), as
// a vfork child does, on a stack of its own: the clone then copies no page
// tables, and the caller's threads take no copy-on-write faults after it.
//
// Either child starts with every signal blocked and sets every caught
// signal to its default action before it restores the mask: no Go signal
// handler ever runs in it.
//
// A plan may fork again (ExitUnlessZero): the new child goes on with the
// steps after the fork, and the forking child ends there.
//
// A step's result may be saved in a slot (an fd, usually) and used as a
// later step's argument. A failing step ends the child: it writes a Failure
// record naming the step and its errno to the plan's report fd and exits
// with status 125. A step may instead go on past an errno, skip a number of
// steps on it, or note it in a slot.
package forkplan

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"
)

// Where says what a step does, for the error that reports its failure.
type Where struct {
	Stage, Op, Path string
}

// Slot is a saved value: the result of an earlier step, or its initial
// value.
type Slot int

// Arg is one argument of a step.
type Arg struct {
	val  uintptr
	slot Slot // >= 0: the slot's value at the time of the step
	keep any  // memory val points into
}

// Val is a plain value.
func Val[T ~int | ~int32 | ~int64 | ~uint | ~uint8 | ~uint32 | ~uint64 | ~uintptr](v T) Arg {
	return Arg{val: uintptr(v), slot: -1}
}

// Str is a pointer to a NUL-terminated copy of s.
func Str(s string) Arg {
	b := append([]byte(s), 0)
	return Arg{val: uintptr(unsafe.Pointer(&b[0])), slot: -1, keep: b}
}

// Strs is a pointer to a NULL-terminated array of pointers to
// NUL-terminated copies of ss, as execve takes argv and envp.
func Strs(ss []string) Arg {
	keep := make([][]byte, len(ss))
	ptrs := make([]uintptr, len(ss)+1)
	for i, s := range ss {
		keep[i] = append([]byte(s), 0)
		ptrs[i] = uintptr(unsafe.Pointer(&keep[i][0]))
	}
	return Arg{val: uintptr(unsafe.Pointer(&ptrs[0])), slot: -1, keep: []any{keep, ptrs}}
}

// Buf is a pointer to b's first byte (nil when b is empty). The plan keeps
// b alive; the child sees b as it is at Start.
func Buf(b []byte) Arg {
	if len(b) == 0 {
		return Arg{slot: -1}
	}
	return Arg{val: uintptr(unsafe.Pointer(&b[0])), slot: -1, keep: b}
}

// Ptr is a pointer to the value *p, which the plan keeps alive.
func Ptr[T any](p *T) Arg {
	return Arg{val: uintptr(unsafe.Pointer(p)), slot: -1, keep: p}
}

// In is the value of slot s when the step runs.
func In(s Slot) Arg {
	return Arg{slot: s}
}

// kinds of steps besides system calls.
const (
	kindSyscall = iota
	kindStore   // store slot args[0] as an int32 at at
	kindFail    // fail with the errno in slot args[0]
	kindCheck   // fail with errno args[1] unless *check is args[0]
	kindLoad    // the result is *from
	kindExit    // exit with status 0 unless slot args[0] is 0
)

// op is one step as the child reads it. Everything in it is a plain value.
type op struct {
	kind     uintptr
	trap     uintptr
	args     [6]uintptr
	inSlots  uintptr // bit i: args[i] is a slot number
	save     int     // slot for the result, or -1
	want     uintptr // when wantSet: the only result that counts as success
	wantSet  uintptr
	passOn   [2]uintptr // errnos after which the plan goes on
	noteOn   uintptr    // an errno that is saved in noteSlot, and the plan goes on
	noteSlot int
	skipOn   uintptr // an errno after which the next skip steps are skipped
	skip     int
	at       *int32   // where a kindStore step stores
	check    *byte    // what a kindCheck step reads
	from     *uintptr // what a kindLoad step reads
}

// Plan is a list of steps for a child to run.
type Plan struct {
	ops      []op
	where    []Where
	slots    []uintptr // initial values
	keep     []any
	reportFd int
	refs     refs
	buf      *buffers // where the slices came from, to go back to on Release
}

// New returns an empty plan whose failures are reported on reportFd, an
// fd number as the child sees it when the failing step runs.
func New(reportFd int) *Plan {
	b := released.Get().(*buffers)
	p := &Plan{ops: b.ops, where: b.where, slots: b.slots, keep: b.keep, reportFd: reportFd, buf: b}
	p.refs.take()
	return p
}

// Grow makes room for steps more steps and slots more slots, for a
// caller that knows its plan's size: growing step by step copied the
// plan about ten times over.
func (p *Plan) Grow(steps, slots int) {
	p.ops = slices.Grow(p.ops, steps)
	p.where = slices.Grow(p.where, steps)
	p.slots = slices.Grow(p.slots, slots)
}

// Slot returns a new slot holding v until a step saves into it.
func (p *Plan) Slot(v uintptr) Slot {
	p.slots = append(p.slots, v)
	return Slot(len(p.slots) - 1)
}

// Step is a step just added, to set how its result and errors are taken.
type Step struct {
	p *Plan
	i int
}

func (p *Plan) add(w Where, o op, args []Arg) Step {
	if len(args) > len(o.args) {
		panic(fmt.Sprintf("forkplan: %d arguments to %s", len(args), w.Op))
	}
	o.save, o.noteSlot = -1, -1
	for i, a := range args {
		if a.slot >= 0 {
			p.checkSlot(a.slot)
			o.args[i], o.inSlots = uintptr(a.slot), o.inSlots|1<<i
			continue
		}
		o.args[i] = a.val
		if a.keep != nil {
			p.keep = append(p.keep, a.keep)
		}
	}
	p.ops = append(p.ops, o)
	p.where = append(p.where, w)
	return Step{p, len(p.ops) - 1}
}

func (p *Plan) checkSlot(s Slot) {
	if s < 0 || int(s) >= len(p.slots) {
		panic(fmt.Sprintf("forkplan: no slot %d", s))
	}
}

// Call adds the system call trap with args.
func (p *Plan) Call(w Where, trap uintptr, args ...Arg) Step {
	return p.add(w, op{kind: kindSyscall, trap: trap}, args)
}

// Store adds a step that writes slot s, as an int32, at p (an fd into a
// control message, say).
func (p *Plan) Store(s Slot, at *int32) {
	p.add(Where{Op: "store"}, op{kind: kindStore, at: at}, []Arg{In(s)})
}

// Fail adds a step that fails as w with the errno in slot s.
func (p *Plan) Fail(w Where, s Slot) {
	p.add(w, op{kind: kindFail}, []Arg{In(s)})
}

// Check adds a step that fails as w with errno unless *at is want when
// the step runs (a path the step before wrote, say).
func (p *Plan) Check(w Where, at *byte, want byte, errno uintptr) {
	p.add(w, op{kind: kindCheck, check: at}, []Arg{Val(want), Val(errno)})
	p.keep = append(p.keep, at)
}

// Load adds a step that saves into slot s what is at from when the step
// runs: a value that is known only then, such as an address the launcher
// wrote into memory the child received.
func (p *Plan) Load(s Slot, from *uintptr) {
	p.add(Where{Op: "load"}, op{kind: kindLoad, from: from}, nil).Save(s)
	p.keep = append(p.keep, from)
}

// ExitUnlessZero adds a step that ends the child with status 0 unless
// slot s holds 0: after a step that forks (a clone without CLONE_VM),
// whose result is the new child's pid in the parent and 0 in the child,
// the parent's side of the plan ends there and the child's goes on.
func (p *Plan) ExitUnlessZero(s Slot) {
	p.add(Where{Op: "exit unless zero"}, op{kind: kindExit}, []Arg{In(s)})
}

// Save saves the step's result in slot s.
func (s Step) Save(slot Slot) Step {
	s.p.checkSlot(slot)
	s.p.ops[s.i].save = int(slot)
	return s
}

// Want makes any result but r a failure (with errno EPROTO).
func (s Step) Want(r uintptr) Step {
	s.p.ops[s.i].want, s.p.ops[s.i].wantSet = r, 1
	return s
}

// PassOn lets the plan go on after any of errnos (at most two).
func (s Step) PassOn(errnos ...uintptr) Step {
	if len(errnos) > len(s.p.ops[s.i].passOn) {
		panic(fmt.Sprintf("forkplan: %d errnos to pass on", len(errnos)))
	}
	copy(s.p.ops[s.i].passOn[:], errnos)
	return s
}

// NoteOn saves errno in slot and lets the plan go on after it.
func (s Step) NoteOn(errno uintptr, slot Slot) Step {
	s.p.checkSlot(slot)
	s.p.ops[s.i].noteOn, s.p.ops[s.i].noteSlot = errno, int(slot)
	return s
}

// SkipOn skips the next n steps after errno.
func (s Step) SkipOn(errno uintptr, n int) Step {
	s.p.ops[s.i].skipOn, s.p.ops[s.i].skip = errno, n
	return s
}

// Len is the number of steps.
func (p *Plan) Len() int { return len(p.ops) }

// Failure is a failed step as the child reports it.
type Failure struct {
	Step  int
	Where Where
	Errno uintptr
}

// FailureLen is the size of a failure record; it starts with FailureMark.
const FailureLen = 12

// FailureMark is the first byte of a failure record.
const FailureMark = 'F'

// record is a failure record as the child writes it.
type record struct {
	mark  uint32
	step  uint32
	errno uint32
}

// ParseFailure reads a failure record of p.
func (p *Plan) ParseFailure(b []byte) (Failure, error) {
	if len(b) != FailureLen || b[0] != FailureMark {
		return Failure{}, fmt.Errorf("forkplan: malformed failure record %q", b)
	}
	step, errno := binary.NativeEndian.Uint32(b[4:]), binary.NativeEndian.Uint32(b[8:])
	if int(step) >= len(p.ops) {
		return Failure{}, fmt.Errorf("forkplan: failure of step %d of %d", step, len(p.ops))
	}
	return Failure{Step: int(step), Where: p.where[step], Errno: uintptr(errno)}, nil
}
