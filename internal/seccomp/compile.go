// Package seccomp compiles a syscall policy to a classic BPF program for
// seccomp(2), in pure Go, so that CGO_ENABLED=0 builds get the same filter.
// golang.org/x/net/bpf assembles the program and, in tests, runs it.
//
// The program checks the architecture first (a foreign one kills the
// process), refuses the x32 ABI on x86-64, answers syscall numbers above
// the highest one the policy knows with Unknown (ENOSYS, so programs fall
// back gracefully), and finds the others by a binary search over runs of
// consecutive syscalls that fare alike (a syscall's rules are tried in
// order; a syscall no rule allows gets Default).
package seccomp

import (
	"errors"
	"fmt"
	"sort"
	"syscall"

	"golang.org/x/net/bpf"
)

// Action is a seccomp return value (SECCOMP_RET_*).
type Action uint32

// The actions, in the kernel's encoding.
const (
	KillProcess Action = 0x80000000
	KillThread  Action = 0x00000000
	Trap        Action = 0x00030000
	UserNotif   Action = 0x7fc00000
	Log         Action = 0x7ffc0000
	Allow       Action = 0x7fff0000
	errnoBase   Action = 0x00050000
)

// Errno returns the action that fails the syscall with e.
func Errno(e syscall.Errno) Action { return errnoBase | Action(uint32(e)&0xffff) }

// Op compares a syscall argument (as an unsigned 64-bit value) with a value.
type Op int

const (
	Eq       Op = iota // arg == Value
	Ne                 // arg != Value
	Gt                 // arg > Value
	Ge                 // arg >= Value
	Lt                 // arg < Value
	Le                 // arg <= Value
	MaskedEq           // arg & Mask == Value
)

// Cond is one argument condition of a Rule.
type Cond struct {
	Arg   int // 0-5
	Op    Op
	Value uint64
	Mask  uint64 // for MaskedEq
}

// Rule applies Action to syscall Nr when every one of Conds holds.
type Rule struct {
	Nr     uint32
	Conds  []Cond
	Action Action
}

// Filter is a policy in the form the compiler takes.
type Filter struct {
	Arch    uint32 // AUDIT_ARCH_* of the programs it filters
	MaxNr   uint32 // the highest syscall number the policy knows
	Rules   []Rule // tried in order for their syscall
	Default Action // a known syscall no rule allows
	Unknown Action // a number above MaxNr
	// NoX32 refuses syscalls with the x32 bit (x86-64 only).
	NoX32 bool
}

// seccomp_data offsets.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
	x32Bit  = 0x40000000
)

// ErrTooLong is returned for a program the kernel would refuse.
var ErrTooLong = errors.New("seccomp program longer than 4096 instructions")

// Compile returns f as a BPF program.
func Compile(f Filter) ([]bpf.Instruction, error) {
	byNr := make(map[uint32][]Rule, len(f.Rules))
	for i, r := range f.Rules {
		if r.Nr > f.MaxNr {
			return nil, fmt.Errorf("rule %d: syscall %d is above the policy's highest known number %d", i, r.Nr, f.MaxNr)
		}
		for _, c := range r.Conds {
			if c.Arg < 0 || c.Arg > 5 {
				return nil, fmt.Errorf("rule %d (syscall %d): argument %d: there are 6 (0-5)", i, r.Nr, c.Arg)
			}
			if c.Op < Eq || c.Op > MaskedEq {
				return nil, fmt.Errorf("rule %d (syscall %d): unknown comparison %d", i, r.Nr, c.Op)
			}
		}
		byNr[r.Nr] = append(byNr[r.Nr], r)
	}
	nrs := make([]uint32, 0, len(byNr))
	for nr := range byNr {
		nrs = append(nrs, nr)
	}
	sort.Slice(nrs, func(i, j int) bool { return nrs[i] < nrs[j] })

	a := &asm{}
	kill, unknown, deflt := a.newLabel(), a.newLabel(), a.newLabel()
	a.emit(bpf.LoadAbsolute{Off: offArch, Size: 4})
	a.jumpIf(bpf.JumpEqual, f.Arch, a.here(), kill)
	a.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if f.NoX32 {
		a.jumpIf(bpf.JumpGreaterOrEqual, x32Bit, kill, a.here())
	}
	a.jumpIf(bpf.JumpGreaterThan, f.MaxNr, unknown, a.here())
	// Where each syscall goes: a syscall whose first rule has no
	// conditions goes straight to that rule's action, shared by all such
	// syscalls; one with conditions to its own checks; one without rules
	// to Default.
	actions := map[Action]label{f.Default: deflt}
	rules := make(map[uint32]label, len(f.Rules))
	for _, nr := range nrs {
		if r := byNr[nr][0]; len(r.Conds) == 0 {
			if _, ok := actions[r.Action]; !ok {
				actions[r.Action] = a.newLabel()
			}
			rules[nr] = actions[r.Action]
		} else {
			rules[nr] = a.newLabel()
		}
	}
	a.ranges(spans(f.MaxNr, rules, deflt))
	for _, nr := range nrs {
		if len(byNr[nr][0].Conds) == 0 {
			continue
		}
		a.bind(rules[nr])
		last := len(byNr[nr]) - 1
		for i, r := range byNr[nr] {
			if len(r.Conds) == 0 {
				// Decides every call: later rules are dead code.
				a.emit(bpf.RetConstant{Val: uint32(r.Action)})
				break
			}
			next := a.newLabel()
			a.conds(r.Conds, next)
			a.emit(bpf.RetConstant{Val: uint32(r.Action)})
			a.bind(next)
			if i == last {
				a.jump(deflt)
			}
		}
	}
	// In a fixed order, so that the program is the same every time.
	shared := make([]Action, 0, len(actions))
	for act := range actions {
		if act != f.Default {
			shared = append(shared, act)
		}
	}
	sort.Slice(shared, func(i, j int) bool { return shared[i] < shared[j] })
	for _, act := range shared {
		a.bind(actions[act])
		a.emit(bpf.RetConstant{Val: uint32(act)})
	}
	a.bind(kill)
	a.emit(bpf.RetConstant{Val: uint32(KillProcess)})
	a.bind(unknown)
	a.emit(bpf.RetConstant{Val: uint32(f.Unknown)})
	a.bind(deflt)
	a.emit(bpf.RetConstant{Val: uint32(f.Default)})
	prog, err := a.assemble()
	if err == nil && len(prog) > 4096 {
		err = ErrTooLong
	}
	return prog, err
}

// span is a run of consecutive syscall numbers, from first, that all go
// to the same label.
type span struct {
	first uint32
	to    label
}

// spans divides 0 to maxNr into runs that go to the same label: a
// syscall's in rules, or deflt. A policy's allowed syscalls lie in long
// runs, so there are far fewer runs than syscalls.
func spans(maxNr uint32, rules map[uint32]label, deflt label) []span {
	var out []span
	for nr := uint32(0); nr <= maxNr; nr++ {
		to, ok := rules[nr]
		if !ok {
			to = deflt
		}
		if len(out) == 0 || out[len(out)-1].to != to {
			out = append(out, span{nr, to})
		}
	}
	return out
}

// ranges emits a binary search over ss (sorted, covering every number the
// program lets through; the syscall number is in A) that jumps to the
// label of the span holding it. Each comparison halves the spans; a side
// with one span left jumps to its label directly.
func (a *asm) ranges(ss []span) {
	if len(ss) == 1 {
		a.jump(ss[0].to)
		return
	}
	mid := len(ss) / 2
	side := func(half []span) label {
		if len(half) == 1 {
			return half[0].to
		}
		return a.newLabel()
	}
	left, right := side(ss[:mid]), side(ss[mid:])
	a.jumpIf(bpf.JumpGreaterOrEqual, ss[mid].first, right, left)
	if mid > 1 {
		a.bind(left)
		a.ranges(ss[:mid])
	}
	if len(ss)-mid > 1 {
		a.bind(right)
		a.ranges(ss[mid:])
	}
}

// conds emits the checks of one rule's conditions, jumping to fail at the
// first that does not hold and falling through when all do.
func (a *asm) conds(conds []Cond, fail label) {
	for _, c := range conds {
		lo, hi := uint32(c.Value), uint32(c.Value>>32)
		loadLo := bpf.LoadAbsolute{Off: uint32(offArgs + 8*c.Arg), Size: 4}
		loadHi := bpf.LoadAbsolute{Off: uint32(offArgs + 8*c.Arg + 4), Size: 4}
		ok := a.newLabel()
		switch c.Op {
		case Eq, Ne:
			miss, hit := fail, ok
			if c.Op == Ne {
				miss, hit = ok, fail
			}
			a.emit(loadHi)
			a.jumpIf(bpf.JumpEqual, hi, a.here(), miss)
			a.emit(loadLo)
			a.jumpIf(bpf.JumpEqual, lo, hit, miss)
		case MaskedEq:
			a.emit(loadHi)
			a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: uint32(c.Mask >> 32)})
			a.jumpIf(bpf.JumpEqual, hi, a.here(), fail)
			a.emit(loadLo)
			a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: uint32(c.Mask)})
			a.jumpIf(bpf.JumpEqual, lo, ok, fail)
		case Gt, Ge, Lt, Le:
			// Gt/Ge hold when the high words say so, or they are equal and
			// the low words do; Lt/Le are their negations.
			yes, no := ok, fail
			test := bpf.JumpGreaterThan
			if c.Op == Ge || c.Op == Lt {
				test = bpf.JumpGreaterOrEqual
			}
			if c.Op == Lt || c.Op == Le {
				yes, no = fail, ok
			}
			a.emit(loadHi)
			a.jumpIf(bpf.JumpGreaterThan, hi, yes, a.here())
			a.jumpIf(bpf.JumpEqual, hi, a.here(), no)
			a.emit(loadLo)
			a.jumpIf(test, lo, yes, no)
		}
		a.bind(ok)
	}
}

// RuleError is a rule Check refuses.
type RuleError struct {
	Rule   int    // index in Filter.Rules; -1 for Default and Unknown
	Nr     uint32 // the rule's syscall
	Reason string
}

func (e *RuleError) Error() string {
	if e.Rule < 0 {
		return "filter: " + e.Reason
	}
	return fmt.Sprintf("rule %d (syscall %d): %s", e.Rule, e.Nr, e.Reason)
}

// Check reports what in f the compilers cannot agree on, as a *RuleError.
// Within one syscall, first-match order (this package) and libseccomp's
// tree (which has no order) decide alike only when the conditional rules
// share one action and an unconditional rule, if any, comes last as the
// fallback; and libseccomp compares each argument at most once per rule.
func (f Filter) Check() error {
	type seen struct {
		condAction Action
		hasCond    bool
		fallback   bool
	}
	state := make(map[uint32]*seen, len(f.Rules))
	for i, r := range f.Rules {
		fail := func(format string, a ...any) error {
			return &RuleError{Rule: i, Nr: r.Nr, Reason: fmt.Sprintf(format, a...)}
		}
		if err := checkAction(r.Action); err != nil {
			return fail("%v", err)
		}
		s := state[r.Nr]
		if s == nil {
			s = &seen{}
			state[r.Nr] = s
		}
		if s.fallback {
			return fail("comes after the syscall's unconditional rule, so it never applies")
		}
		if len(r.Conds) == 0 {
			s.fallback = true
			continue
		}
		if s.hasCond && s.condAction != r.Action {
			return fail("conditional rules of one syscall must share one action (%#x, then %#x)", uint32(s.condAction), uint32(r.Action))
		}
		s.hasCond, s.condAction = true, r.Action
		var args [6]bool
		for _, c := range r.Conds {
			if c.Op == MaskedEq && c.Value&^c.Mask != 0 {
				// Never true here; libseccomp would mask the value and
				// match. Surely a mistake in the policy either way.
				return fail("value %#x has bits outside mask %#x, so the rule could never match", c.Value, c.Mask)
			}
			if c.Arg >= 0 && c.Arg < len(args) {
				if args[c.Arg] {
					return fail("argument %d is compared twice; make two rules", c.Arg)
				}
				args[c.Arg] = true
			}
		}
	}
	for _, a := range []Action{f.Default, f.Unknown} {
		if err := checkAction(a); err != nil {
			return &RuleError{Rule: -1, Reason: err.Error()}
		}
	}
	if f.NoX32 && f.MaxNr >= x32Bit {
		return &RuleError{Rule: -1, Reason: fmt.Sprintf("MaxNr %#x reaches the x32 range", f.MaxNr)}
	}
	return nil
}

// MaxErrno is the kernel's MAX_ERRNO: the largest errno a filter can
// return; larger ones are capped to it.
const MaxErrno = 4095

// checkAction accepts the actions a policy may use.
func checkAction(a Action) error {
	switch a &^ 0xffff {
	case Allow, Log, KillProcess, KillThread:
		if a&0xffff != 0 {
			return fmt.Errorf("action %#x carries data it cannot use", uint32(a))
		}
		return nil
	case errnoBase, UserNotif:
		switch e := a & 0xffff; {
		case e == 0:
			return fmt.Errorf("action %#x has errno 0, which would fake success", uint32(a))
		case e >= MaxErrno:
			// The kernel caps errnos at MAX_ERRNO and Go's syscall
			// stubs read -4095 as a result; libseccomp refuses them.
			return fmt.Errorf("action %#x has errno %d, not below MAX_ERRNO (%d)", uint32(a), e, MaxErrno)
		}
		return nil
	}
	return fmt.Errorf("action %#x is not one of allow, log, kill, errno, notify", uint32(a))
}

// Notify returns the action that stops the syscall for the supervisor,
// which answers with e.
func Notify(e syscall.Errno) Action { return UserNotif | Action(uint32(e)&0xffff) }

// ContinueErrno is the errno that no policy may give a refusal (a
// policy's actions are checked against it): a notification carrying it
// is not a refusal but a syscall the supervisor records and lets run
// (Continue), as an audited execve is.
const ContinueErrno = MaxErrno - 1

// NotifyContinue is the action that stops the syscall for the supervisor,
// which records it and lets it run.
func NotifyContinue() Action { return Notify(ContinueErrno) }
