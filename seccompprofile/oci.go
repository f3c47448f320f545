package seccompprofile

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// FromOCI converts an OCI runtime-spec seccomp profile to a policy.
// It returns the policy, the sorted names of the profile's syscalls that
// this architecture's table does not know (left out of the policy, so
// their numbers, if the kernel has them, get Unknown: ENOSYS under an
// errno default, as on a kernel without them), and an error wrapping
// [ErrInvalid], a *[Error] that names the field, for a profile that is
// malformed or asks for what the sandbox cannot do:
//
//   - SCMP_ACT_ALLOW is [sandbox.ActAllow]; SCMP_ACT_ERRNO is
//     [sandbox.ActNotify](errnoRet), EPERM when errnoRet is unset (the
//     program sees what it would under runc, and the sandbox reports it);
//     SCMP_ACT_KILL, SCMP_ACT_KILL_THREAD and SCMP_ACT_KILL_PROCESS are
//     [sandbox.ActKill] (the whole process: a process missing a thread is
//     in no state to go on); SCMP_ACT_LOG is [sandbox.ActLog];
//     SCMP_ACT_NOTIFY is ActNotify(EPERM), since the sandbox's supervisor
//     never lets a syscall run. SCMP_ACT_TRAP and SCMP_ACT_TRACE are
//     refused. defaultAction and defaultErrnoRet convert alike.
//   - Unknown, which the profile has no field for, is ActNotify(ENOSYS)
//     when the default fails with an errno, and the default otherwise.
//   - architectures must be empty or include this host's
//     (SCMP_ARCH_X86_64 on amd64, SCMP_ARCH_AARCH64 on arm64); other
//     architectures are accepted and their syscalls killed.
//   - SCMP_CMP_MASKED_EQ holds when arg & value == valueTwo & value: value
//     is the mask (libseccomp's datum_a), valueTwo the expected bits, and
//     libseccomp drops valueTwo's bits outside the mask. valueTwo is unused
//     by the other comparisons.
//   - A rule that compares one argument twice is split into one rule per
//     comparison, any of which matching applies the action: runc does
//     this, because libseccomp cannot compare an argument twice in a rule.
//   - The rules of one syscall must say one thing: at most one
//     unconditional action, and one action for its conditional rules
//     (those with the unconditional action, or with the default when there
//     is none, change nothing and are dropped).
//   - flags are accepted and have no effect where they change no decision:
//     SECCOMP_FILTER_FLAG_TSYNC (the sandbox always filters every thread),
//     _LOG (logging), _SPEC_ALLOW (leaving a speculation mitigation on)
//     and _WAIT_KILLABLE_RECV (the sandbox's supervisor answers at once);
//     others are refused. listenerPath is refused: the sandbox answers
//     notifications itself and hands them to no agent.
//
// The policy has the shape [sandbox.SeccompPolicy] requires, but
// [sandbox.New] still refuses it if it blocks what the sandbox's init needs
// once the filter is loaded (execve, close, and sendmsg when an action
// reports). On a GOARCH without a syscall table the error is a
// *[sandbox.UnsupportedError].
func FromOCI(s *specs.LinuxSeccomp) (*sandbox.SeccompPolicy, []string, error) {
	if s == nil {
		return nil, nil, &Error{Reason: "is nil; pass a profile, or leave Options.Seccomp nil for the default"}
	}
	prof := &profile{
		defaultAction:    s.DefaultAction,
		defaultErrnoRet:  s.DefaultErrnoRet,
		listenerPath:     s.ListenerPath,
		listenerMetadata: s.ListenerMetadata,
	}
	for i, a := range s.Architectures {
		prof.arches = append(prof.arches, field{fmt.Sprintf("architectures[%d]", i), string(a)})
	}
	for i, f := range s.Flags {
		prof.flags = append(prof.flags, field{fmt.Sprintf("flags[%d]", i), string(f)})
	}
	for i, sc := range s.Syscalls {
		e := profileSyscall{
			field:    fmt.Sprintf("syscalls[%d]", i),
			action:   sc.Action,
			errnoRet: sc.ErrnoRet,
			args:     sc.Args,
		}
		for j, name := range sc.Names {
			e.names = append(e.names, field{fmt.Sprintf("%s.names[%d]", e.field, j), name})
		}
		prof.syscalls = append(prof.syscalls, e)
	}
	return prof.policy()
}

// ToOCI returns p as an OCI runtime-spec seccomp profile (the shape Docker's
// profiles also take): defaultAction and defaultErrnoRet from Default,
// architectures this host's alone, and one syscalls entry per distinct
// action and arguments, in the order of p's rules, naming every syscall
// that has them.
//
// The shape loses two things. [sandbox.ActErrno](e) and
// [sandbox.ActNotify](e) both become SCMP_ACT_ERRNO with errnoRet e: the
// program sees the same, but which refusals the sandbox reports is lost
// ([FromOCI] reports them all). Unknown has no field: FromOCI makes it
// ActNotify(ENOSYS) under a
// default that fails with an errno and the default otherwise, and runc
// answers ENOSYS above the highest syscall a profile names.
//
// Rules that never apply are left out: those that follow their syscall's
// unconditional rule, and those with a [sandbox.ArgMaskedEq] whose Value
// has bits outside its Mask (libseccomp, and so FromOCI, would drop the
// bits and apply the rule). Runtimes may read the result more loosely than
// FromOCI does: runc with libseccomp 2.5 drops the conditional rules of a
// syscall that also has an unconditional rule, and every rule whose action
// is the default, so that [sandbox.DefaultSeccompPolicy]'s refusal of
// ioctl(TIOCSTI) is lost there. An action that is not one
// exports as its String, which no runtime accepts.
func ToOCI(p *sandbox.SeccompPolicy) *specs.LinuxSeccomp {
	s := &specs.LinuxSeccomp{}
	s.DefaultAction, s.DefaultErrnoRet = ociAction(p.Default)
	if a := nativeOCIArch(); a != "" {
		s.Architectures = []specs.Arch{a}
	}
	index := map[string]int{}
	closed := map[string]bool{} // syscalls whose unconditional rule came
	for _, r := range p.Rules {
		// A rule that compares arg & mask with bits outside the mask
		// never applies; libseccomp would drop those bits and apply it.
		if slices.ContainsFunc(r.Args, func(c sandbox.ArgCond) bool { return c.Op == sandbox.ArgMaskedEq && c.Value&^c.Mask != 0 }) {
			continue
		}
		// Rules after a syscall's unconditional rule never apply (the
		// first match decides), and a profile has no order to say so.
		var names []string
		for _, name := range r.Names {
			if !closed[name] && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		if len(r.Args) == 0 {
			for _, name := range names {
				closed[name] = true
			}
		}
		if len(names) == 0 {
			continue
		}
		action, errnoRet := ociAction(r.Action)
		entry := specs.LinuxSyscall{Action: action, ErrnoRet: errnoRet}
		for _, c := range r.Args {
			a := specs.LinuxSeccompArg{Index: uint(c.Index), Value: c.Value, Op: ociOps[c.Op]}
			if c.Op == sandbox.ArgMaskedEq {
				a.Value, a.ValueTwo = c.Mask, c.Value
			}
			if a.Op == "" {
				a.Op = specs.LinuxSeccompOperator(c.Op.String())
			}
			entry.Args = append(entry.Args, a)
		}
		key := fmt.Sprint(action, entry.Args)
		if errnoRet != nil {
			key += fmt.Sprint(" errno ", *errnoRet)
		}
		i, ok := index[key]
		if !ok {
			i = len(s.Syscalls)
			index[key] = i
			s.Syscalls = append(s.Syscalls, entry)
		}
		for _, name := range names {
			if !slices.Contains(s.Syscalls[i].Names, name) {
				s.Syscalls[i].Names = append(s.Syscalls[i].Names, name)
			}
		}
	}
	return s
}

// ociAction is a's OCI action and errnoRet.
func ociAction(a sandbox.SeccompAction) (specs.LinuxSeccompAction, *uint) {
	switch {
	case a == sandbox.ActAllow:
		return specs.ActAllow, nil
	case a == sandbox.ActKill:
		return specs.ActKillProcess, nil
	case a == sandbox.ActLog:
		return specs.ActLog, nil
	case a.Errno() != 0: // ActErrno or ActNotify
		e := uint(a.Errno())
		return specs.ActErrno, &e
	}
	return specs.LinuxSeccompAction(a.String()), nil
}

var ociOps = map[sandbox.ArgOp]specs.LinuxSeccompOperator{
	sandbox.ArgEq: specs.OpEqualTo, sandbox.ArgNe: specs.OpNotEqual, sandbox.ArgGt: specs.OpGreaterThan, sandbox.ArgGe: specs.OpGreaterEqual,
	sandbox.ArgLt: specs.OpLessThan, sandbox.ArgLe: specs.OpLessEqual, sandbox.ArgMaskedEq: specs.OpMaskedEqual,
}

// nativeOCIArch is this GOARCH's SCMP_ARCH_* name, or "" where there is no
// syscall table.
func nativeOCIArch() specs.Arch {
	switch {
	case seccomp.NativeArch == 0:
		return ""
	case runtime.GOARCH == "amd64":
		return specs.ArchX86_64
	case runtime.GOARCH == "arm64":
		return specs.ArchAARCH64
	}
	return ""
}

// ociArches are the architectures the runtime-spec lists (libseccomp
// 2.6's).
var ociArches = []specs.Arch{
	specs.ArchX86, specs.ArchX86_64, specs.ArchX32, specs.ArchARM, specs.ArchAARCH64,
	specs.ArchMIPS, specs.ArchMIPS64, specs.ArchMIPS64N32, specs.ArchMIPSEL, specs.ArchMIPSEL64,
	specs.ArchMIPSEL64N32, specs.ArchPPC, specs.ArchPPC64, specs.ArchPPC64LE, specs.ArchS390,
	specs.ArchS390X, specs.ArchPARISC, specs.ArchPARISC64, specs.ArchRISCV64, specs.ArchLOONGARCH64,
	specs.ArchM68K, specs.ArchSH, specs.ArchSHEB,
}

// ociFlags are the seccomp(2) flags a profile may ask for, all without
// effect here:
//   - TSYNC puts the filter on every thread, which the sandbox always
//     does (a filter on one thread of a Go program protects nothing).
//   - LOG has the kernel log the actions it takes other than allow; it
//     changes no decision, and the sandbox reports refusals itself.
//   - SPEC_ALLOW turns off the speculative store bypass mitigation that
//     loading a filter turns on; keeping the mitigation costs some speed
//     and changes no decision.
//   - WAIT_KILLABLE_RECV keeps non-fatal signals from interrupting a
//     notified syscall once the supervisor has received it; the sandbox's
//     supervisor answers at once, so nothing waits long enough to tell.
//
// Any other flag is refused, as runc refuses flags it does not know.
var ociFlags = []string{
	"SECCOMP_FILTER_FLAG_TSYNC",
	string(specs.LinuxSeccompFlagLog),
	string(specs.LinuxSeccompFlagSpecAllow),
	string(specs.LinuxSeccompFlagWaitKillableRecv),
}

// field is a value of a profile and its path, for errors.
type field struct {
	path  string
	value string
}

// profile is an OCI profile with the path of every field, whichever format
// it came in.
type profile struct {
	defaultAction    specs.LinuxSeccompAction
	defaultErrnoRet  *uint
	arches           []field
	flags            []field
	listenerPath     string
	listenerMetadata string
	syscalls         []profileSyscall
}

// profileSyscall is one entry of a profile's syscalls.
type profileSyscall struct {
	field    string // "syscalls[3]"
	names    []field
	action   specs.LinuxSeccompAction
	errnoRet *uint
	args     []specs.LinuxSeccompArg
}

// profileRule is one rule of one syscall, and the entry it came from.
type profileRule struct {
	action sandbox.SeccompAction
	args   []sandbox.ArgCond
	field  string                   // the entry's path
	raw    specs.LinuxSeccompAction // its action as the profile spells it
}

// syscallRules are the rules a profile gives one syscall.
type syscallRules struct {
	conds    []profileRule
	fallback *profileRule // the unconditional rule
}

// policy converts prof; see FromOCI.
func (prof *profile) policy() (*sandbox.SeccompPolicy, []string, error) {
	native := nativeOCIArch()
	if native == "" {
		return nil, nil, &sandbox.UnsupportedError{Feature: "seccomp", Reason: "no syscall table for " + runtime.GOARCH,
			Hint: "run on amd64 or arm64"}
	}
	if prof.defaultAction == "" {
		return nil, nil, &Error{Field: "defaultAction", Reason: "is missing"}
	}
	def, err := profileAction("defaultAction", prof.defaultAction, "defaultErrnoRet", prof.defaultErrnoRet)
	if err != nil {
		return nil, nil, err
	}
	p := &sandbox.SeccompPolicy{Default: def, Unknown: def}
	if def.Errno() != 0 {
		p.Unknown = sandbox.ActNotify(syscall.ENOSYS)
	}

	hasNative := len(prof.arches) == 0
	var listed []string
	for _, a := range prof.arches {
		if !slices.Contains(ociArches, specs.Arch(a.value)) {
			return nil, nil, &Error{Field: a.path, Value: a.value, Reason: "is not an architecture (SCMP_ARCH_X86_64, SCMP_ARCH_AARCH64, ...)"}
		}
		hasNative = hasNative || a.value == string(native)
		listed = append(listed, a.value)
	}
	if !hasNative {
		return nil, nil, &Error{Field: "architectures", Value: strings.Join(listed, ","),
			Reason: "leaves out " + string(native) + ", this host's architecture: the profile is for another machine"}
	}
	for _, f := range prof.flags {
		if !slices.Contains(ociFlags, f.value) {
			return nil, nil, &Error{Field: f.path, Value: f.value, Reason: "is not a seccomp filter flag the sandbox knows"}
		}
	}
	if prof.listenerPath != "" {
		return nil, nil, &Error{Field: "listenerPath", Value: prof.listenerPath,
			Reason: "is not supported: the sandbox answers SCMP_ACT_NOTIFY itself (with EPERM) and hands the listener to no agent"}
	}
	if prof.listenerMetadata != "" {
		return nil, nil, &Error{Field: "listenerMetadata", Value: prof.listenerMetadata, Reason: "is set without listenerPath"}
	}

	bySyscall := map[string]*syscallRules{}
	var order []string
	unknown := map[string]bool{}
	for _, e := range prof.syscalls {
		action, err := profileAction(e.field+".action", e.action, e.field+".errnoRet", e.errnoRet)
		if err != nil {
			return nil, nil, err
		}
		args, err := profileArgs(e.field, e.args)
		if err != nil {
			return nil, nil, err
		}
		if len(e.names) == 0 {
			return nil, nil, &Error{Field: e.field + ".names", Reason: "is empty; name at least one syscall"}
		}
		rule := profileRule{action: action, args: args, field: e.field, raw: e.action}
		for _, name := range e.names {
			if name.value == "" {
				return nil, nil, &Error{Field: name.path, Reason: "is empty"}
			}
			if _, ok := seccomp.Number(name.value); !ok {
				unknown[name.value] = true
				continue
			}
			s := bySyscall[name.value]
			if s == nil {
				s = &syscallRules{}
				bySyscall[name.value] = s
				order = append(order, name.value)
			}
			switch {
			case len(args) > 0:
				s.conds = append(s.conds, rule)
			case s.fallback == nil:
				r := rule
				s.fallback = &r
			case s.fallback.action != action:
				return nil, nil, &Error{Field: e.field + ".action", Value: string(e.action),
					Reason: fmt.Sprintf("sets %s to %s unconditionally, and %s set it to %s; one syscall has one unconditional action",
						name.value, action, s.fallback.field, s.fallback.action)}
			}
		}
	}

	// Conditional rules first, then unconditional ones: each syscall's
	// rules then come in the shape sandbox.SeccompPolicy requires. Rules with the
	// same action and arguments share one sandbox.SyscallRule.
	var conds, fallbacks ruleGroups
	for _, name := range order {
		s := bySyscall[name]
		fallback := p.Default
		if s.fallback != nil {
			fallback = s.fallback.action
		}
		var first *profileRule
		for i, r := range s.conds {
			if r.action == fallback {
				continue
			}
			if first == nil {
				first = &s.conds[i]
			} else if r.action != first.action {
				return nil, nil, &Error{Field: r.field + ".action", Value: string(r.raw),
					Reason: fmt.Sprintf("sets %s to %s on a condition, and %s set it to %s on another; the conditional rules of one syscall must share one action",
						name, r.action, first.field, first.action)}
			}
			for _, args := range splitArgs(r.args) {
				conds.add(name, r.action, args)
			}
		}
		if fallback != p.Default {
			fallbacks.add(name, fallback, nil)
		}
	}
	p.Rules = append(conds.rules, fallbacks.rules...)

	names := make([]string, 0, len(unknown))
	for name := range unknown {
		names = append(names, name)
	}
	slices.Sort(names)
	return p, names, nil
}

// ruleGroups collects rules, one SyscallRule per action and arguments, in
// the order they first appear.
type ruleGroups struct {
	rules []sandbox.SyscallRule
	index map[string]int
}

func (g *ruleGroups) add(name string, action sandbox.SeccompAction, args []sandbox.ArgCond) {
	key := fmt.Sprint(uint32(action), args)
	if g.index == nil {
		g.index = map[string]int{}
	}
	i, ok := g.index[key]
	if !ok {
		i = len(g.rules)
		g.index[key] = i
		g.rules = append(g.rules, sandbox.SyscallRule{Action: action, Args: slices.Clone(args)})
	}
	if !slices.Contains(g.rules[i].Names, name) {
		g.rules[i].Names = append(g.rules[i].Names, name)
	}
}

// splitArgs returns the rules that args stand for: args itself, or, when
// it compares one argument twice, one rule per comparison. This is runc's
// reading (libcontainer/seccomp: "revert to old behavior, adding each
// condition as a separate rule"): any of the comparisons holding applies
// the action.
func splitArgs(args []sandbox.ArgCond) [][]sandbox.ArgCond {
	var seen [6]bool
	twice := false
	for _, c := range args {
		twice = twice || seen[c.Index]
		seen[c.Index] = true
	}
	if !twice {
		return [][]sandbox.ArgCond{args}
	}
	out := make([][]sandbox.ArgCond, len(args))
	for i, c := range args {
		out[i] = []sandbox.ArgCond{c}
	}
	return out
}

// profileAction converts an action and its errnoRet.
func profileAction(path string, a specs.LinuxSeccompAction, errnoPath string, errnoRet *uint) (sandbox.SeccompAction, error) {
	if errnoRet != nil && a != specs.ActErrno && a != specs.ActTrace {
		return 0, &Error{Field: errnoPath, Value: strconv.FormatUint(uint64(*errnoRet), 10),
			Reason: "is given with " + string(a) + "; only SCMP_ACT_ERRNO takes an errno"}
	}
	switch a {
	case specs.ActAllow:
		return sandbox.ActAllow, nil
	case specs.ActKill, specs.ActKillThread, specs.ActKillProcess:
		return sandbox.ActKill, nil
	case specs.ActLog:
		return sandbox.ActLog, nil
	case specs.ActNotify:
		return sandbox.ActNotify(syscall.EPERM), nil
	case specs.ActErrno:
		if errnoRet == nil {
			return sandbox.ActNotify(syscall.EPERM), nil
		}
		switch e := *errnoRet; {
		case e == 0:
			return 0, &Error{Field: errnoPath, Value: "0", Reason: "would make the refused syscall appear to succeed; the sandbox does not fake success"}
		case e > seccomp.MaxErrno:
			return 0, &Error{Field: errnoPath, Value: strconv.FormatUint(uint64(e), 10), Reason: "is above 4095, the kernel's MAX_ERRNO"}
		default:
			return sandbox.ActNotify(syscall.Errno(e)), nil
		}
	case specs.ActTrap:
		return 0, &Error{Field: path, Value: string(a),
			Reason: "is not supported: it sends SIGSYS, which the program may catch and carry on; use SCMP_ACT_ERRNO or SCMP_ACT_KILL"}
	case specs.ActTrace:
		return 0, &Error{Field: path, Value: string(a),
			Reason: "is not supported: it needs a ptrace tracer, which the sandbox does not run (without one the kernel fails the syscall with ENOSYS); use SCMP_ACT_ERRNO"}
	case "":
		return 0, &Error{Field: path, Reason: "is missing"}
	}
	return 0, &Error{Field: path, Value: string(a),
		Reason: "is not an action (SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL, SCMP_ACT_KILL_PROCESS, SCMP_ACT_KILL_THREAD, SCMP_ACT_LOG or SCMP_ACT_NOTIFY)"}
}

var profileOps = map[specs.LinuxSeccompOperator]sandbox.ArgOp{
	specs.OpEqualTo: sandbox.ArgEq, specs.OpNotEqual: sandbox.ArgNe, specs.OpGreaterThan: sandbox.ArgGt, specs.OpGreaterEqual: sandbox.ArgGe,
	specs.OpLessThan: sandbox.ArgLt, specs.OpLessEqual: sandbox.ArgLe, specs.OpMaskedEqual: sandbox.ArgMaskedEq,
}

// profileArgs converts the args of the entry at path.
func profileArgs(path string, args []specs.LinuxSeccompArg) ([]sandbox.ArgCond, error) {
	var conds []sandbox.ArgCond
	for i, a := range args {
		at := fmt.Sprintf("%s.args[%d]", path, i)
		if a.Index > 5 {
			return nil, &Error{Field: at + ".index", Value: strconv.FormatUint(uint64(a.Index), 10), Reason: "is not 0 to 5: a syscall has six arguments"}
		}
		op, ok := profileOps[a.Op]
		if !ok {
			return nil, &Error{Field: at + ".op", Value: string(a.Op),
				Reason: "is not a comparison (SCMP_CMP_EQ, SCMP_CMP_NE, SCMP_CMP_LT, SCMP_CMP_LE, SCMP_CMP_GT, SCMP_CMP_GE or SCMP_CMP_MASKED_EQ)"}
		}
		c := sandbox.ArgCond{Index: int(a.Index), Op: op, Value: a.Value}
		if op == sandbox.ArgMaskedEq {
			c.Mask, c.Value = a.Value, a.ValueTwo&a.Value
		}
		conds = append(conds, c)
	}
	return conds, nil
}
