//go:build libseccomp && linux && cgo

package seccomp

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The differential tests: every filter is compiled by Compile and by
// CompileLibseccomp, and both programs run in x/net/bpf's VM over every
// syscall number up to MaxNr+64, the x32 range's edges, foreign
// architectures and argument values around every constant of the rules;
// they must return the same value, and so must reference.

// machine holds one compiled program, ready to run.
type machine struct {
	name string
	vm   *bpf.VM
}

func newMachine(t testing.TB, name string, prog []bpf.Instruction) machine {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return machine{name, vm}
}

func (m machine) decide(t testing.TB, arch, nr uint32, args [6]uint64) Action {
	t.Helper()
	out, err := m.vm.Run(data(arch, nr, args))
	if err != nil {
		t.Fatalf("%s: arch %#x nr %d: %v", m.name, arch, nr, err)
	}
	return Action(uint32(out))
}

// compileBoth compiles f both ways.
func compileBoth(t testing.TB, f Filter) (pure, ls machine) {
	t.Helper()
	p, err := Compile(f)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	l, err := CompileLibseccomp(f)
	if err != nil {
		t.Fatalf("CompileLibseccomp: %v", err)
	}
	return newMachine(t, "Compile", p), newMachine(t, "CompileLibseccomp", l)
}

// agree runs both programs on (arch, nr, args) and compares them with each
// other and with reference.
func agree(t testing.TB, f Filter, pure, ls machine, arch, nr uint32, args [6]uint64) {
	t.Helper()
	p, l := pure.decide(t, arch, nr, args), ls.decide(t, arch, nr, args)
	if p != l {
		t.Fatalf("arch %#x nr %d args %#x: Compile %#x, CompileLibseccomp %#x", arch, nr, args, uint32(p), uint32(l))
	}
	if r := reference(f, arch, nr, args); p != r {
		t.Fatalf("arch %#x nr %d args %#x: both programs %#x, reference %#x", arch, nr, args, uint32(p), uint32(r))
	}
}

// edgeNrs are syscall numbers at the edges: the x32 bit, int32's sign,
// -1 (which libseccomp's own prologue lets through).
func edgeNrs(f Filter) []uint32 {
	return []uint32{0x3fffffff, x32Bit, x32Bit + 1, x32Bit | 16, x32Bit + f.MaxNr, x32Bit + f.MaxNr + 1,
		0x7fffffff, 0x80000000, 0xbfffffff, 0xc0000000, 0xfffffffe, 0xffffffff}
}

// foreignArches are architectures the filters are not for: i386, x32's
// and arm's AUDIT_ARCH values, the native one with its 64-bit flag
// cleared, and 0.
var foreignArches = []uint32{0x40000003, 0x4000003e, 0x40000028, 0xc00000b7, 0xc000003e, 0}

// agreeEverywhere compares the programs on every number 0..MaxNr+64, the
// edges, foreign architectures, and the argument vectors of probes.
func agreeEverywhere(t testing.TB, f Filter, pure, ls machine) {
	t.Helper()
	for _, a := range foreignArches {
		if a == f.Arch {
			continue
		}
		for _, nr := range append([]uint32{0, 1, 16, f.MaxNr, f.MaxNr + 1}, edgeNrs(f)...) {
			agree(t, f, pure, ls, a, nr, [6]uint64{})
		}
	}
	for _, nr := range edgeNrs(f) {
		agree(t, f, pure, ls, f.Arch, nr, [6]uint64{})
		agree(t, f, pure, ls, f.Arch, nr, [6]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)})
	}
	for nr := uint32(0); nr <= f.MaxNr+64; nr++ {
		for _, args := range probes(f, nr) {
			agree(t, f, pure, ls, f.Arch, nr, args)
		}
	}
}

// probes returns argument vectors for syscall nr: all zero and all ones
// for a syscall without conditions; for one with conditions also each
// rule's satisfying vector, then each argument moved, alone, through the
// values around every constant the syscall's rules compare it with, and
// random mixes of those values.
func probes(f Filter, nr uint32) [][6]uint64 {
	ones := ^uint64(0)
	out := [][6]uint64{{}, {ones, ones, ones, ones, ones, ones}}
	var values [6][]uint64
	var bases [][6]uint64
	for _, r := range f.Rules {
		if r.Nr != nr || len(r.Conds) == 0 {
			continue
		}
		var base [6]uint64
		for _, c := range r.Conds {
			values[c.Arg] = append(values[c.Arg], around(c)...)
			base[c.Arg] = satisfying(c)
		}
		bases = append(bases, base)
	}
	if len(bases) == 0 {
		return out
	}
	generic := []uint64{0, 1, 0xffffffff, 1 << 32, 1 << 63, ones}
	for a := range values {
		if len(values[a]) > 0 {
			values[a] = append(values[a], generic...)
		}
	}
	bases = append(bases, [6]uint64{}, [6]uint64{ones, ones, ones, ones, ones, ones})
	for _, base := range bases {
		out = append(out, base)
		for a, vs := range values {
			for _, v := range vs {
				args := base
				args[a] = v
				out = append(out, args)
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(nr), uint64(len(f.Rules))))
	for range 64 {
		args := bases[rng.IntN(len(bases))]
		for a, vs := range values {
			if len(vs) > 0 && rng.IntN(2) == 0 {
				args[a] = vs[rng.IntN(len(vs))]
			}
		}
		out = append(out, args)
	}
	return out
}

// around returns values on and beside the constant of c: ±1, with the
// other half of the word changed, and for MaskedEq with bits outside the
// mask set and the mask's lowest and highest bits flipped.
func around(c Cond) []uint64 {
	v := c.Value
	vs := []uint64{v, v + 1, v - 1, v ^ 1<<32, v | 0xffffffff00000000, v & 0xffffffff, v ^ 0x80000000, v ^ 1<<63}
	if c.Op == MaskedEq {
		vs = append(vs, v|^c.Mask, v&c.Mask, (v&c.Mask)|(^c.Mask&0xaaaaaaaa55555555))
		if c.Mask != 0 {
			low := c.Mask & -c.Mask
			high := uint64(1) << (63 - clz(c.Mask))
			vs = append(vs, v^low, v^high, (v&c.Mask)^low, (v&c.Mask)^high)
		}
	}
	return vs
}

func clz(x uint64) int {
	n := 0
	for x&(1<<63) == 0 && n < 64 {
		x <<= 1
		n++
	}
	return n
}

// satisfying returns a value for which c holds, where there is one.
func satisfying(c Cond) uint64 {
	switch c.Op {
	case Ne:
		return c.Value + 1
	case Gt:
		return c.Value + 1
	case Lt:
		return c.Value - 1
	case MaskedEq:
		return c.Value | ^c.Mask&0x0123456789abcdef
	}
	return c.Value
}

// fixedFilter is TestFixedCases' policy, for this architecture.
func fixedFilter() Filter {
	return Filter{
		Arch: NativeArch, MaxNr: 460, NoX32: true,
		Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS),
		Rules: []Rule{
			{Nr: 0, Action: Allow},
			{Nr: 16, Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: 0x5412}}, Action: Errno(syscall.EPERM)},
			{Nr: 16, Action: Allow},
			{Nr: 200, Conds: []Cond{{Arg: 0, Op: Lt, Value: 1 << 33}}, Action: Allow},
		},
	}
}

func needNative(t testing.TB) {
	t.Helper()
	if NativeArch == 0 {
		t.Skip("no syscall table (NativeArch) for this GOARCH")
	}
}

func TestLibseccompFixedCases(t *testing.T) {
	needNative(t)
	f := fixedFilter()
	pure, ls := compileBoth(t, f)
	for _, c := range []struct {
		arch, nr uint32
		args     [6]uint64
		want     Action
	}{
		{0x40000003, 0, [6]uint64{}, KillProcess},
		{NativeArch, x32Bit, [6]uint64{}, KillProcess},
		{NativeArch, 461, [6]uint64{}, Errno(syscall.ENOSYS)},
		{NativeArch, 1, [6]uint64{}, Errno(syscall.EPERM)},
		{NativeArch, 0, [6]uint64{}, Allow},
		{NativeArch, 16, [6]uint64{0, 0x5412}, Errno(syscall.EPERM)},
		{NativeArch, 16, [6]uint64{0, 1<<32 | 0x5412}, Errno(syscall.EPERM)},
		{NativeArch, 16, [6]uint64{0, 0x5413}, Allow},
		{NativeArch, 200, [6]uint64{1<<33 - 1}, Allow},
		{NativeArch, 200, [6]uint64{1 << 33}, Errno(syscall.EPERM)},
	} {
		if got := ls.decide(t, c.arch, c.nr, c.args); got != c.want {
			t.Errorf("arch %#x nr %d args %#x: %#x, want %#x", c.arch, c.nr, c.args[:2], uint32(got), uint32(c.want))
		}
	}
	agreeEverywhere(t, f, pure, ls)
}

// Linux UAPI constants of the allowlist.
const (
	tiocsti   = 0x5412
	tioclinux = 0x541c
	// CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME.
	nsFlags = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
)

// allowlist is a default-deny policy like a real one: every syscall of the
// table but a denylist, a few argument rules, and each kind of action.
func allowlist(t testing.TB) Filter {
	t.Helper()
	f := Filter{Arch: NativeArch, MaxNr: MaxNr, NoX32: NativeArch == archX86_64, Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS)}
	nr := func(name string) (uint32, bool) { return Number(name) }
	special := map[string]bool{}
	add := func(name string, rules ...Rule) {
		n, ok := nr(name)
		if !ok {
			return
		}
		special[name] = true
		for _, r := range rules {
			r.Nr = n
			f.Rules = append(f.Rules, r)
		}
	}
	deny := []string{"mount", "umount2", "pivot_root", "chroot", "bpf", "kexec_load", "kexec_file_load",
		"init_module", "finit_module", "delete_module", "ptrace", "process_vm_readv", "process_vm_writev",
		"swapon", "swapoff", "reboot", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
		"setns", "unshare", "open_by_handle_at", "name_to_handle_at", "perf_event_open", "fanotify_init",
		"keyctl", "add_key", "request_key", "userfaultfd", "iopl", "ioperm", "quotactl", "lookup_dcookie",
		"mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "syslog",
		"vhangup", "nfsservctl", "uselib", "clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"}
	for _, name := range deny {
		special[name] = true
	}
	add("ioctl",
		Rule{Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: tiocsti}}, Action: Errno(syscall.EPERM)},
		Rule{Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: tioclinux}}, Action: Errno(syscall.EPERM)},
		Rule{Action: Allow})
	add("socket",
		Rule{Conds: []Cond{{Arg: 0, Op: Eq, Value: syscall.AF_UNIX}}, Action: Allow},
		Rule{Conds: []Cond{{Arg: 0, Op: Eq, Value: syscall.AF_INET}}, Action: Allow},
		Rule{Conds: []Cond{{Arg: 0, Op: Eq, Value: syscall.AF_INET6}}, Action: Allow})
	add("clone", Rule{Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: nsFlags, Value: 0}}, Action: Allow})
	for _, p := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff} {
		add("personality", Rule{Conds: []Cond{{Arg: 0, Op: Eq, Value: p}}, Action: Allow})
	}
	// mprotect: PROT_EXEC goes to the supervisor, which says EACCES.
	add("mprotect", Rule{Conds: []Cond{{Arg: 2, Op: MaskedEq, Mask: 4, Value: 4}}, Action: Notify(syscall.EACCES)}, Rule{Action: Allow})
	add("prctl", Rule{Conds: []Cond{{Arg: 0, Op: Le, Value: 60}, {Arg: 1, Op: Ne, Value: 0xdead}}, Action: Allow},
		Rule{Conds: []Cond{{Arg: 0, Op: Gt, Value: 0x59616d61}}, Action: Allow},
		Rule{Action: Log})
	add("setpriority", Rule{Conds: []Cond{{Arg: 2, Op: Ge, Value: 0}}, Action: Allow})
	add("kill", Rule{Conds: []Cond{{Arg: 1, Op: Eq, Value: 0}}, Action: Allow}, Rule{Action: Log})
	add("kexec_load", Rule{Action: KillProcess})
	add("tgkill", Rule{Conds: []Cond{{Arg: 2, Op: Eq, Value: uint64(syscall.SIGSYS)}}, Action: KillThread}, Rule{Action: Allow})
	add("getpriority", Rule{Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: 0xffffffff00000000, Value: 0}}, Action: Allow}, Rule{Action: Errno(4094)})
	for _, name := range Names() {
		if !special[name] {
			add(name, Rule{Action: Allow})
		}
	}
	if err := f.Check(); err != nil {
		t.Fatalf("allowlist: %v", err)
	}
	return f
}

func TestLibseccompAllowlist(t *testing.T) {
	needNative(t)
	f := allowlist(t)
	if n := len(f.Rules); n < 300 {
		t.Fatalf("allowlist has %d rules, want ~300+", n)
	}
	pure, ls := compileBoth(t, f)
	nr := func(name string) uint32 {
		n, ok := Number(name)
		if !ok {
			t.Fatalf("no syscall %s", name)
		}
		return n
	}
	for _, c := range []struct {
		name string
		args [6]uint64
		want Action
	}{
		{"ioctl", [6]uint64{1, tiocsti}, Errno(syscall.EPERM)},
		{"ioctl", [6]uint64{1, 0xffffffff00000000 | tiocsti}, Errno(syscall.EPERM)},
		{"ioctl", [6]uint64{1, tioclinux}, Errno(syscall.EPERM)},
		{"ioctl", [6]uint64{1, 0x5401}, Allow},
		{"socket", [6]uint64{syscall.AF_UNIX}, Allow},
		{"socket", [6]uint64{syscall.AF_PACKET}, Errno(syscall.EPERM)},
		{"socket", [6]uint64{1<<32 | syscall.AF_UNIX}, Errno(syscall.EPERM)},
		{"clone", [6]uint64{0x11}, Allow},
		{"clone", [6]uint64{0x10000000}, Errno(syscall.EPERM)},
		{"personality", [6]uint64{8}, Allow},
		{"personality", [6]uint64{0x400000}, Errno(syscall.EPERM)},
		{"mprotect", [6]uint64{0, 4096, 5}, Notify(syscall.EACCES)},
		{"mprotect", [6]uint64{0, 4096, 3}, Allow},
		{"mount", [6]uint64{}, Errno(syscall.EPERM)},
		{"kexec_load", [6]uint64{}, KillProcess},
		{"getpriority", [6]uint64{1 << 40}, Errno(4094)},
	} {
		if got := ls.decide(t, f.Arch, nr(c.name), c.args); got != c.want {
			t.Errorf("%s%#x: %#x, want %#x", c.name, c.args[:3], uint32(got), uint32(c.want))
		}
	}
	agreeEverywhere(t, f, pure, ls)
}

// source feeds the filter generator from fuzz bytes, or from a PRNG.
type source struct {
	b   []byte
	rng *rand.Rand
}

func (s *source) byte() byte {
	if s.rng != nil {
		return byte(s.rng.Uint32())
	}
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *source) intn(n int) int {
	if n <= 256 {
		return int(s.byte()) % n
	}
	return (int(s.byte())<<8 | int(s.byte())) % n
}

func (s *source) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(s.byte())
	}
	return v
}

var (
	genActions = []Action{Allow, Log, KillProcess, KillThread, Errno(1), Errno(syscall.EPERM), Errno(syscall.ENOSYS),
		Errno(4094), Notify(syscall.EPERM), Notify(1), Notify(4094)}
	genValues = []uint64{0, 1, 2, 7, 0x5412, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 1 << 32, 1<<32 | 1,
		1 << 33, 0x8000000000000000, 0xffffffff00000000, 0xfffffffffffffffe, 0xffffffffffffffff}
	genMasks = []uint64{0, 1, 0xff, 0xfff0, 0xffffffff, 0xffffffff00000000, 0x100000000, ^uint64(0), nsFlags, 0x8000000000000001}
	genMaxNr = []uint32{0, 1, 5, 40, 300, 460}
	genOps   = []Op{Eq, Ne, Gt, Ge, Lt, Le, MaskedEq}
)

// genFilter makes a policy in Check's form from s: per syscall an
// unconditional rule, conditional rules sharing one action, or both with
// the unconditional last; the syscalls' rules interleaved.
func genFilter(s *source) Filter {
	f := Filter{
		Arch:    NativeArch,
		MaxNr:   genMaxNr[s.intn(len(genMaxNr))],
		NoX32:   s.byte()%2 == 0,
		Default: genActions[s.intn(len(genActions))],
		Unknown: genActions[s.intn(len(genActions))],
	}
	action := func() Action { return genActions[s.intn(len(genActions))] }
	value := func() uint64 {
		if k := s.intn(len(genValues) + 2); k < len(genValues) {
			return genValues[k]
		}
		return s.u64()
	}
	var perNr [][]Rule
	seen := map[uint32]bool{}
	for range s.intn(int(min(f.MaxNr+1, 48))) + 1 {
		nr := uint32(s.intn(int(f.MaxNr) + 1))
		if seen[nr] {
			continue
		}
		seen[nr] = true
		var rules []Rule
		form := s.intn(4)
		if form > 0 {
			a := action()
			for range s.intn(4) + 1 {
				r := Rule{Nr: nr, Action: a}
				args := []int{0, 1, 2, 3, 4, 5}
				for range s.intn(3) + 1 {
					k := s.intn(len(args))
					c := Cond{Arg: args[k], Op: genOps[s.intn(len(genOps))]}
					args = slices.Delete(args, k, k+1)
					c.Value = value()
					if c.Op == MaskedEq {
						c.Mask = genMasks[s.intn(len(genMasks))]
						if s.intn(8) == 0 {
							c.Mask = s.u64()
						}
						c.Value &= c.Mask // Check refuses bits outside the mask
					}
					r.Conds = append(r.Conds, c)
				}
				rules = append(rules, r)
			}
		}
		if form != 1 {
			u := action()
			if form == 3 && len(rules) > 0 {
				u = rules[0].Action
			}
			rules = append(rules, Rule{Nr: nr, Action: u})
		}
		perNr = append(perNr, rules)
	}
	for len(perNr) > 0 {
		k := s.intn(len(perNr))
		f.Rules = append(f.Rules, perNr[k][0])
		if perNr[k] = perNr[k][1:]; len(perNr[k]) == 0 {
			perNr = slices.Delete(perNr, k, k+1)
		}
	}
	return f
}

func TestLibseccompRandom(t *testing.T) {
	needNative(t)
	rounds := 150
	if testing.Short() {
		rounds = 20
	}
	for round := range rounds {
		f := genFilter(&source{rng: rand.New(rand.NewPCG(7, uint64(round)))})
		if err := f.Check(); err != nil {
			t.Fatalf("round %d: generated filter fails Check: %v", round, err)
		}
		pure, ls := compileBoth(t, f)
		agreeEverywhere(t, f, pure, ls)
	}
}

// FuzzDifferential decodes the fuzzer's bytes into a policy in Check's
// form and compares both compilers' programs on it.
func FuzzDifferential(f *testing.F) {
	if NativeArch == 0 {
		f.Skip("no syscall table (NativeArch) for this GOARCH")
	}
	f.Add([]byte{})
	f.Add([]byte{4, 1, 5, 0, 3, 16, 2, 1, 1, 6, 0x12, 0x54, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 0, 9, 11, 8, 200, 200, 3, 2, 2, 5, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14})
	f.Fuzz(func(t *testing.T, b []byte) {
		pol := genFilter(&source{b: b})
		if err := pol.Check(); err != nil {
			t.Fatalf("generated filter fails Check: %v", err)
		}
		// A program too long for the kernel is no disagreement: the
		// compilers' programs differ in length.
		for _, compile := range []func(Filter) ([]bpf.Instruction, error){Compile, CompileLibseccomp} {
			if _, err := compile(pol); errors.Is(err, ErrTooLong) {
				t.Skip(err)
			}
		}
		pure, ls := compileBoth(t, pol)
		nrs := []uint32{0, pol.MaxNr, pol.MaxNr + 1}
		for _, r := range pol.Rules {
			nrs = append(nrs, r.Nr, r.Nr+1)
		}
		nrs = append(nrs, edgeNrs(pol)...)
		for _, a := range foreignArches {
			if a != pol.Arch {
				agree(t, pol, pure, ls, a, pol.MaxNr, [6]uint64{})
			}
		}
		for _, nr := range nrs {
			for _, args := range probes(pol, nr) {
				agree(t, pol, pure, ls, pol.Arch, nr, args)
			}
		}
	})
}

func TestLibseccompRefuses(t *testing.T) {
	needNative(t)
	ok := fixedFilter()
	for _, c := range []struct {
		name string
		mod  func(*Filter)
	}{
		{"foreign arch", func(f *Filter) { f.Arch = 0x40000003 }},
		{"MaxNr in the x32 range", func(f *Filter) { f.MaxNr = x32Bit }},
		{"Check: rule after fallback", func(f *Filter) {
			f.Rules = append(f.Rules, Rule{Nr: 16, Conds: []Cond{{Arg: 0, Op: Eq, Value: 1}}, Action: Allow})
		}},
		{"Check: bad action", func(f *Filter) { f.Rules[0].Action = Trap }},
		{"syscall above MaxNr", func(f *Filter) { f.Rules = append(f.Rules, Rule{Nr: 461, Action: Allow}) }},
		{"argument 6", func(f *Filter) { f.Rules[3].Conds[0].Arg = 6 }},
		{"unknown op", func(f *Filter) { f.Rules[3].Conds[0].Op = 7 }},
	} {
		f := ok
		f.Rules = slices.Clone(ok.Rules)
		f.Rules[3].Conds = slices.Clone(ok.Rules[3].Conds)
		c.mod(&f)
		if _, err := CompileLibseccomp(f); err == nil {
			t.Errorf("%s: CompileLibseccomp accepted it", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestLibseccompQuirks pins the behaviours of libseccomp that
// CompileLibseccomp works around (see libseccomp.go). If one fails,
// libseccomp changed: the workaround stays correct, but say so there.
func TestLibseccompQuirks(t *testing.T) {
	needNative(t)
	major, minor, micro := libseccomp.GetLibraryVersion()
	t.Logf("libseccomp %d.%d.%d", major, minor, micro)
	export := func(ctx *libseccomp.ScmpFilter) machine {
		t.Helper()
		b, err := exportBPF(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		prog := make([]bpf.Instruction, len(raw))
		for i, r := range raw {
			prog[i] = r.Disassemble()
		}
		return newMachine(t, "libseccomp", prog)
	}
	newCtx := func() *libseccomp.ScmpFilter {
		ctx, err := libseccomp.NewFilter(libseccomp.ActErrno.SetReturnCode(int16(syscall.EPERM)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ctx.Release)
		return ctx
	}
	tiocstiCond, err := libseccomp.MakeCondition(1, libseccomp.CompareMaskedEqual, 0xffffffff, tiocsti)
	if err != nil {
		t.Fatal(err)
	}
	eperm := libseccomp.ActErrno.SetReturnCode(int16(syscall.EPERM))
	eacces := libseccomp.ActErrno.SetReturnCode(int16(syscall.EACCES))

	// A rule may not carry the default action.
	if err := newCtx().AddRuleExact(1, eperm); err == nil {
		t.Error("a rule with the default action was accepted")
	}
	// An unconditional rule swallows the syscall's conditional rules, in
	// either order.
	for _, condFirst := range []bool{true, false} {
		ctx := newCtx()
		steps := []func() error{
			func() error { return ctx.AddRuleConditionalExact(16, eacces, []libseccomp.ScmpCondition{tiocstiCond}) },
			func() error { return ctx.AddRuleExact(16, libseccomp.ActAllow) },
		}
		if !condFirst {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			if err := s(); err != nil {
				t.Fatal(err)
			}
		}
		if got := export(ctx).decide(t, NativeArch, 16, [6]uint64{0, tiocsti}); got != Allow {
			t.Errorf("conditional first %v: ioctl(TIOCSTI) gets %#x, not the swallowed-rule Allow", condFirst, uint32(got))
		}
	}
	// Two rules that compare argument 0 and another each are merged wrongly.
	cond := func(arg uint, op libseccomp.ScmpCompareOp, v uint64) libseccomp.ScmpCondition {
		c, err := libseccomp.MakeCondition(arg, op, v)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		first libseccomp.ScmpCompareOp
		want  Action // libseccomp's wrong answer for (7, 8, 0)
	}{
		{libseccomp.CompareNotEqual, Allow},             // neither rule matches
		{libseccomp.CompareEqual, Errno(syscall.EPERM)}, // the first rule matches
	} {
		ctx := newCtx()
		for _, conds := range [][]libseccomp.ScmpCondition{
			{cond(0, c.first, 7), cond(2, libseccomp.CompareEqual, 0)},
			{cond(0, libseccomp.CompareNotEqual, 9), cond(1, libseccomp.CompareEqual, 7)},
		} {
			if err := ctx.AddRuleConditionalExact(5, libseccomp.ActAllow, conds); err != nil {
				t.Fatal(err)
			}
		}
		if got := export(ctx).decide(t, NativeArch, 5, [6]uint64{7, 8, 0}); got != c.want {
			t.Errorf("rules (a0 %v 7 && a2 == 0), (a0 != 9 && a1 == 7) on (7, 8, 0): %#x; libseccomp 2.5.4 gave %#x (wrong)", c.first, uint32(got), uint32(c.want))
		}
	}
	// No errno from 4095 (MAX_ERRNO) up.
	if err := newCtx().AddRuleExact(1, libseccomp.ActErrno.SetReturnCode(4095)); err == nil {
		t.Error("errno 4095 was accepted")
	}
	if err := newCtx().AddRuleExact(1, libseccomp.ActErrno.SetReturnCode(4094)); err != nil {
		t.Errorf("errno 4094: %v", err)
	}
	// A MaskedEq value with bits outside the mask is masked too.
	ctx := newCtx()
	c, err := libseccomp.MakeCondition(0, libseccomp.CompareMaskedEqual, 0xff, 0x1ff)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.AddRuleConditionalExact(1, libseccomp.ActAllow, []libseccomp.ScmpCondition{c}); err != nil {
		t.Fatal(err)
	}
	m := export(ctx)
	if got := m.decide(t, NativeArch, 1, [6]uint64{0xff}); got != Allow {
		t.Errorf("MaskedEq(0xff, 0x1ff) on 0xff: %#x, want Allow (libseccomp masks the value)", uint32(got))
	}
	// The default bad-architecture action is KILL_THREAD, not KILL_PROCESS.
	if got := m.decide(t, 0x40000003, 1, [6]uint64{}); got != KillThread {
		t.Errorf("foreign arch: %#x, want KillThread", uint32(got))
	}
	if NativeArch == archX86_64 {
		// x32 numbers (but -1) go to the bad-architecture action.
		for nr, want := range map[uint32]Action{x32Bit: KillThread, x32Bit + 1: KillThread, 0xffffffff: Errno(syscall.EPERM)} {
			if got := m.decide(t, NativeArch, nr, [6]uint64{}); got != want {
				t.Errorf("nr %#x: %#x, want %#x", nr, uint32(got), uint32(want))
			}
		}
	}
}

// TestLibseccompKernel loads the allowlist compiled by CompileLibseccomp
// into a child process (the test binary again; seccomp cannot be undone)
// and checks what the kernel answers: the spliced program passes the
// kernel's checker and decides as in the VM.
func TestLibseccompKernel(t *testing.T) {
	needNative(t)
	if os.Getenv("SECCOMP_TEST_KERNEL_CHILD") == "1" {
		kernelChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLibseccompKernel$", "-test.v")
	cmd.Env = append(os.Environ(), "SECCOMP_TEST_KERNEL_CHILD=1")
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "SKIP: ") {
		t.Skipf("child: %s", out)
	}
	if err != nil || !strings.Contains(string(out), "child: all answers as expected") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func kernelChild(t *testing.T) {
	prog, err := CompileLibseccomp(allowlist(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(prog)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(b, false); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			t.Skip("SKIP: this kernel has no seccomp filters")
		}
		t.Fatalf("Install: %v", err)
	}
	sys := func(nr uintptr, args ...uintptr) syscall.Errno {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return e
	}
	rawSys := func(nr uintptr, args ...uintptr) syscall.Errno {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 && r >= ^uintptr(4094) { // -4095
			e = syscall.Errno(-r)
		}
		return e
	}
	for _, c := range []struct {
		name string
		got  syscall.Errno
		want syscall.Errno
	}{
		{"ioctl(-1, TIOCSTI)", sys(unix.SYS_IOCTL, ^uintptr(0), tiocsti), unix.EPERM},
		{"ioctl(-1, 1<<32|TIOCSTI)", sys(unix.SYS_IOCTL, ^uintptr(0), 1<<32|tiocsti), unix.EPERM},
		{"ioctl(-1, TCGETS)", sys(unix.SYS_IOCTL, ^uintptr(0), unix.TCGETS), unix.EBADF},
		{"mount", sys(unix.SYS_MOUNT, 0, 0, 0, 0, 0), unix.EPERM},
		{"socket(AF_PACKET)", sys(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0), unix.EPERM},
		{"getpid", sys(unix.SYS_GETPID), 0},
		{"syscall MaxNr+1", sys(uintptr(MaxNr + 1)), unix.ENOSYS},
		{"getpriority(1<<40|PRIO_PROCESS, 0)", rawSys(unix.SYS_GETPRIORITY, 1<<40|unix.PRIO_PROCESS, 0), 4094},
		{"getpriority(PRIO_PROCESS, 0)", sys(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, 0), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: errno %d (%v), want %d (%v)", c.name, int(c.got), c.got, int(c.want), c.want)
		}
	}
	if !t.Failed() {
		t.Log("child: all answers as expected")
	}
}

// BenchmarkCompileLibseccomp is BenchmarkCompile's policy through
// libseccomp.
func BenchmarkCompileLibseccomp(b *testing.B) {
	needNative(b)
	f := Filter{Arch: NativeArch, MaxNr: 460, NoX32: true, Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS)}
	for nr := uint32(0); nr < 300; nr++ {
		f.Rules = append(f.Rules, Rule{Nr: nr, Action: Allow})
	}
	f.Rules = append([]Rule{{Nr: 16, Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: 0x5412}}, Action: Errno(syscall.EPERM)}}, f.Rules...)
	for b.Loop() {
		prog, err := CompileLibseccomp(f)
		if err != nil || len(prog) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileAllowlist compares the compilers on the allowlist.
func BenchmarkCompileAllowlist(b *testing.B) {
	needNative(b)
	f := allowlist(b)
	for _, c := range []struct {
		name    string
		compile func(Filter) ([]bpf.Instruction, error)
	}{{"go", Compile}, {"libseccomp", CompileLibseccomp}} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				prog, err := c.compile(f)
				if err != nil {
					b.Fatal(err)
				}
				n = len(prog)
			}
			b.ReportMetric(float64(n), "insns")
		})
	}
}
