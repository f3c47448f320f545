//go:build libseccomp && linux && cgo

package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// How CompileLibseccomp uses libseccomp, and why.
//
// libseccomp's model differs from a Filter's, and libseccomp 2.5.4 gets
// some filters wrong; each point below was found by experiment and is
// pinned by TestLibseccompQuirks:
//
//   - It has no "numbers above MaxNr" range and no choice of what x32 and a
//     foreign architecture get; on x86-64 it sends numbers from 0x40000000
//     up (but -1) to its bad-architecture action, KILL_THREAD by default.
//   - A syscall with an unconditional rule loses its conditional rules,
//     whichever is added first: "ioctl(TIOCSTI) fails, other ioctls are
//     allowed" compiles to "ioctl is allowed".
//   - Two conditional rules of one syscall that compare the same argument
//     and others besides can be merged wrongly, both ways: with rules
//     (a0 != 7 && a2 == 0) and (a0 != 9 && a1 == 7) it matches (7, 8, 0),
//     which neither rule does; with (a0 == 7 && a2 == 0) and
//     (a0 != 9 && a1 == 7) it misses (7, 8, 0), which the first matches.
//     Adding (a0 != 1 && a1 != 8), then (a0 != 1 && a1 != 1<<32), never
//     returns from seccomp_rule_add; and its time grows about threefold
//     per such rule (8 rules of three Ne each: 25 ms).
//   - Its actions are not ours: no data for NOTIFY, no errno from 4095 up
//     (seccomp_rule_add says EINVAL), KILL_PROCESS, LOG and NOTIFY only
//     where the running kernel has them, and no rule may carry the
//     filter's default action.
//   - A MaskedEq whose value has bits outside the mask matches nothing in a
//     Filter; libseccomp masks the value too, so it matches.
//
// So libseccomp is only given problems it gets right, and its programs
// are then put in ours:
//
//   - Every action reaches libseccomp as a stand-in no Filter uses:
//     SCMP_ACT_TRACE(i), i an index into a table of outcomes, and
//     SCMP_ACT_TRAP as the default. Every "ret K" of an exported program is
//     replaced by the outcome K stands for: an action, or a forward jump to
//     a later program (BPF_JA has 32 bits). A K that stands for nothing
//     fails the compilation.
//   - No libseccomp program holds more than one rule of a syscall. The
//     first holds every syscall's unconditional rule, and the conditional
//     rule of a syscall that has only one and no fallback; its default is
//     Default. A syscall with more conditional rules, or with one and a
//     fallback, gets there a stand-in for "go to layer 1", and its k-th
//     conditional rule goes in layer k, whose default goes on to the next
//     layer; after the last layer, one more program holds the fallbacks
//     as unconditional rules, with Default as its default. First match
//     holds because a syscall's conditional rules share one action.
//   - MaskedEq rules that can never match are left out.
//   - Our own prologue comes first: a foreign architecture and (NoX32) the
//     x32 bit kill the process, numbers above MaxNr get Unknown. libseccomp's
//     programs, which load what they test themselves, follow it unchanged.
//
// The search for the number and the argument comparisons are libseccomp's
// own code.

// The stand-in return values: SECCOMP_RET_TRAP and SECCOMP_RET_TRACE.
const (
	standInDefault = 0x00030000
	standInTrace   = 0x7ff00000
)

// libseccompMu serializes our use of libseccomp, which documents no
// guarantee for concurrent filter contexts. A policy compiles once.
var libseccompMu sync.Mutex

// outcome is what a stand-in means: an action, or a jump to a program.
type outcome struct {
	action Action
	jump   int // > 0: to the program of this index; action is then unused
}

// lsRule is one seccomp_rule_add_exact call.
type lsRule struct {
	index int // in Filter.Rules, for errors
	nr    uint32
	conds []Cond
	code  uint16 // the stand-in SCMP_ACT_TRACE(code)
}

// lsProgram is one libseccomp filter context: its rules and what its
// default stands for.
type lsProgram struct {
	rules []lsRule
	deflt outcome
}

// CompileLibseccomp returns f as a BPF program that libseccomp generated,
// deciding every (arch, nr, args) as Compile's program does.
//
// It refuses what Check refuses, a filter for another architecture than
// the one it runs on (libseccomp compiles for the native one only here),
// and a MaxNr of 0x40000000 or more.
func CompileLibseccomp(f Filter) ([]bpf.Instruction, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if NativeArch == 0 || f.Arch != NativeArch {
		return nil, fmt.Errorf("libseccomp: the filter is for architecture %#x; this build compiles for the native one (%#x) only", f.Arch, uint32(NativeArch))
	}
	if f.MaxNr >= x32Bit {
		return nil, fmt.Errorf("libseccomp: highest syscall number %#x: libseccomp sends numbers from %#x up to its bad-architecture action", f.MaxNr, x32Bit)
	}
	progs, outs, err := plan(f)
	if err != nil {
		return nil, err
	}

	libseccompMu.Lock()
	defer libseccompMu.Unlock()
	code := make([][]bpf.Instruction, len(progs))
	for i, p := range progs {
		if code[i], err = generate(p, f.Arch); err != nil {
			return nil, err
		}
	}
	return link(f, progs, code, outs)
}

// plan splits f into libseccomp programs, none with two rules of one
// syscall: the first, the layers, and the fallbacks' program (see the
// comment at the top). It returns them with the outcomes their stand-ins
// mean.
func plan(f Filter) ([]lsProgram, []outcome, error) {
	type syscallRules struct {
		conds       [][]Cond
		condIndex   []int
		action      Action // of the conditional rules
		fallback    Action
		hasFallback bool
		index       int // the fallback's rule
	}
	byNr := map[uint32]*syscallRules{}
	for i, r := range f.Rules {
		if r.Nr > f.MaxNr {
			return nil, nil, fmt.Errorf("rule %d: syscall %d is above the policy's highest known number %d", i, r.Nr, f.MaxNr)
		}
		for _, c := range r.Conds {
			if c.Arg < 0 || c.Arg > 5 {
				return nil, nil, fmt.Errorf("rule %d (syscall %d): argument %d: there are 6 (0-5)", i, r.Nr, c.Arg)
			}
			if c.Op < Eq || c.Op > MaskedEq {
				return nil, nil, fmt.Errorf("rule %d (syscall %d): unknown comparison %d", i, r.Nr, c.Op)
			}
		}
		s := byNr[r.Nr]
		if s == nil {
			s = &syscallRules{}
			byNr[r.Nr] = s
		}
		switch {
		case s.hasFallback:
			// Check refuses this too.
			return nil, nil, fmt.Errorf("rule %d (syscall %d): comes after the syscall's unconditional rule", i, r.Nr)
		case len(r.Conds) == 0:
			s.fallback, s.hasFallback, s.index = r.Action, true, i
		case len(s.conds) > 0 && s.action != r.Action:
			return nil, nil, fmt.Errorf("rule %d (syscall %d): conditional rules of one syscall must share one action", i, r.Nr)
		case neverMatches(r.Conds):
			// libseccomp would make it match; first-match skips it.
		default:
			s.conds, s.condIndex, s.action = append(s.conds, r.Conds), append(s.condIndex, i), r.Action
		}
	}
	nrs := make([]uint32, 0, len(byNr))
	for nr := range byNr {
		nrs = append(nrs, nr)
	}
	sort.Slice(nrs, func(i, j int) bool { return nrs[i] < nrs[j] })

	// Stand-in 0 is the bad-architecture action, which our prologue makes
	// unreachable.
	outs := []outcome{{action: KillProcess}}
	codes := map[outcome]uint16{outs[0]: 0}
	code := func(o outcome) uint16 {
		c, ok := codes[o]
		if !ok {
			c = uint16(len(outs)) // at most 2+len(f.Rules) outcomes; checked below
			codes[o] = c
			outs = append(outs, o)
		}
		return c
	}
	first := lsProgram{deflt: outcome{action: f.Default}}
	var layers [][]lsRule
	var fallbacks []lsRule
	for _, nr := range nrs {
		s := byNr[nr]
		switch {
		case len(s.conds) == 0 && !s.hasFallback:
		case len(s.conds) == 0 || s.hasFallback && s.fallback == s.action:
			first.rules = append(first.rules, lsRule{index: s.index, nr: nr, code: code(outcome{action: s.fallback})})
		case len(s.conds) == 1 && !s.hasFallback:
			first.rules = append(first.rules, lsRule{index: s.condIndex[0], nr: nr, conds: s.conds[0], code: code(outcome{action: s.action})})
		default:
			first.rules = append(first.rules, lsRule{index: s.condIndex[0], nr: nr, code: code(outcome{jump: 1})})
			for k, conds := range s.conds {
				if k == len(layers) {
					layers = append(layers, nil)
				}
				layers[k] = append(layers[k], lsRule{index: s.condIndex[k], nr: nr, conds: conds, code: code(outcome{action: s.action})})
			}
			if s.hasFallback {
				fallbacks = append(fallbacks, lsRule{index: s.index, nr: nr, code: code(outcome{action: s.fallback})})
			}
		}
	}
	if len(outs) > 0x10000 {
		return nil, nil, errors.New("libseccomp: more than 65536 distinct outcomes")
	}
	progs := []lsProgram{first}
	if len(layers) > 0 {
		for _, rules := range layers {
			progs = append(progs, lsProgram{rules: rules, deflt: outcome{jump: len(progs) + 1}})
		}
		progs = append(progs, lsProgram{rules: fallbacks, deflt: outcome{action: f.Default}})
	}
	return progs, outs, nil
}

// neverMatches reports a MaskedEq whose value has bits outside its mask.
func neverMatches(conds []Cond) bool {
	for _, c := range conds {
		if c.Op == MaskedEq && c.Value&^c.Mask != 0 {
			return true
		}
	}
	return false
}

var compareOps = map[Op]libseccomp.ScmpCompareOp{
	Eq:       libseccomp.CompareEqual,
	Ne:       libseccomp.CompareNotEqual,
	Gt:       libseccomp.CompareGreater,
	Ge:       libseccomp.CompareGreaterEqual,
	Lt:       libseccomp.CompareLess,
	Le:       libseccomp.CompareLessOrEqual,
	MaskedEq: libseccomp.CompareMaskedEqual,
}

// generate has libseccomp compile p and returns its program as exported,
// its stand-ins not yet replaced.
func generate(p lsProgram, arch uint32) ([]bpf.Instruction, error) {
	ctx, err := libseccomp.NewFilter(libseccomp.ActTrap)
	if err != nil {
		return nil, fmt.Errorf("libseccomp: %w", err)
	}
	defer ctx.Release()
	// Load-time attributes (TSYNC, no_new_privs, log) do not change the
	// exported program, which Install loads on its own terms. The binary
	// tree (libseccomp 2.5) is a search by number, as Compile's is; older
	// versions sort by priority, which decides alike.
	_ = ctx.SetOptimize(2)
	if err := ctx.SetBadArchAction(libseccomp.ActTrace.SetReturnCode(0)); err != nil {
		return nil, fmt.Errorf("libseccomp: bad-architecture action: %w", err)
	}
	for _, r := range p.rules {
		action := libseccomp.ActTrace.SetReturnCode(int16(r.code))
		var err error
		if len(r.conds) == 0 {
			err = ctx.AddRuleExact(libseccomp.ScmpSyscall(r.nr), action)
		} else {
			conds := make([]libseccomp.ScmpCondition, len(r.conds))
			for i, c := range r.conds {
				values := []uint64{c.Value}
				if c.Op == MaskedEq {
					// The C API's order: (arg & datum_a) == datum_b.
					values = []uint64{c.Mask, c.Value}
				}
				if conds[i], err = libseccomp.MakeCondition(uint(c.Arg), compareOps[c.Op], values...); err != nil {
					break
				}
			}
			if err == nil {
				err = ctx.AddRuleConditionalExact(libseccomp.ScmpSyscall(r.nr), action, conds)
			}
		}
		if err != nil {
			// libseccomp-golang words every EINVAL (a bad errno too) as
			// "two checks on same syscall argument".
			return nil, fmt.Errorf("libseccomp: rule %d (syscall %d): %w", r.index, r.nr, err)
		}
	}
	b, err := exportBPF(ctx)
	if err != nil {
		return nil, err
	}
	if len(b)/insnSize > 4096 {
		return nil, ErrTooLong
	}
	raw, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("libseccomp: exported program: %w", err)
	}
	prog := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		prog[i] = r.Disassemble()
	}
	if err := selfContained(prog, arch); err != nil {
		return nil, fmt.Errorf("libseccomp: exported program: %w", err)
	}
	return prog, nil
}

// exportBPF returns what seccomp_export_bpf writes: struct sock_filter
// records in the machine's byte order. (seccomp_export_bpf_mem is 2.6.)
func exportBPF(ctx *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("libseccomp: export: memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "seccomp-bpf")
	defer file.Close()
	if err := ctx.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("libseccomp: export: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("libseccomp: export: %w", err)
	}
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("libseccomp: export: %w", err)
	}
	return b, nil
}

// selfContained checks what splicing prog after other code relies on: it
// starts by testing the architecture it was asked for, and every jump
// lands inside it.
func selfContained(prog []bpf.Instruction, arch uint32) error {
	if len(prog) < 2 || prog[0] != (bpf.LoadAbsolute{Off: offArch, Size: 4}) {
		return errors.New("does not start by loading the architecture")
	}
	if j, ok := prog[1].(bpf.JumpIf); !ok || j.Val != arch {
		return fmt.Errorf("does not test for architecture %#x first (%v)", arch, prog[1])
	}
	for i, ins := range prog {
		var skips []uint32
		switch j := ins.(type) {
		case bpf.Jump:
			skips = []uint32{j.Skip}
		case bpf.JumpIf:
			skips = []uint32{uint32(j.SkipTrue), uint32(j.SkipFalse)}
		case bpf.JumpIfX:
			skips = []uint32{uint32(j.SkipTrue), uint32(j.SkipFalse)}
		case bpf.RawInstruction:
			return fmt.Errorf("instruction %d (%#v) is not one x/net/bpf knows", i, j)
		}
		for _, s := range skips {
			if uint64(i)+1+uint64(s) >= uint64(len(prog)) {
				return fmt.Errorf("instruction %d jumps past the end", i)
			}
		}
	}
	return nil
}

// link lays out our prologue and the programs in order, and replaces every
// stand-in by what it means.
func link(f Filter, progs []lsProgram, code [][]bpf.Instruction, outs []outcome) ([]bpf.Instruction, error) {
	out := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: f.Arch, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(KillProcess)},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if f.NoX32 {
		out = append(out,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
			bpf.RetConstant{Val: uint32(KillProcess)})
	}
	out = append(out,
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: f.MaxNr, SkipFalse: 1},
		bpf.RetConstant{Val: uint32(f.Unknown)})

	start := make([]int, len(code))
	n := len(out)
	for i, c := range code {
		start[i] = n
		n += len(c)
	}
	if n > 4096 {
		return nil, ErrTooLong
	}
	for p, c := range code {
		for i, ins := range c {
			at := start[p] + i
			var o outcome
			switch r := ins.(type) {
			case bpf.RetConstant:
				switch {
				case r.Val == standInDefault:
					o = progs[p].deflt
				case r.Val&0xffff0000 == standInTrace && int(r.Val&0xffff) < len(outs):
					o = outs[r.Val&0xffff]
				default:
					return nil, fmt.Errorf("libseccomp: program %d, instruction %d returns %#x, which stands for nothing", p, i, r.Val)
				}
			case bpf.RetA:
				return nil, fmt.Errorf("libseccomp: program %d, instruction %d returns A", p, i)
			default:
				out = append(out, ins)
				continue
			}
			switch {
			case o.jump == 0:
				ins = bpf.RetConstant{Val: uint32(o.action)}
			case o.jump > p && o.jump < len(code):
				ins = bpf.Jump{Skip: uint32(start[o.jump] - at - 1)}
			default:
				return nil, fmt.Errorf("libseccomp: program %d jumps to program %d", p, o.jump)
			}
			out = append(out, ins)
		}
	}
	return out, nil
}
