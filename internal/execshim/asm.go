package execshim

import (
	"encoding/binary"
	"fmt"
)

// asm collects machine code, with jumps to labels resolved once all are
// placed. It encodes nothing itself: each architecture's file writes the
// bytes of its instructions, and names where a label's offset goes.
type asm struct {
	code   []byte
	labels map[string]int
	fixups []fixup
}

// A fixup is a place in code that holds the distance to a label.
type fixup struct {
	at    int // offset of the instruction (arm64) or of the field (amd64 rel32)
	label string
	patch func(code []byte, at, target int)
}

func newAsm() *asm { return &asm{labels: map[string]int{}} }

func (a *asm) emit(b ...byte) { a.code = append(a.code, b...) }

// emit32 appends one little-endian 32-bit word (an arm64 instruction).
func (a *asm) emit32(w uint32) { a.code = binary.LittleEndian.AppendUint32(a.code, w) }

func (a *asm) label(name string) {
	if _, dup := a.labels[name]; dup {
		panic("execshim: label placed twice: " + name)
	}
	a.labels[name] = len(a.code)
}

// ref records that the code at offset at refers to label.
func (a *asm) ref(at int, label string, patch func(code []byte, at, target int)) {
	a.fixups = append(a.fixups, fixup{at, label, patch})
}

// align pads the code with zero bytes to a multiple of n.
func (a *asm) align(n int) {
	for len(a.code)%n != 0 {
		a.code = append(a.code, 0)
	}
}

// bytes resolves every reference. The code is fixed, so a missing label
// is a mistake in this package, caught by its tests.
func (a *asm) bytes() []byte {
	for _, f := range a.fixups {
		t, ok := a.labels[f.label]
		if !ok {
			panic(fmt.Sprintf("execshim: no label %q", f.label))
		}
		f.patch(a.code, f.at, t)
	}
	return a.code
}
