//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A probe makes one syscall the default policy refuses, with arguments
// that would do something (or fail differently) were it let through.
type probe struct {
	name  string // as reported in Result.Denials
	errno syscall.Errno
	call  func() syscall.Errno
}

func raw(nr uintptr, a ...uintptr) func() syscall.Errno {
	return func() syscall.Errno {
		var args [6]uintptr
		copy(args[:], a)
		_, _, e := unix.RawSyscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
		return e
	}
}

// cloneNewUser forks with CLONE_NEWUSER; a child, should one appear, exits
// at once without touching the Go runtime.
func cloneNewUser() syscall.Errno {
	r, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && r == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if e == 0 {
		var ws unix.WaitStatus
		unix.Wait4(int(r), &ws, 0, nil)
	}
	return e
}

const addrNoRandomize = 0x0040000

var atFDCWD = uintptr(0xffffffffffffff9c) // AT_FDCWD (-100) as an unsigned word

func refusedProbes() []probe {
	str := func(s string) uintptr { p, _ := unix.BytePtrFromString(s); return uintptr(unsafe.Pointer(p)) }
	var c byte = 'x'
	var buf [64]byte
	bufp := uintptr(unsafe.Pointer(&buf[0]))
	eperm := syscall.EPERM
	return []probe{
		{"unshare", eperm, raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)},
		{"setns", eperm, raw(unix.SYS_SETNS, 0, unix.CLONE_NEWNET)},
		{"clone", eperm, cloneNewUser},
		{"mount", eperm, raw(unix.SYS_MOUNT, str("none"), str("/tmp"), str("tmpfs"), 0, 0)},
		{"umount2", eperm, raw(unix.SYS_UMOUNT2, str("/tmp"), unix.MNT_DETACH)},
		{"pivot_root", eperm, raw(unix.SYS_PIVOT_ROOT, str("/tmp"), str("/tmp"))},
		{"chroot", eperm, raw(unix.SYS_CHROOT, str("/tmp"))},
		{"open_tree", eperm, raw(unix.SYS_OPEN_TREE, atFDCWD, str("/tmp"), unix.OPEN_TREE_CLONE)},
		{"move_mount", eperm, raw(unix.SYS_MOVE_MOUNT, 0, str(""), atFDCWD, str("/tmp"), unix.MOVE_MOUNT_F_EMPTY_PATH)},
		{"fsopen", eperm, raw(unix.SYS_FSOPEN, str("tmpfs"), 0)},
		{"fsmount", eperm, raw(unix.SYS_FSMOUNT, 0, 0, 0)},
		{"fspick", eperm, raw(unix.SYS_FSPICK, atFDCWD, str("/tmp"), 0)},
		{"mount_setattr", eperm, raw(unix.SYS_MOUNT_SETATTR, atFDCWD, str("/tmp"), 0, 0, 0)},
		{"ptrace", eperm, raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME)},
		{"process_vm_readv", eperm, raw(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), 0, 0, 0, 0, 0)},
		{"process_vm_writev", eperm, raw(unix.SYS_PROCESS_VM_WRITEV, uintptr(os.Getpid()), 0, 0, 0, 0, 0)},
		{"bpf", eperm, raw(unix.SYS_BPF, unix.BPF_PROG_LOAD, 0, 0)},
		{"perf_event_open", eperm, raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0)},
		{"keyctl", eperm, raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(0)-2, 0)},
		{"add_key", eperm, raw(unix.SYS_ADD_KEY, str("user"), str("k"), bufp, 1, ^uintptr(0)-1)},
		{"request_key", eperm, raw(unix.SYS_REQUEST_KEY, str("user"), str("k"), 0, 0)},
		{"userfaultfd", eperm, raw(unix.SYS_USERFAULTFD, 0)},
		{"io_uring_setup", eperm, raw(unix.SYS_IO_URING_SETUP, 1, bufp)},
		{"io_uring_enter", eperm, raw(unix.SYS_IO_URING_ENTER, ^uintptr(0), 0, 0, 0, 0, 0)},
		{"io_uring_register", eperm, raw(unix.SYS_IO_URING_REGISTER, ^uintptr(0), 0, 0, 0)},
		{"kexec_load", eperm, raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0)},
		{"kexec_file_load", eperm, raw(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, 0)},
		{"init_module", eperm, raw(unix.SYS_INIT_MODULE, bufp, 1, str(""))},
		{"finit_module", eperm, raw(unix.SYS_FINIT_MODULE, ^uintptr(0), str(""), 0)},
		{"delete_module", eperm, raw(unix.SYS_DELETE_MODULE, str("nope"), 0)},
		{"reboot", eperm, raw(unix.SYS_REBOOT, 0, 0, 0, 0)},
		{"swapon", eperm, raw(unix.SYS_SWAPON, str("/tmp/nope"), 0)},
		{"swapoff", eperm, raw(unix.SYS_SWAPOFF, str("/tmp/nope"))},
		{"acct", eperm, raw(unix.SYS_ACCT, 0)},
		{"quotactl", eperm, raw(unix.SYS_QUOTACTL, 0, str("/"), 0, 0)},
		{"clock_settime", eperm, raw(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, bufp)},
		{"settimeofday", eperm, raw(unix.SYS_SETTIMEOFDAY, 0, 0)},
		{"adjtimex", eperm, raw(unix.SYS_ADJTIMEX, bufp)},
		{"open_by_handle_at", eperm, raw(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), bufp, 0)},
		{"name_to_handle_at", eperm, raw(unix.SYS_NAME_TO_HANDLE_AT, atFDCWD, str("/"), bufp, bufp, 0)},
		// ADDR_NO_RANDOMIZE would turn ASLR off for what the program execs.
		{"personality", eperm, raw(unix.SYS_PERSONALITY, addrNoRandomize)},
		// With high bits set that the kernel ignores: CVE-2019-10063.
		{"ioctl", eperm, raw(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))},
		{"socket", eperm, raw(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)},
		{"socket", eperm, raw(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
		{"socket", eperm, raw(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)},
		{"socketpair", eperm, raw(unix.SYS_SOCKETPAIR, unix.AF_INET, unix.SOCK_STREAM, 0, bufp)},
		// A number no table names: ENOSYS, so programs fall back.
		{"syscall_1000", syscall.ENOSYS, raw(1000)},
	}
}

// allowedProbes are calls of the same syscalls the policy lets through.
func allowedProbes() map[string]func() syscall.Errno {
	var buf [64]byte
	return map[string]func() syscall.Errno{
		"personality(query)": raw(unix.SYS_PERSONALITY, 0xffffffff),
		"ioctl(TIOCGWINSZ)": func() syscall.Errno {
			e := raw(unix.SYS_IOCTL, 0, unix.TIOCGWINSZ, uintptr(unsafe.Pointer(&buf[0])))()
			return okUnless(e, unix.ENOTTY)
		},
		"socket(AF_INET)":  closing(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0),
		"socket(AF_INET6)": closing(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, 0),
		"socket(AF_UNIX)":  closing(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0),
		"socket(route)":    closing(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE),
		"clone3":           func() syscall.Errno { return okUnless(raw(unix.SYS_CLONE3, 0, 0)(), unix.ENOSYS) },
	}
}

func okUnless(e, want syscall.Errno) syscall.Errno {
	if e == want {
		return 0
	}
	if e == 0 {
		return unix.EINVAL // not what we expected either
	}
	return e
}

func closing(nr uintptr, a ...uintptr) func() syscall.Errno {
	return func() syscall.Errno {
		r, _, e := unix.RawSyscall(nr, a[0], a[1], a[2])
		if e == 0 {
			unix.Close(int(r))
		}
		return e
	}
}

func init() {
	// refused makes each refused probe and prints "name errno" per line.
	helpers["refused"] = func([]string) int {
		runtime.LockOSThread()
		for _, p := range refusedProbes() {
			fmt.Printf("%s %d\n", p.name, int(p.call()))
		}
		return 0
	}
	// allowed makes each allowed probe and prints "name errno" per line.
	helpers["allowed"] = func([]string) int {
		for name, call := range allowedProbes() {
			fmt.Printf("%s %d\n", name, int(call()))
		}
		return 0
	}
	// violate prints "before", calls ptrace, and prints "after".
	helpers["violate"] = func([]string) int {
		fmt.Println("before")
		unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
		fmt.Println("after")
		return 0
	}
	// x32 makes getpid through the x32 ABI.
	helpers["x32"] = func([]string) int {
		fmt.Println("before")
		unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		fmt.Println("after")
		return 0
	}
	// syscalls makes n calls of getpid, or of 4 KiB reads of /dev/zero
	// ("read"), and prints the time per call in ns.
	helpers["syscalls"] = func(args []string) int {
		n, _ := strconv.Atoi(args[1])
		zero, err := os.Open("/dev/zero")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		buf := make([]byte, 4096)
		call := func() { unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0) }
		if args[0] == "read" {
			call = func() { unix.Read(int(zero.Fd()), buf) }
		}
		start := time.Now()
		for range n {
			call()
		}
		fmt.Println(float64(time.Since(start).Nanoseconds()) / float64(n))
		return 0
	}
}

// parseProbeOutput maps "name errno" lines to their errnos, in order.
func parseProbeOutput(t *testing.T, out []byte) [][2]string {
	var lines [][2]string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("probe output line %q", l)
		}
		lines = append(lines, [2]string{f[0], f[1]})
	}
	return lines
}

func TestSeccompRefusesAndReports(t *testing.T) {
	requireSandbox(t)
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("inprocess=%v", inProcess), func(t *testing.T) {
			res := run(t, Options{Binds: []Bind{helperBind(t)}, Start: inProcessIf(inProcess)}, helperCmd("refused"))
			if !res.Success() {
				t.Fatalf("%v\n%s", res.Err(), res.Stderr)
			}
			probes := refusedProbes()
			got := parseProbeOutput(t, res.Stdout)
			if len(got) != len(probes) {
				t.Fatalf("%d probe results for %d probes:\n%s", len(got), len(probes), res.Stdout)
			}
			want := map[string]int{}
			for i, p := range probes {
				if got[i][0] != p.name || got[i][1] != fmt.Sprint(int(p.errno)) {
					t.Errorf("%s: errno %s, want %d (%v)", p.name, got[i][1], int(p.errno), p.errno)
				}
				want[p.name]++
			}
			// Every refusal is in the report, counted, with its errno; the
			// Go runtime and the probes' own bookkeeping made none.
			denied := map[string]Denial{}
			for _, d := range res.Denials {
				denied[d.Syscall] = d
			}
			for name, n := range want {
				d, ok := denied[name]
				if !ok {
					t.Errorf("%s refused but not in Result.Denials %v", name, res.Denials)
					continue
				}
				if d.Count != n {
					t.Errorf("%s: Denials count %d, want %d", name, d.Count, n)
				}
			}
			for name, d := range denied {
				if want[name] == 0 {
					t.Errorf("unexpected denial %+v", d)
				}
			}
			if d := denied["syscall_1000"]; d.Errno != syscall.ENOSYS {
				t.Errorf("unknown syscall reported with %v, want ENOSYS", d.Errno)
			}
		})
	}
}

func TestSeccompAllowsWhatIsNotRefused(t *testing.T) {
	requireSandbox(t)
	res := run(t, Options{Binds: []Bind{helperBind(t)}}, helperCmd("allowed"))
	if !res.Success() {
		t.Fatalf("%v\n%s", res.Err(), res.Stderr)
	}
	got := parseProbeOutput(t, res.Stdout)
	if len(got) != len(allowedProbes()) {
		t.Fatalf("output:\n%s", res.Stdout)
	}
	for _, g := range got {
		if g[1] != "0" {
			t.Errorf("%s: errno %s, want success", g[0], g[1])
		}
	}
	// clone3's ENOSYS is an expected fallback, not a reported refusal.
	if len(res.Denials) != 0 {
		t.Errorf("Denials = %v, want none", res.Denials)
	}
}

func TestSeccompKillOnViolation(t *testing.T) {
	requireSandbox(t)
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("inprocess=%v", inProcess), func(t *testing.T) {
			res := run(t, Options{Binds: []Bind{helperBind(t)}, Seccomp: killOnRefusal(DefaultSeccompPolicy(), true), Start: inProcessIf(inProcess)}, helperCmd("violate"))
			if res.Outcome != SeccompKilled || res.Violation != "ptrace" {
				t.Fatalf("Outcome %v, Violation %q; want seccomp kill of ptrace\n%s", res.Outcome, res.Violation, res.Stdout)
			}
			if out := string(res.Stdout); out != "before\n" {
				t.Errorf("stdout %q: the program went on past the refused syscall", out)
			}
			if res.Err() == nil {
				t.Error("Result.Err() is nil for a seccomp kill")
			}
		})
	}
	// Without the option the same program carries on.
	res := run(t, Options{Binds: []Bind{helperBind(t)}}, helperCmd("violate"))
	if !res.Success() || string(res.Stdout) != "before\nafter\n" || res.Violation != "" {
		t.Errorf("without SeccompKill: %v, stdout %q, violation %q", res.Err(), res.Stdout, res.Violation)
	}
}

func TestSeccompForeignABIKills(t *testing.T) {
	requireSandbox(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the x32 ABI exists only on amd64")
	}
	res := run(t, Options{Binds: []Bind{helperBind(t)}}, helperCmd("x32"))
	if res.Outcome != Signaled || res.Signal != syscall.SIGSYS || string(res.Stdout) != "before\n" {
		t.Errorf("x32 getpid: %v signal %v stdout %q; want killed by SIGSYS after \"before\"", res.Outcome, res.Signal, res.Stdout)
	}
}

func TestSeccompNoSeccompLetsThrough(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("setarch"); err != nil {
		t.Skip("setarch (util-linux) is not installed")
	}
	// personality(ADDR_NO_RANDOMIZE) is harmless and succeeds unfiltered.
	res := run(t, Options{Seccomp: Unconfined{}}, Command("/bin/sh", "-c", "setarch -R true && echo ok"))
	if !res.Success() || string(res.Stdout) != "ok\n" || len(res.Denials) != 0 {
		t.Errorf("unconfined setarch -R: %v %q %q %v", res.Err(), res.Stdout, res.Stderr, res.Denials)
	}
	res = run(t, Options{}, Command("/bin/sh", "-c", "setarch -R true"))
	if res.Success() || len(res.Denials) != 1 || res.Denials[0].Syscall != "personality" {
		t.Errorf("setarch -R under the default policy: %v, denials %v", res.Err(), res.Denials)
	}
}

// Ordinary workloads run under the default policy and trip no refusal.
func TestSeccompWorkloads(t *testing.T) {
	requireSandbox(t)
	type workload struct {
		name, needs, script string
		short               bool // cheap enough for -short
	}
	workloads := []workload{
		{"shell and coreutils", "sh", `set -e
			mkdir -p d/e && printf 'b\na\n' > d/e/f && sort d/e/f | tr a-z A-Z | head -1 | grep -q A
			ln -s d/e/f l && cat l | wc -l | grep -q 2 && cp -r d d2 && mv d2 d3 && rm -r d3
			find . -name f | xargs ls -l >/dev/null && date >/dev/null && id -u | grep -q 1000
			(sleep 0.1 & wait) && echo $(( 6 * 7 )) | grep -q 42 && sha256sum d/e/f >/dev/null
			tar -cf /tmp/a.tar d && tar -tf /tmp/a.tar | grep -q d/e/f && stat d >/dev/null && echo done`, true},
		{"python threads and subprocess", "python3", `python3 - <<'EOF'
import threading, subprocess, socket, os, tempfile, multiprocessing
out = []
ts = [threading.Thread(target=lambda i=i: out.append(i*i)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
assert sorted(out) == [i*i for i in range(8)]
assert subprocess.run(["echo", "hi"], capture_output=True).stdout == b"hi\n"
with multiprocessing.Pool(2) as p:
    assert p.map(abs, [-1, -2]) == [1, 2]
a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
socket.getaddrinfo("localhost", 80)
with tempfile.NamedTemporaryFile() as f: f.write(b"data"); f.flush(); os.fsync(f.fileno())
print("done")
EOF`, true},
		{"C program with gcc", "gcc", `set -e
			cat > /tmp/t.c <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
static void *work(void *p) { return p; }
int main(void) {
	pthread_t t; void *r;
	pthread_create(&t, 0, work, (void *)42); pthread_join(t, &r);
	pid_t pid = fork(); if (pid == 0) _exit(7);
	int st; waitpid(pid, &st, 0);
	printf("%ld %d\n", (long)r, WEXITSTATUS(st));
	return 0;
}
EOF
			gcc -O1 -pthread -o /tmp/t /tmp/t.c && /tmp/t | grep -q '42 7' && echo done`, true},
		{"Go program built with go", "go", `set -e
			export HOME=/tmp GOCACHE=/tmp/gocache GOPATH=/tmp/gopath GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off
			mkdir -p /tmp/h && cd /tmp/h
			printf 'module h\ngo 1.21\n' > go.mod
			printf 'package main\nimport ("fmt";"sync")\nfunc main(){var wg sync.WaitGroup;n:=0;var mu sync.Mutex;for i:=0;i<4;i++{wg.Add(1);go func(){mu.Lock();n++;mu.Unlock();wg.Done()}()};wg.Wait();fmt.Println(n)}\n' > main.go
			go build -o h . && ./h | grep -q 4 && echo done`, false},
		{"node with a worker", "node", `node -e '
const { Worker } = require("worker_threads");
const w = new Worker("require(\"worker_threads\").parentPort.postMessage(6*7)", { eval: true });
w.on("message", (m) => { if (m !== 42) process.exit(1); require("child_process").execFileSync("true"); console.log("done"); w.terminate(); });'`, true},
	}
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			// Only what the sandbox sees: the host's /usr and /bin.
			dir := ""
			for _, d := range []string{"/usr/bin", "/bin", "/usr/local/bin", "/usr/local/go/bin"} {
				if _, err := os.Stat(d + "/" + w.needs); err == nil {
					dir = d
					break
				}
			}
			if dir == "" {
				t.Skipf("%s is not installed under /usr or /bin", w.needs)
			}
			if testing.Short() && !w.short {
				t.Skip("-short: builds the Go standard library in an empty cache (~1 min)")
			}
			opts := Options{Limits: Limits{TmpSize: 1 << 30, Memory: 2 << 30, CPUs: 2, Pids: 512}, Env: []string{"PATH=" + dir + ":/usr/local/bin:/usr/bin:/bin"}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			res, err := newTest(t, opts).Run(ctx, Command("/bin/sh", "-c", w.script))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Success() || !strings.HasSuffix(string(res.Stdout), "done\n") {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s\ndenials: %v", res.Err(), res.Stdout, res.Stderr, res.Denials)
			}
			if len(res.Denials) != 0 {
				t.Errorf("an ordinary workload was refused syscalls: %v", res.Denials)
			}
		})
	}
}

func TestSeccompPolicyErrors(t *testing.T) {
	cases := []struct {
		name   string
		opts   Options
		option string
	}{
		{"unknown name", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow,
			Rules: []SyscallRule{{Names: []string{"read", "no_such_call"}, Action: ActKill}}}}, "Options.Seccomp.Rules[0].Names[1]"},
		{"no action", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow,
			Rules: []SyscallRule{{Names: []string{"read"}}}}}, "Options.Seccomp.Rules[0].Action"},
		{"errno 0", Options{Seccomp: &SeccompPolicy{Default: ActErrno(0), Unknown: ActAllow}}, "Options.Seccomp.Default"},
		{"arg index", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow,
			Rules: []SyscallRule{{Names: []string{"read"}, Action: ActKill, Args: []ArgCond{{Index: 6, Op: ArgEq}}}}}}, "Options.Seccomp.Rules[0].Args[0].Index"},
		{"shape", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow,
			Rules: []SyscallRule{{Names: []string{"write"}, Action: ActKill, Args: []ArgCond{{Index: 0, Op: ArgEq}}},
				{Names: []string{"read"}, Action: ActKill, Args: []ArgCond{{Index: 0, Op: ArgEq}}},
				{Names: []string{"read"}, Action: ActLog, Args: []ArgCond{{Index: 1, Op: ArgEq}}}}}}, "Options.Seccomp.Rules[2]"},
		{"refuses execve", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow,
			Rules: []SyscallRule{{Names: []string{"execve"}, Action: ActErrno(syscall.EPERM)}}}}, "Options.Seccomp"},
		// Allowing every ioctl in front of the default would silently
		// drop its TIOCSTI refusal: refused, naming the dead rule.
		{"dead conditional", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow, Rules: append(
			[]SyscallRule{{Names: []string{"ioctl"}, Action: ActAllow}}, DefaultSeccompPolicy().Rules...)}}, "Options.Seccomp.Rules[4].Names[0]"},
		{"mask", Options{Seccomp: &SeccompPolicy{Default: ActAllow, Unknown: ActAllow,
			Rules: []SyscallRule{{Names: []string{"read"}, Action: ActKill, Args: []ArgCond{{Index: 0, Op: ArgMaskedEq, Mask: 0xff, Value: 0x100}}}}}}, "Options.Seccomp.Rules[0].Args[0].Value"},
		{"errno range", Options{Seccomp: &SeccompPolicy{Default: ActNotify(4095), Unknown: ActAllow}}, "Options.Seccomp.Default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := New(c.opts).Err()
			var oe *OptionError
			if !errors.As(err, &oe) || !errors.Is(err, ErrInvalidOption) || oe.Option != c.option {
				t.Fatalf("err = %v, want an OptionError naming %s", err, c.option)
			}
		})
	}
	// The shape error names the syscall, not its number.
	err := New(cases[4].opts).Err()
	if !strings.Contains(err.Error(), `"read"`) {
		t.Errorf("shape error does not name the syscall: %v", err)
	}
}

// A caller's own policy: start from the default, amend, and the run sees it.
func TestSeccompAmendedPolicy(t *testing.T) {
	requireSandbox(t)
	p := DefaultSeccompPolicy()
	// mkdir fails with EROFS-like errno of our choosing, unreported.
	p.Rules = append([]SyscallRule{{Names: []string{"mkdirat", "mkdir"}, Action: ActErrno(syscall.EDQUOT)}}, p.Rules...)
	res := run(t, Options{Seccomp: p}, Command("/bin/sh", "-c", "mkdir /tmp/x; echo $?"))
	if !strings.Contains(string(res.Stderr), "quota") || string(res.Stdout) != "1\n" {
		t.Errorf("mkdir under ActErrno(EDQUOT): stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if len(res.Denials) != 0 {
		t.Errorf("ActErrno refusals were reported: %v", res.Denials)
	}
	// The same with ActNotify: reported, with the errno.
	p = DefaultSeccompPolicy()
	p.Rules = append([]SyscallRule{{Names: []string{"mkdirat", "mkdir"}, Action: ActNotify(syscall.EDQUOT)}}, p.Rules...)
	res = run(t, Options{Seccomp: p}, Command("/bin/sh", "-c", "mkdir /tmp/x; mkdir /tmp/y; true"))
	if len(res.Denials) != 1 || res.Denials[0].Count != 2 || res.Denials[0].Errno != syscall.EDQUOT {
		t.Errorf("Denials = %+v, want mkdir(at) twice with EDQUOT", res.Denials)
	}
}

func TestSeccompActionString(t *testing.T) {
	for a, want := range map[SeccompAction]string{
		ActAllow: "allow", ActKill: "kill", ActLog: "log",
		ActErrno(syscall.EPERM): "errno(EPERM)", ActNotify(syscall.ENOSYS): "notify(ENOSYS)",
	} {
		if a.String() != want {
			t.Errorf("%#x: %q, want %q", uint32(a), a.String(), want)
		}
	}
}
