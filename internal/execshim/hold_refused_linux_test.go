package execshim

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// refuseEnv, in this test binary's environment, makes it a helper that
// loads a seccomp filter failing one system call (its number, the
// variable's value) with EPERM, then execs its arguments: the program,
// then its argv. It stands in for a sandbox's filter that refuses what
// the holding shim needs.
const refuseEnv = "SHIMTEST_REFUSE_SYSCALL"

func TestMain(m *testing.M) {
	if nr := os.Getenv(refuseEnv); nr != "" {
		refuseAndExec(nr)
	}
	os.Exit(m.Run())
}

// refuseAndExec is the helper's whole run; it does not return.
func refuseAndExec(nr string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "refusing helper:", err)
		os.Exit(2)
	}
	n, err := strconv.ParseUint(nr, 10, 32)
	if err != nil || len(os.Args) < 3 {
		fail(fmt.Errorf("want %s=<syscall number> and a program with its argv, have %q and %q", refuseEnv, nr, os.Args))
	}
	// The filter is the thread's: load it on the thread that execs.
	runtime.LockOSThread()
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the syscall's number
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(n)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		fail(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, refuseEnv+"=") })
	fail(unix.Exec(os.Args[1], os.Args[2:], env))
}

// refusing returns a wrap for runShim that runs the shim's command under
// a filter that fails syscall nr with EPERM.
func refusing(t *testing.T, nr uintptr) func(*exec.Cmd) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(cmd *exec.Cmd) *exec.Cmd {
		helper := exec.Command(self, append([]string{cmd.Path}, cmd.Args...)...)
		helper.Env = append(slices.Clone(cmd.Env), fmt.Sprintf("%s=%d", refuseEnv, nr))
		helper.ExtraFiles = cmd.ExtraFiles
		return helper
	}
}

// A filter that refuses what hold mode needs makes the shim report that
// as a failed exec is reported, and exit, rather than hold without
// reaping, or spin in a wait that fails at once.
func TestHoldRefused(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			path, prefix := shimRunner(t, goarch)
			for _, c := range []struct {
				name string
				nr   uintptr
			}{
				{"rt_sigaction", unix.SYS_RT_SIGACTION},
				{"ppoll", unix.SYS_PPOLL},
			} {
				o := runShim(t, path, prefix, HoldArgs(8), refusing(t, c.nr))
				want := record(8, uint32(syscall.EPERM))
				if string(o.report) != string(want) || o.code != ExitFailed || o.stdout != "" || o.stderr != "" {
					t.Errorf("%s refused: stdout %q, stderr %q, report %q, exit %d; want report %q, exit %d",
						c.name, o.stdout, o.stderr, o.report, o.code, want, ExitFailed)
				}
			}
		})
	}
}
