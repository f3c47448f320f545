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
	jt, jf   label // a conditional jump's targets; jt alone for ja
	isJumpIf bool
	isJump   bool
}

// asm assembles a program with labelled forward jumps. A conditional jump
// whose targets lie within the 8 bits of JumpIf's skips is one
// instruction; a farther one becomes a JumpIf over two unconditional jumps
// (each with a 32-bit offset), so programs of any size assemble.
type asm struct {
	code []insn
	pos  []int // a label's index in code, -1 until bound
}

func (a *asm) newLabel() label {
	a.pos = append(a.pos, -1)
	return label(len(a.pos) - 1)
}

// here is a label bound to the instruction after the next jumpIf.
func (a *asm) here() label {
	l := a.newLabel()
	a.pos[l] = -2 // bound by the next jumpIf
	return l
}

func (a *asm) bind(l label) { a.pos[l] = len(a.code) }

func (a *asm) emit(i bpf.Instruction) { a.code = append(a.code, insn{ins: i}) }

func (a *asm) jump(to label) { a.code = append(a.code, insn{isJump: true, jt: to}) }

// jumpIf jumps to t when A cond val holds, else to f. A label made by here
// refers to the instruction after this jump.
func (a *asm) jumpIf(cond bpf.JumpTest, val uint32, t, f label) {
	a.code = append(a.code, insn{isJumpIf: true, cond: cond, val: val, jt: t, jf: f})
	next := len(a.code)
	for _, l := range []label{t, f} {
		if a.pos[l] == -2 {
			a.pos[l] = next
		}
	}
}

// layout returns each instruction's address in the final program (and the
// end's, at len(code)), given which conditional jumps are long.
func (a *asm) layout(long []bool) []int {
	addr := make([]int, len(a.code)+1)
	n := 0
	for i := range a.code {
		addr[i] = n
		n++
		if long[i] {
			n += 2
		}
	}
	addr[len(a.code)] = n
	return addr
}

// skip is the distance from the instruction at address from to label l.
func (a *asm) skip(addr []int, from int, l label) (int, error) {
	p := a.pos[l]
	if p < 0 {
		return 0, fmt.Errorf("seccomp: label %d is never bound", l)
	}
	d := addr[p] - from - 1
	if d < 0 {
		return 0, fmt.Errorf("seccomp: jump from %d to %d is not forward", from, addr[p])
	}
	return d, nil
}

func (a *asm) assemble() ([]bpf.Instruction, error) {
	// Start with every conditional jump short and lengthen those that
	// cannot reach; lengthening only moves targets farther, so this ends.
	long := make([]bool, len(a.code))
	var addr []int
	for changed := true; changed; {
		changed = false
		addr = a.layout(long)
		for i, c := range a.code {
			if !c.isJumpIf || long[i] {
				continue
			}
			t, err := a.skip(addr, addr[i], c.jt)
			if err != nil {
				return nil, err
			}
			f, err := a.skip(addr, addr[i], c.jf)
			if err != nil {
				return nil, err
			}
			if t > 255 || f > 255 {
				long[i], changed = true, true
			}
		}
	}
	out := make([]bpf.Instruction, 0, addr[len(a.code)])
	ja := func(from int, to label) error {
		d, err := a.skip(addr, from, to)
		out = append(out, bpf.Jump{Skip: uint32(d)})
		return err
	}
	for i, c := range a.code {
		switch {
		case c.isJumpIf && long[i]:
			out = append(out, bpf.JumpIf{Cond: c.cond, Val: c.val, SkipTrue: 0, SkipFalse: 1})
			if err := ja(addr[i]+1, c.jt); err != nil {
				return nil, err
			}
			if err := ja(addr[i]+2, c.jf); err != nil {
				return nil, err
			}
		case c.isJumpIf:
			t, _ := a.skip(addr, addr[i], c.jt)
			f, _ := a.skip(addr, addr[i], c.jf)
			out = append(out, bpf.JumpIf{Cond: c.cond, Val: c.val, SkipTrue: uint8(t), SkipFalse: uint8(f)})
		case c.isJump:
			if err := ja(addr[i], c.jt); err != nil {
				return nil, err
			}
		default:
			out = append(out, c.ins)
		}
	}
	return out, nil
}
