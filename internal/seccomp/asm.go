package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// label names a position in the program before it is known.
type label int

// insn is an instruction, or a jump to labels to be resolved.
type insn struct {
	ins      bpf.Instruction // when not a jump
	cond     bpf.JumpTest
	val      uint32
	jt       label // an unconditional jump's target
	isJumpIf bool
	isJump   bool
}

// asm assembles a program with labelled jumps. A conditional jump is laid
// out as a JumpIf over two unconditional jumps (each with a 32-bit offset),
// so no distance ever needs more than the 8 bits JumpIf has.
type asm struct {
	code []insn
	pos  []int // a label's instruction index, -1 until bound
}

func (a *asm) newLabel() label {
	a.pos = append(a.pos, -1)
	return label(len(a.pos) - 1)
}

// here is a label bound to the next instruction.
func (a *asm) here() label {
	l := a.newLabel()
	a.pos[l] = -2 // bound by the next emit; see jumpIf
	return l
}

func (a *asm) bind(l label) { a.pos[l] = len(a.code) }

func (a *asm) emit(i bpf.Instruction) { a.code = append(a.code, insn{ins: i}) }

func (a *asm) jump(to label) { a.code = append(a.code, insn{isJump: true, jt: to}) }

// jumpIf jumps to t when A cond val holds, else to f. A label made by here
// refers to the instruction after this jump.
func (a *asm) jumpIf(cond bpf.JumpTest, val uint32, t, f label) {
	a.code = append(a.code, insn{isJumpIf: true, cond: cond, val: val}, insn{isJump: true, jt: t}, insn{isJump: true, jt: f})
	next := len(a.code)
	for _, l := range []label{t, f} {
		if a.pos[l] == -2 {
			a.pos[l] = next
		}
	}
}

func (a *asm) assemble() ([]bpf.Instruction, error) {
	out := make([]bpf.Instruction, len(a.code))
	for i, c := range a.code {
		switch {
		case c.isJumpIf:
			out[i] = bpf.JumpIf{Cond: c.cond, Val: c.val, SkipTrue: 0, SkipFalse: 1}
		case c.isJump:
			to := a.pos[c.jt]
			if to <= i {
				return nil, fmt.Errorf("seccomp: jump from %d to %d is not forward", i, to)
			}
			out[i] = bpf.Jump{Skip: uint32(to - i - 1)}
		default:
			out[i] = c.ins
		}
	}
	return out, nil
}
