package seccomp

import (
	"syscall"
	"testing"
)

func TestCompileForBuild(t *testing.T) {
	if BuildCompiler != "go" && BuildCompiler != "libseccomp" {
		t.Fatalf("BuildCompiler %q", BuildCompiler)
	}
	if NativeArch == 0 {
		t.Skip("no syscall table (NativeArch) for this GOARCH")
	}
	t.Logf("this build compiles with %s", BuildCompiler)
	f := Filter{
		Arch: NativeArch, MaxNr: 100, NoX32: true, Default: Errno(syscall.EPERM), Unknown: Errno(syscall.ENOSYS),
		Rules: []Rule{
			{Nr: 16, Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: 0x5412}}, Action: Errno(syscall.EPERM)},
			{Nr: 16, Action: Allow},
			{Nr: 41, Conds: []Cond{{Arg: 0, Op: Eq, Value: 1}}, Action: Allow},
			{Nr: 41, Conds: []Cond{{Arg: 0, Op: Eq, Value: 2}}, Action: Allow},
			{Nr: 60, Action: Notify(syscall.EACCES)},
		},
	}
	prog, err := CompileForBuild(f)
	if err != nil {
		t.Fatal(err)
	}
	for nr := uint32(0); nr <= 110; nr++ {
		for _, args := range [][6]uint64{{}, {1, 0x5412}, {2, 1<<32 | 0x5412}, {3, 0x5413}} {
			if got, want := run(t, prog, NativeArch, nr, args), reference(f, NativeArch, nr, args); got != want {
				t.Fatalf("nr %d args %#x: %#x, reference %#x", nr, args[:2], uint32(got), uint32(want))
			}
		}
	}
	// A rule after the fallback never applies under first match; Check
	// refuses it, whichever compiler the build has.
	f.Rules = append(f.Rules, Rule{Nr: 16, Conds: []Cond{{Arg: 0, Op: Eq, Value: 0}}, Action: Errno(syscall.EPERM)})
	if _, err := CompileForBuild(f); err == nil {
		t.Error("CompileForBuild accepted a filter Check refuses")
	}
}
