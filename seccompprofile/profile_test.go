package seccompprofile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// requireSyscallTable skips on an architecture without a syscall table,
// where no policy can be built.
func requireSyscallTable(t testing.TB) {
	t.Helper()
	if seccomp.NativeArch == 0 {
		t.Skip("no syscall table for this GOARCH")
	}
}

// withKernel has the Docker profile reader see release as the running
// kernel's, for the rest of the test.
func withKernel(t testing.TB, release string, err error) {
	old := kernelRelease
	kernelRelease = func() (string, error) { return release, err }
	t.Cleanup(func() { kernelRelease = old })
}

// checked is what New makes of p as Options.Seccomp: nil, or why it
// refuses the policy.
func checked(p *sandbox.SeccompPolicy) error {
	sb := sandbox.New(sandbox.Options{Seccomp: p})
	defer sb.Close()
	return sb.Err()
}

// decider checks p as New would, and returns what p decides for a syscall
// of this architecture (decide).
func decider(t testing.TB, p *sandbox.SeccompPolicy) func(nr uint32, args [6]uint64) sandbox.SeccompAction {
	t.Helper()
	if err := checked(p); err != nil {
		t.Fatalf("New refuses the policy: %v", err)
	}
	return func(nr uint32, args [6]uint64) sandbox.SeccompAction { return decide(p, nr, args) }
}

// decide is what p decides for syscall nr with args, read as
// SeccompPolicy's doc says: the first rule naming the syscall whose Args
// all hold, else Default; Unknown for a number this architecture's table
// has no name for. That the compiled filter decides the same is the root
// package's to test.
func decide(p *sandbox.SeccompPolicy, nr uint32, args [6]uint64) sandbox.SeccompAction {
	name := seccomp.Name(nr)
	if _, ok := seccomp.Number(name); !ok {
		return p.Unknown
	}
	for _, r := range p.Rules {
		if slices.Contains(r.Names, name) && !slices.ContainsFunc(r.Args, func(c sandbox.ArgCond) bool { return !holds(c, args) }) {
			return r.Action
		}
	}
	return p.Default
}

// holds reports whether c holds for args.
func holds(c sandbox.ArgCond, args [6]uint64) bool {
	a := args[c.Index]
	switch c.Op {
	case sandbox.ArgEq:
		return a == c.Value
	case sandbox.ArgNe:
		return a != c.Value
	case sandbox.ArgGt:
		return a > c.Value
	case sandbox.ArgGe:
		return a >= c.Value
	case sandbox.ArgLt:
		return a < c.Value
	case sandbox.ArgLe:
		return a <= c.Value
	case sandbox.ArgMaskedEq:
		return a&c.Mask == c.Value
	}
	return false // New refuses any other
}

// argTuples returns argument vectors that reach every boundary of the
// comparisons the policies make on the syscall: each compared value, its
// neighbours, its bits outside the mask set, its masked bits flipped, its
// high word set, and every argument all ones; all combined when that makes
// at most limit vectors, else each argument varied alone.
func argTuples(name string, limit int, ps ...*sandbox.SeccompPolicy) [][6]uint64 {
	var sets [6][]uint64
	for i := range sets {
		sets[i] = []uint64{0}
	}
	add := func(i int, vs ...uint64) {
		for _, v := range vs {
			if !slices.Contains(sets[i], v) {
				sets[i] = append(sets[i], v)
			}
		}
	}
	for _, p := range ps {
		for _, r := range p.Rules {
			if !slices.Contains(r.Names, name) {
				continue
			}
			for _, c := range r.Args {
				if c.Index < 0 || c.Index > 5 {
					continue
				}
				add(c.Index, ^uint64(0), c.Value, c.Value-1, c.Value+1, c.Value|0xffffffff00000000, c.Mask)
				if c.Op == sandbox.ArgMaskedEq {
					add(c.Index, c.Value|^c.Mask, c.Value^c.Mask, c.Value&c.Mask)
				}
			}
		}
	}
	n := 1
	for _, s := range sets {
		n *= len(s)
	}
	out := [][6]uint64{{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}}
	if n <= limit {
		var rec func(i int, cur [6]uint64)
		rec = func(i int, cur [6]uint64) {
			if i == 6 {
				out = append(out, cur)
				return
			}
			for _, v := range sets[i] {
				cur[i] = v
				rec(i+1, cur)
			}
		}
		rec(0, [6]uint64{})
		return out
	}
	for i, s := range sets {
		for _, v := range s {
			var cur [6]uint64
			cur[i] = v
			out = append(out, cur)
		}
	}
	return out
}

// compareDecisions runs want's and got's programs over every syscall number
// up to MaxNr+16 with argTuples, and reports each decision that differs,
// with the syscall's name, unless same accepts it.
func compareDecisions(t testing.TB, want, got *sandbox.SeccompPolicy, limit int, same func(name string, w, g sandbox.SeccompAction) bool) {
	t.Helper()
	wd, gd := decider(t, want), decider(t, got)
	bad := 0
	for nr := uint32(0); nr <= seccomp.MaxNr+16; nr++ {
		name := seccomp.Name(nr)
		for _, args := range argTuples(name, limit, want, got) {
			w, g := wd(nr, args), gd(nr, args)
			if w != g && (same == nil || !same(name, w, g)) {
				t.Errorf("%s(%#x): want %s, got %s", name, args, w, g)
				if bad++; bad > 20 {
					t.Fatal("too many differences")
				}
			}
		}
	}
}

func TestOCIRoundTrip(t *testing.T) {
	requireSyscallTable(t)
	p := sandbox.DefaultSeccompPolicy()
	s := ToOCI(p)
	q, unknown, err := FromOCI(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) > 0 {
		t.Errorf("unknown names in an exported policy: %v", unknown)
	}
	// sandbox.ActErrno exports as SCMP_ACT_ERRNO, which imports as sandbox.ActNotify: the
	// same errno, now reported. Only clone3 is sandbox.ActErrno in the default.
	var reported []string
	compareDecisions(t, p, q, 1<<14, func(name string, w, g sandbox.SeccompAction) bool {
		if w == sandbox.ActErrno(w.Errno()) && g == sandbox.ActNotify(w.Errno()) {
			if !slices.Contains(reported, name) {
				reported = append(reported, name)
			}
			return true
		}
		return false
	})
	if !slices.Equal(reported, []string{"clone3"}) {
		t.Errorf("errno turned into notify for %v, want [clone3]", reported)
	}

	// A rule put in front of a syscall's unconditional rule overrides it
	// (the first match decides); the export must not bring the
	// overridden rule back.
	o := sandbox.DefaultSeccompPolicy()
	o.Rules = append([]sandbox.SyscallRule{
		{Names: []string{"chmod", "mount"}, Action: sandbox.ActNotify(syscall.EROFS)},
	}, o.Rules...)
	oq, _, err := FromOCI(ToOCI(o))
	if err != nil {
		t.Fatal(err)
	}
	compareDecisions(t, o, oq, 1<<14, func(name string, w, g sandbox.SeccompAction) bool {
		return name == "clone3" && g == sandbox.ActNotify(w.Errno())
	})

	// The same through JSON and the Docker reader, as the command-line
	// tool's "policy export" and "run --seccomp" do.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	d, unknown, err := FromDocker(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) > 0 {
		t.Errorf("unknown names in an exported policy: %v", unknown)
	}
	compareDecisions(t, q, d, 1<<14, nil)
}

func TestToOCIShape(t *testing.T) {
	requireSyscallTable(t)
	s := ToOCI(sandbox.DefaultSeccompPolicy())
	if s.DefaultAction != specs.ActErrno || s.DefaultErrnoRet == nil || *s.DefaultErrnoRet != uint(syscall.EPERM) {
		t.Errorf("default %s %v, want SCMP_ACT_ERRNO with errnoRet 1", s.DefaultAction, s.DefaultErrnoRet)
	}
	if !slices.Equal(s.Architectures, []specs.Arch{nativeOCIArch()}) {
		t.Errorf("architectures %v, want [%s]", s.Architectures, nativeOCIArch())
	}
	find := func(name string, args int) *specs.LinuxSyscall {
		for i, e := range s.Syscalls {
			if slices.Contains(e.Names, name) && len(e.Args) == args {
				return &s.Syscalls[i]
			}
		}
		t.Fatalf("no entry for %s with %d args", name, args)
		return nil
	}
	if e := find("read", 0); e.Action != specs.ActAllow || e.ErrnoRet != nil || !slices.Contains(e.Names, "execve") {
		t.Errorf("read's entry: %+v", e)
	}
	if e := find("clone3", 0); e.Action != specs.ActErrno || *e.ErrnoRet != uint(syscall.ENOSYS) {
		t.Errorf("clone3's entry: %+v", e)
	}
	var found bool
	for _, e := range s.Syscalls {
		seen := map[string]bool{}
		for _, n := range e.Names {
			if seen[n] {
				t.Errorf("%s twice in one entry", n)
			}
			seen[n] = true
		}
		if slices.Equal(e.Names, []string{"ioctl"}) && len(e.Args) == 1 && e.Args[0] == (specs.LinuxSeccompArg{Index: 1, Value: 0xffffffff, ValueTwo: 0x5412, Op: specs.OpMaskedEqual}) {
			found = e.Action == specs.ActErrno && *e.ErrnoRet == uint(syscall.EPERM)
		}
	}
	if !found {
		t.Error("no ioctl entry refusing TIOCSTI with value the mask, valueTwo the expected bits")
	}
}

// dockerCase is a syscall and what the profile under test decides for it.
type dockerCase struct {
	name string
	args [6]uint64
	want sandbox.SeccompAction
}

func checkCases(t *testing.T, p *sandbox.SeccompPolicy, cases []dockerCase) {
	t.Helper()
	decide := decider(t, p)
	for _, c := range cases {
		nr, ok := seccomp.Number(c.name)
		if !ok {
			t.Errorf("%s: not in this table", c.name)
			continue
		}
		if got := (decide(nr, c.args)); got != c.want {
			t.Errorf("%s(%#x): %s, want %s", c.name, c.args[:2], got, c.want)
		}
	}
}

func readDockerTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFromDockerProfile(t *testing.T) {
	requireSyscallTable(t)
	data := readDockerTestdata(t, "docker.json")
	eperm, enosys := sandbox.ActNotify(syscall.EPERM), sandbox.ActNotify(syscall.ENOSYS)
	umask := sandbox.ActAllow // the amd64 rule
	if nativeOCIArch() == specs.ArchAARCH64 {
		umask = sandbox.ActNotify(syscall.EACCES)
	}
	common := []dockerCase{
		{"read", [6]uint64{}, sandbox.ActAllow},
		{"getpid", [6]uint64{}, sandbox.ActAllow},
		{"mount", [6]uint64{}, eperm},                              // includes.caps
		{"clone", [6]uint64{0x11}, sandbox.ActAllow},               // SIGCHLD
		{"clone", [6]uint64{0x10000000 | 0x11}, eperm},             // CLONE_NEWUSER
		{"clone", [6]uint64{0xffffffff00000011}, sandbox.ActAllow}, // the mask's high word is 0
		{"clone3", [6]uint64{}, enosys},                            // excludes.caps applies
		{"umask", [6]uint64{}, umask},                              // includes.arches
		{"sethostname", [6]uint64{}, eperm},                        // excludes.arches
		{"pidfd_open", [6]uint64{}, sandbox.ActAllow},              // includes.minKernel 5.3
		{"ioctl", [6]uint64{1, 0x5412}, eperm},                     // TIOCSTI, though eperm is the default
		{"ioctl", [6]uint64{1, 0xffffffff00005412}, eperm},
		{"ioctl", [6]uint64{1, 0x5401}, sandbox.ActAllow}, // TCGETS
		{"socket", [6]uint64{1, 5}, sandbox.ActAllow},
		{"socket", [6]uint64{2, 1}, sandbox.ActAllow},
		{"socket", [6]uint64{2, 0x80801}, sandbox.ActAllow}, // SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC
		{"socket", [6]uint64{2, 2}, eperm},
		{"socket", [6]uint64{10, 1}, eperm},
		{"kill", [6]uint64{7, 0}, sandbox.ActAllow},
		{"kill", [6]uint64{7, 15}, sandbox.ActAllow},
		{"kill", [6]uint64{7, 9}, eperm},
		{"personality", [6]uint64{}, sandbox.ActLog},
		{"reboot", [6]uint64{}, sandbox.ActKill},
		{"ptrace", [6]uint64{}, eperm}, // SCMP_ACT_NOTIFY
	}

	t.Run("kernel 5.4", func(t *testing.T) {
		withKernel(t, "5.4.0-150-generic", nil)
		p, unknown, err := FromDocker(data)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"arm_sync_file_range", "oldolduname"}; !slices.Equal(unknown, want) {
			t.Errorf("unknown %v, want %v", unknown, want)
		}
		if p.Default != eperm || p.Unknown != enosys {
			t.Errorf("default %s, unknown %s; want %s, %s", p.Default, p.Unknown, eperm, enosys)
		}
		checkCases(t, p, append(common,
			dockerCase{"pidfd_getfd", [6]uint64{}, eperm},      // includes.minKernel 5.6
			dockerCase{"uname", [6]uint64{}, sandbox.ActAllow}, // excludes.minKernel 5.6
		))
		decide := decider(t, p)
		if got := (decide(seccomp.MaxNr+1, [6]uint64{})); got != enosys {
			t.Errorf("syscall %d: %s, want %s", seccomp.MaxNr+1, got, enosys)
		}
	})
	t.Run("kernel 6.1", func(t *testing.T) {
		withKernel(t, "6.1.0", nil)
		p, _, err := FromDocker(data)
		if err != nil {
			t.Fatal(err)
		}
		checkCases(t, p, append(common,
			dockerCase{"pidfd_getfd", [6]uint64{}, sandbox.ActAllow},
			dockerCase{"uname", [6]uint64{}, eperm},
		))
	})
	t.Run("kernel unknown", func(t *testing.T) {
		withKernel(t, "", errors.New("no /proc"))
		_, _, err := FromDocker(data)
		if !errors.Is(err, sandbox.ErrNotSupported) || !strings.Contains(err.Error(), "syscalls[8].includes.minKernel") {
			t.Errorf("err = %v, want sandbox.ErrNotSupported naming syscalls[8].includes.minKernel", err)
		}
		// A profile without minKernel does not need the version.
		if _, _, err := FromDocker([]byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`)); err != nil {
			t.Error(err)
		}
	})
}

func TestFromOCIDenylist(t *testing.T) {
	requireSyscallTable(t)
	var s specs.LinuxSeccomp
	if err := json.Unmarshal(readDockerTestdata(t, "oci-denylist.json"), &s); err != nil {
		t.Fatal(err)
	}
	p, unknown, err := FromOCI(&s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(unknown, []string{"not_a_syscall"}) {
		t.Errorf("unknown %v", unknown)
	}
	if p.Default != sandbox.ActAllow || p.Unknown != sandbox.ActAllow {
		t.Errorf("default %s, unknown %s; want allow for both", p.Default, p.Unknown)
	}
	checkCases(t, p, []dockerCase{
		{"ptrace", [6]uint64{}, sandbox.ActNotify(syscall.EPERM)},
		{"userfaultfd", [6]uint64{}, sandbox.ActNotify(syscall.ENOSYS)},
		{"reboot", [6]uint64{}, sandbox.ActKill},
		{"unshare", [6]uint64{0x10000000 | 0x20000}, sandbox.ActLog},
		{"unshare", [6]uint64{0x20000}, sandbox.ActAllow},
		{"setns", [6]uint64{3, 0}, sandbox.ActAllow},
		{"setns", [6]uint64{3, 0x40000000}, sandbox.ActNotify(syscall.EPERM)},
		{"mmap", [6]uint64{0, 4096, 7}, sandbox.ActKill},
		{"mmap", [6]uint64{0, 4096, 3}, sandbox.ActAllow},
	})
	decide := decider(t, p)
	if got := (decide(seccomp.MaxNr+1, [6]uint64{})); got != sandbox.ActAllow {
		t.Errorf("syscall %d: %s, want allow", seccomp.MaxNr+1, got)
	}
}

func TestFromOCIUnknownAction(t *testing.T) {
	requireSyscallTable(t)
	errno := func(e uint) *uint { return &e }
	for _, c := range []struct {
		action        specs.LinuxSeccompAction
		errnoRet      *uint
		deflt, unknow sandbox.SeccompAction
	}{
		{specs.ActAllow, nil, sandbox.ActAllow, sandbox.ActAllow},
		{specs.ActLog, nil, sandbox.ActLog, sandbox.ActLog},
		{specs.ActKill, nil, sandbox.ActKill, sandbox.ActKill},
		{specs.ActKillThread, nil, sandbox.ActKill, sandbox.ActKill},
		{specs.ActKillProcess, nil, sandbox.ActKill, sandbox.ActKill},
		{specs.ActErrno, nil, sandbox.ActNotify(syscall.EPERM), sandbox.ActNotify(syscall.ENOSYS)},
		{specs.ActErrno, errno(13), sandbox.ActNotify(syscall.EACCES), sandbox.ActNotify(syscall.ENOSYS)},
		{specs.ActNotify, nil, sandbox.ActNotify(syscall.EPERM), sandbox.ActNotify(syscall.ENOSYS)},
	} {
		s := &specs.LinuxSeccomp{DefaultAction: c.action, DefaultErrnoRet: c.errnoRet,
			Syscalls: []specs.LinuxSyscall{{Names: []string{"execve", "execveat", "fcntl", "close", "sendmsg"}, Action: specs.ActAllow}}}
		p, _, err := FromOCI(s)
		if err != nil {
			t.Errorf("%s: %v", c.action, err)
			continue
		}
		if p.Default != c.deflt || p.Unknown != c.unknow {
			t.Errorf("%s: default %s, unknown %s; want %s, %s", c.action, p.Default, p.Unknown, c.deflt, c.unknow)
		}
		if err := checked(p); err != nil {
			t.Errorf("%s: %v", c.action, err)
		}
	}
}

// TestFromOCINormalize checks the shape rules: conditional rules
// before the unconditional one whatever the profile's order, redundant
// rules dropped, an argument compared twice split into rules.
func TestFromOCINormalize(t *testing.T) {
	requireSyscallTable(t)
	tiocsti := specs.LinuxSeccompArg{Index: 1, Value: 0x5412, Op: specs.OpEqualTo}
	s := &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"execve", "execveat", "fcntl", "close", "sendmsg", "ioctl"}, Action: specs.ActAllow},
			{Names: []string{"ioctl"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{tiocsti}},
			{Names: []string{"ioctl"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 1, Value: 1, Op: specs.OpEqualTo}}},
			{Names: []string{"ioctl"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{tiocsti}},
			{Names: []string{"flock"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 1, Value: 2, Op: specs.OpEqualTo}}},
			{Names: []string{"kill"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
				{Index: 0, Value: 1, Op: specs.OpGreaterThan}, {Index: 1, Value: 0, Op: specs.OpEqualTo}, {Index: 1, Value: 15, Op: specs.OpEqualTo},
			}},
			{Names: []string{"bogus_name", "execve"}, Action: specs.ActAllow},
		},
	}
	p, unknown, err := FromOCI(s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(unknown, []string{"bogus_name"}) {
		t.Errorf("unknown %v", unknown)
	}
	var ioctl, flock, kill []sandbox.SyscallRule
	for _, r := range p.Rules {
		switch {
		case slices.Contains(r.Names, "ioctl"):
			ioctl = append(ioctl, r)
		case slices.Contains(r.Names, "flock"):
			flock = append(flock, r)
		case slices.Contains(r.Names, "kill"):
			kill = append(kill, r)
		}
	}
	wantIoctl := []sandbox.SyscallRule{
		{Names: []string{"ioctl"}, Action: sandbox.ActNotify(syscall.EPERM), Args: []sandbox.ArgCond{{Index: 1, Op: sandbox.ArgEq, Value: 0x5412}}},
		{Names: []string{"execve", "execveat", "fcntl", "close", "sendmsg", "ioctl"}, Action: sandbox.ActAllow},
	}
	if !rulesEqual(ioctl, wantIoctl) {
		t.Errorf("ioctl's rules:\n%+v\nwant\n%+v", ioctl, wantIoctl)
	}
	if len(flock) != 0 {
		t.Errorf("flock's rule has the default action and should be gone: %+v", flock)
	}
	if len(kill) != 3 {
		t.Errorf("kill's rule compares argument 1 twice and should be 3 rules: %+v", kill)
	}
	checkCases(t, p, []dockerCase{
		{"ioctl", [6]uint64{0, 0x5412}, sandbox.ActNotify(syscall.EPERM)},
		{"ioctl", [6]uint64{0, 1}, sandbox.ActAllow},
		{"kill", [6]uint64{0, 9}, sandbox.ActNotify(syscall.EPERM)},
		{"kill", [6]uint64{2, 9}, sandbox.ActAllow}, // runc's reading: any comparison
		{"kill", [6]uint64{0, 15}, sandbox.ActAllow},
	})
}

func rulesEqual(a, b []sandbox.SyscallRule) bool {
	return slices.EqualFunc(a, b, func(x, y sandbox.SyscallRule) bool {
		return slices.Equal(x.Names, y.Names) && x.Action == y.Action && slices.Equal(x.Args, y.Args)
	})
}

func TestProfileErrors(t *testing.T) {
	requireSyscallTable(t)
	withKernel(t, "6.1.0", nil)
	native := string(nativeOCIArch())
	entries := func(syscalls string) string {
		return `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [` + syscalls + `]}`
	}
	read := `{"names": ["read"], "action": "SCMP_ACT_ALLOW"}, `
	for _, c := range []struct {
		name, profile, field string
	}{
		{"bad action", entries(`{"names": ["read"], "action": "SCMP_ACT_FOO"}`), "syscalls[0].action"},
		{"no action", entries(read + `{"names": ["read"]}`), "syscalls[1].action"},
		{"trap", entries(`{"names": ["read"], "action": "SCMP_ACT_TRAP"}`), "syscalls[0].action"},
		{"trace", entries(`{"names": ["read"], "action": "SCMP_ACT_TRACE"}`), "syscalls[0].action"},
		{"bad default", `{"defaultAction": "SCMP_ACT_NOPE"}`, "defaultAction"},
		{"no default", `{"syscalls": []}`, "defaultAction"},
		{"empty", `{}`, "defaultAction"},
		{"null", `null`, "defaultAction"},
		{"bad op", entries(read + `{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_FOO"}]}`), "syscalls[1].args[0].op"},
		{"arg index 6", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].index"},
		{"negative index", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}, {"index": -1, "value": 1, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[1].index"},
		{"index a string", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": "0", "value": 1, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].index"},
		{"value too big", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 18446744073709551616, "op": "SCMP_CMP_EQ"}]}`), "syscalls[0].args[0].value"},
		{"args an object", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": {}}`), "syscalls[0].args"},
		{"name a number", entries(`{"names": ["read", 7], "action": "SCMP_ACT_ALLOW"}`), "syscalls[0].names[1]"},
		{"names an object", entries(`{"names": {}, "action": "SCMP_ACT_ALLOW"}`), "syscalls[0].names"},
		{"syscalls an object", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": {}}`, "syscalls"},
		{"syscall a string", entries(read + `"read"`), "syscalls[1]"},
		{"defaultErrnoRet a string", `{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": "1"}`, "defaultErrnoRet"},
		{"caps a string", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": "CAP_SYS_ADMIN"}}`), "syscalls[0].includes.caps"},
		{"arch a number", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["x86", 64]}}`), "syscalls[0].excludes.arches[1]"},
		{"minKernel a number", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": 5}}`), "syscalls[0].includes.minKernel"},
		{"minKernel bad", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "excludes": {"minKernel": "5"}}`), "syscalls[0].excludes.minKernel"},
		{"minKernel 0.0", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "0.0"}}`), "syscalls[0].includes.minKernel"},
		{"comment a number", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "comment": 1}`), "syscalls[0].comment"},
		{"an array", `[]`, ""},
		{"not JSON", `{"defaultAction": `, ""},
		{"trailing data", `{"defaultAction": "SCMP_ACT_ALLOW"} {}`, ""},
		{"no native arch", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_ARM", "SCMP_ARCH_PPC64LE"]}`, "architectures"},
		{"unknown arch", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["` + native + `", "SCMP_ARCH_Z80"]}`, "architectures[1]"},
		{"archMap and architectures", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["` + native + `"], "archMap": [{"architecture": "` + native + `"}]}`, "archMap"},
		{"bad subarch", `{"defaultAction": "SCMP_ACT_ALLOW", "archMap": [{"architecture": "SCMP_ARCH_S390X", "subArchitectures": ["SCMP_ARCH_S390"]}, {"architecture": "` + native + `", "subArchitectures": ["SCMP_ARCH_Z80"]}]}`, "archMap[1].subArchitectures[0]"},
		{"name and names", entries(`{"name": "read", "names": ["write"], "action": "SCMP_ACT_ALLOW"}`), "syscalls[0]"},
		{"no names", entries(`{"action": "SCMP_ACT_ALLOW"}`), "syscalls[0].names"},
		{"empty name", entries(`{"names": [""], "action": "SCMP_ACT_ALLOW"}`), "syscalls[0].names[0]"},
		{"errnoRet with allow", entries(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}`), "syscalls[0].errnoRet"},
		{"errnoRet 0", entries(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": 0}`), "syscalls[0].errnoRet"},
		{"errnoRet 4096", entries(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": 4096}`), "syscalls[0].errnoRet"},
		{"defaultErrnoRet with kill", `{"defaultAction": "SCMP_ACT_KILL", "defaultErrnoRet": 1}`, "defaultErrnoRet"},
		{"unknown flag", `{"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_NEW_LISTENER"]}`, "flags[1]"},
		{"listenerPath", `{"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock"}`, "listenerPath"},
		{"listenerMetadata alone", `{"defaultAction": "SCMP_ACT_ALLOW", "listenerMetadata": "x"}`, "listenerMetadata"},
		{"two unconditional actions", entries(`{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"}, {"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["write"], "action": "SCMP_ACT_LOG"}`), "syscalls[2].action"},
		{"two conditional actions", entries(`{"names": ["fcntl"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_EQ"}]}, {"names": ["fcntl"], "action": "SCMP_ACT_LOG", "args": [{"index": 1, "value": 2, "op": "SCMP_CMP_EQ"}]}`), "syscalls[1].action"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := FromDocker([]byte(c.profile))
			var pe *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *Error", err)
			}
			if pe.Field != c.field {
				t.Errorf("Field %q, want %q (%v)", pe.Field, c.field, err)
			}
			prefix := "sandbox: seccomp profile "
			if c.field != "" {
				prefix = "sandbox: seccomp profile: " + c.field + ": "
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q, want it to start %q", err, prefix)
			}
		})
	}

	// What FromOCI alone can be given.
	for _, c := range []struct {
		name  string
		s     *specs.LinuxSeccomp
		field string
	}{
		{"nil", nil, ""},
		{"arg index 6", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{
			{Names: []string{"read"}, Action: specs.ActAllow},
			{Names: []string{"ioctl"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Op: specs.OpEqualTo}, {Index: 6, Op: specs.OpEqualTo}}},
		}}, "syscalls[1].args[1].index"},
		{"empty names", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Action: specs.ActAllow}}}, "syscalls[0].names"},
		{"errno 0 default", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: new(uint)}, "defaultErrnoRet"},
	} {
		t.Run("OCI "+c.name, func(t *testing.T) {
			_, _, err := FromOCI(c.s)
			var pe *Error
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want a *Error", err)
			}
			if pe.Field != c.field {
				t.Errorf("Field %q, want %q (%v)", pe.Field, c.field, err)
			}
		})
	}

	_, _, err := FromDocker([]byte(entries(`{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_FOO"}]}`)))
	if want := `sandbox: seccomp profile: syscalls[0].args[0].op: "SCMP_CMP_FOO" is not a comparison`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to start %q", err, want)
	}
}

func FuzzFromDocker(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if seccomp.NativeArch != 0 {
		b, err := json.Marshal(ToOCI(sandbox.DefaultSeccompPolicy()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["kill"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 9, "op": "SCMP_CMP_EQ"}, {"index": 1, "value": 19, "op": "SCMP_CMP_GE"}]}]}`))
	f.Add([]byte(`{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_FOO"}]}`))
	withKernel(f, "5.10.0", nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, unknown, err := FromDocker(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, sandbox.ErrNotSupported) {
				t.Fatalf("error matches neither ErrInvalid nor sandbox.ErrNotSupported: %v", err)
			}
			return
		}
		if !slices.IsSorted(unknown) {
			t.Errorf("unknown names not sorted: %v", unknown)
		}
		// What the reader accepts has the shape the model requires: New
		// may refuse it only as a whole (its filter blocks the init, or is
		// too long), not for one of its rules or actions.
		if err := checked(p); err != nil {
			var oe *sandbox.OptionError
			if !errors.As(err, &oe) || strings.Contains(oe.Option, ".Rules[") || strings.HasSuffix(oe.Option, ".Default") || strings.HasSuffix(oe.Option, ".Unknown") {
				t.Fatalf("accepted profile fails the policy's checks: %v", err)
			}
			return
		}
		// And it exports and imports again to the same decisions.
		q, unknown, err := FromOCI(ToOCI(p))
		if err != nil || len(unknown) > 0 {
			t.Fatalf("re-import: %v (unknown %v)", err, unknown)
		}
		compareDecisions(t, p, q, 64, nil)
	})
}
