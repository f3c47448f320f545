package seccomp

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
)

// A sock_filter is 8 bytes: code (u16), jt (u8), jf (u8), k (u32), in the
// machine's byte order.
const insnSize = 8

// Encode assembles prog into the bytes the kernel takes (an array of
// struct sock_filter), to carry across processes.
func Encode(prog []bpf.Instruction) ([]byte, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(raw)*insnSize)
	for _, r := range raw {
		b = binary.NativeEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.NativeEndian.AppendUint32(b, r.K)
	}
	return b, nil
}

// Decode is Encode's inverse.
func Decode(b []byte) ([]bpf.RawInstruction, error) {
	if len(b) == 0 || len(b)%insnSize != 0 || len(b)/insnSize > 4096 {
		return nil, fmt.Errorf("seccomp: a program of %d bytes is not 1 to 4096 instructions", len(b))
	}
	raw := make([]bpf.RawInstruction, len(b)/insnSize)
	for i := range raw {
		r := b[i*insnSize:]
		raw[i] = bpf.RawInstruction{Op: binary.NativeEndian.Uint16(r), Jt: r[2], Jf: r[3], K: binary.NativeEndian.Uint32(r[4:])}
	}
	return raw, nil
}

// Data is struct seccomp_data: what a filter sees of one syscall.
type Data struct {
	Nr   uint32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

// Evaluator runs an encoded program in x/net/bpf's interpreter, to learn
// what the kernel decided for a syscall it reported.
type Evaluator struct {
	vm *bpf.VM
}

// NewEvaluator prepares the program b (as Encode gives it).
func NewEvaluator(b []byte) (*Evaluator, error) {
	raw, err := Decode(b)
	if err != nil {
		return nil, err
	}
	prog := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		prog[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	return &Evaluator{vm: vm}, nil
}

// Decide returns the program's action for d.
func (e *Evaluator) Decide(d Data) (Action, error) {
	out, err := e.vm.Run(d.vmBytes())
	return Action(uint32(out)), err
}

// vmBytes lays d out for x/net/bpf, whose loads are big-endian: each 32-bit
// word goes big-endian at the offset the kernel's layout gives it.
func (d Data) vmBytes() []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], d.Nr)
	binary.BigEndian.PutUint32(b[offArch:], d.Arch)
	binary.BigEndian.PutUint32(b[8:], uint32(d.IP))
	binary.BigEndian.PutUint32(b[12:], uint32(d.IP>>32))
	for i, v := range d.Args {
		binary.BigEndian.PutUint32(b[offArgs+8*i:], uint32(v))
		binary.BigEndian.PutUint32(b[offArgs+8*i+4:], uint32(v>>32))
	}
	return b
}
