package seccomp

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"golang.org/x/net/bpf"
)

const archX86_64 = 0xc000003e

// data is a seccomp_data as x/net/bpf's VM reads it: its loads are
// big-endian, so each 32-bit field is stored big-endian at the offset the
// kernel's native layout gives it (golang/go#20556).
func data(arch, nr uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	for i, v := range args {
		binary.BigEndian.PutUint32(b[offArgs+8*i:], uint32(v))
		binary.BigEndian.PutUint32(b[offArgs+8*i+4:], uint32(v>>32))
	}
	return b
}

// reference decides as the policy says, without BPF.
func reference(f Filter, arch, nr uint32, args [6]uint64) Action {
	switch {
	case arch != f.Arch, f.NoX32 && nr >= x32Bit:
		return KillProcess
	case nr > f.MaxNr:
		return f.Unknown
	}
	for _, r := range f.Rules {
		if r.Nr != nr {
			continue
		}
		all := true
		for _, c := range r.Conds {
			v := args[c.Arg]
			var ok bool
			switch c.Op {
			case Eq:
				ok = v == c.Value
			case Ne:
				ok = v != c.Value
			case Gt:
				ok = v > c.Value
			case Ge:
				ok = v >= c.Value
			case Lt:
				ok = v < c.Value
			case Le:
				ok = v <= c.Value
			case MaskedEq:
				ok = v&c.Mask == c.Value
			}
			all = all && ok
		}
		if all {
			return r.Action
		}
	}
	return f.Default
}

func run(t *testing.T, prog []bpf.Instruction, arch, nr uint32, args [6]uint64) Action {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	out, err := vm.Run(data(arch, nr, args))
	if err != nil {
		t.Fatal(err)
	}
	return Action(uint32(out))
}

func TestFixedCases(t *testing.T) {
	const tiocsti = 0x5412
	f := Filter{
		Arch: archX86_64, MaxNr: 460, NoX32: true,
		Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS),
		Rules: []Rule{
			{Nr: 0, Action: Allow},
			// ioctl: TIOCSTI compared on the low 32 bits only.
			{Nr: 16, Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: tiocsti}}, Action: Errno(syscall.EPERM)},
			{Nr: 16, Action: Allow},
			{Nr: 200, Conds: []Cond{{Arg: 0, Op: Lt, Value: 1 << 33}}, Action: Allow},
		},
	}
	prog, err := Compile(f)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		arch, nr uint32
		args     [6]uint64
		want     Action
	}{
		{0x40000003, 0, [6]uint64{}, KillProcess},      // i386
		{archX86_64, x32Bit, [6]uint64{}, KillProcess}, // x32
		{archX86_64, 461, [6]uint64{}, Errno(syscall.ENOSYS)},
		{archX86_64, 1, [6]uint64{}, Errno(syscall.EPERM)},
		{archX86_64, 0, [6]uint64{}, Allow},
		{archX86_64, 16, [6]uint64{0, tiocsti}, Errno(syscall.EPERM)},
		{archX86_64, 16, [6]uint64{0, 1<<32 | tiocsti}, Errno(syscall.EPERM)}, // CVE-2019-10063
		{archX86_64, 16, [6]uint64{0, 0x5413}, Allow},
		{archX86_64, 200, [6]uint64{1<<33 - 1}, Allow},
		{archX86_64, 200, [6]uint64{1 << 33}, Errno(syscall.EPERM)},
	}
	for _, c := range cases {
		if got := run(t, prog, c.arch, c.nr, c.args); got != c.want {
			t.Errorf("arch %#x nr %d args %#x: %#x, want %#x", c.arch, c.nr, c.args[:2], got, c.want)
		}
		if ref := reference(f, c.arch, c.nr, c.args); ref != c.want {
			t.Errorf("reference disagrees on nr %d: %#x", c.nr, ref)
		}
	}
}

// TestMatchesReference compiles random policies and checks every syscall
// number and boundary arguments against the reference evaluator.
func TestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := []uint64{0, 1, 2, 0xffffffff, 1 << 32, 1<<32 + 1, 0xffffffff00000000, ^uint64(0)}
	for round := 0; round < 40; round++ {
		f := Filter{Arch: archX86_64, MaxNr: 300, NoX32: true, Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS)}
		for i := 0; i < 1+rng.IntN(120); i++ {
			r := Rule{Nr: uint32(rng.IntN(301)), Action: []Action{Allow, Log, Errno(syscall.EACCES), KillProcess}[rng.IntN(4)]}
			for j := 0; j < rng.IntN(3); j++ {
				r.Conds = append(r.Conds, Cond{Arg: rng.IntN(6), Op: Op(rng.IntN(7)), Value: values[rng.IntN(len(values))], Mask: values[rng.IntN(len(values))]})
			}
			f.Rules = append(f.Rules, r)
		}
		prog, err := Compile(f)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		for nr := uint32(0); nr <= 302; nr++ {
			for k := 0; k < 4; k++ {
				var args [6]uint64
				for i := range args {
					args[i] = values[rng.IntN(len(values))]
				}
				out, err := vm.Run(data(archX86_64, nr, args))
				if err != nil {
					t.Fatal(err)
				}
				if got, want := Action(uint32(out)), reference(f, archX86_64, nr, args); got != want {
					t.Fatalf("round %d nr %d args %#x: compiled %#x, reference %#x", round, nr, args, got, want)
				}
			}
		}
	}
}

// FuzzCompile builds a policy from the fuzzer's bytes and checks the
// compiled program against the reference on the syscalls it names.
func FuzzCompile(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{16, 0x12, 0x54, 0, 0, 6, 1, 200, 3, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		pol := Filter{Arch: archX86_64, MaxNr: 255, NoX32: true, Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS)}
		for len(b) >= 5 {
			r := Rule{Nr: uint32(b[0]), Action: []Action{Allow, Log, Errno(syscall.EACCES), KillProcess}[b[1]%4]}
			if b[2]%2 == 1 {
				v := uint64(b[3]) << (8 * (b[4] % 8))
				r.Conds = []Cond{{Arg: int(b[2]/2) % 6, Op: Op(b[4] % 7), Value: v, Mask: ^v}}
			}
			pol.Rules = append(pol.Rules, r)
			b = b[5:]
		}
		prog, err := Compile(pol)
		if errors.Is(err, ErrTooLong) {
			return // a policy too big for the kernel, refused as it should be
		}
		if err != nil {
			t.Fatal(err)
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		// Each named syscall and its neighbours, which lie across the
		// edges of the runs the program searches.
		for _, r := range pol.Rules {
			for _, nr := range []uint32{r.Nr - 1, r.Nr, r.Nr + 1} {
				if nr > pol.MaxNr+1 {
					continue
				}
				for _, v := range []uint64{0, 1, 0xff, 1 << 32, ^uint64(0)} {
					args := [6]uint64{v, v, v, v, v, v}
					out, err := vm.Run(data(archX86_64, nr, args))
					if err != nil {
						t.Fatal(err)
					}
					if got, want := Action(uint32(out)), reference(pol, archX86_64, nr, args); got != want {
						t.Fatalf("nr %d arg %#x: compiled %#x, reference %#x", nr, v, got, want)
					}
				}
			}
		}
	})
}

// BenchmarkCompile is the cost of compiling a 300-syscall allowlist with a
// few argument rules, as a default policy would be.
func BenchmarkCompile(b *testing.B) {
	f := Filter{Arch: archX86_64, MaxNr: 460, NoX32: true, Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS)}
	for nr := uint32(0); nr < 300; nr++ {
		f.Rules = append(f.Rules, Rule{Nr: nr, Action: Allow})
	}
	f.Rules = append([]Rule{{Nr: 16, Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: 0x5412}}, Action: Errno(syscall.EPERM)}}, f.Rules...)
	for b.Loop() {
		prog, err := Compile(f)
		if err != nil || len(prog) == 0 {
			b.Fatal(err)
		}
	}
}
