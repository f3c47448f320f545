//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/recipe"
)

// These tests look from inside the sandbox: what the program can see and do.

func run(t *testing.T, opts Options, cmd *Cmd) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newTest(t, opts)
	defer s.Close()
	res, err := s.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("Run %v: %v", cmd.Args, err)
	}
	return res
}

// sh runs a shell script and fails the test unless it exits 0.
func sh(t *testing.T, opts Options, script string) string {
	t.Helper()
	res := run(t, opts, Command("/bin/sh", "-c", script))
	if !res.Success() {
		t.Fatalf("script %q: %v\nstdout:\n%s\nstderr:\n%s", script, res.Err(), res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// sharedTempDir is a temporary directory the sandbox's host uid can write:
// t.TempDir's parent is private to the test's own uid.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxtest-")
	if err == nil {
		err = os.Chmod(dir, 0o777)
	}
	if err != nil {
		t.Fatal(err)
	}
	addMadeDir(dir)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestBindSourceUnreachable(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("as an unprivileged caller the sandbox has the caller's own access")
	}
	dir := t.TempDir() // its parent is 0700 root
	_, err := newTest(t, Options{Binds: []Bind{{Source: dir, Target: "/data"}}}).Run(context.Background(), Command("true"))
	var se *SetupError
	if !errors.As(err, &se) || !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "Options.Binds[0]") ||
		!strings.Contains(err.Error(), dir) {
		t.Errorf("bind of a path the sandbox uid cannot reach: err = %v, want a SetupError naming Options.Binds[0] and the path", err)
	}
}

func TestOnlyOwnProcesses(t *testing.T) {
	requireSandbox(t)
	out := sh(t, Options{}, `cat /proc/1/cmdline | tr '\0' ' '; echo; ls /proc | grep -c '^[0-9][0-9]*$'`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "/bin/sh -c") {
		t.Fatalf("pid 1 is not the program:\n%s", out)
	}
	// sh, cat/ls/grep: a handful at most; the host has far more.
	if n := strings.TrimSpace(lines[1]); n > "5" || len(n) != 1 {
		t.Errorf("sandbox sees %s processes in /proc, want only its own few", n)
	}
}

func TestOnlyLoopbackAndUp(t *testing.T) {
	requireSandbox(t)
	res := run(t, Options{Binds: []Bind{helperBind(t)}}, helperCmd("netifs"))
	if got := strings.TrimSpace(string(res.Stdout)); got != "lo up=true" {
		t.Errorf("interfaces inside: %q (stderr %s), want only lo, up", got, res.Stderr)
	}
}

func TestHostInvisible(t *testing.T) {
	requireSandbox(t)
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(canary, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := sh(t, Options{}, fmt.Sprintf(`for p in %s /root /home /etc/shadow /etc/ssh /var /sys /boot /run; do
		test -e "$p" && echo "visible $p"; done; true`, canary))
	if out != "" {
		t.Errorf("host paths visible inside:\n%s", out)
	}
	// The generated files, plus what the host has of those it lends.
	want := etcWant(t)
	etc := strings.Fields(sh(t, Options{}, `ls /etc`))
	if !slices.Equal(etc, want) {
		t.Errorf("/etc holds %q, want only %q", etc, want)
	}
}

func TestReadOnlyRootAndWritableScratch(t *testing.T) {
	requireSandbox(t)
	dir := sharedTempDir(t)
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o666)
	opts := Options{Binds: []Bind{{Source: dir, Target: "/data"}}}
	out := sh(t, opts, `for p in /newfile /usr/newfile /bin/newfile /etc/newfile /dev/newfile /data/newfile; do
		touch "$p" 2>/dev/null && echo "writable $p"; done
		echo x >> /data/f 2>/dev/null && echo "writable /data/f"
		for p in /tmp/a /workspace/b /dev/shm/c; do touch "$p" || echo "not writable $p"; done; true`)
	if out != "" {
		t.Errorf("write access wrong:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "x" {
		t.Errorf("read-only bind was changed: %q", b)
	}
}

func TestWritableBindAndWorkspace(t *testing.T) {
	requireSandbox(t)
	ws, data := sharedTempDir(t), sharedTempDir(t)
	sh(t, Options{Workspace: HostWorkspace{Dir: ws}, Binds: []Bind{{Source: data, Target: "/data", Writable: true}}},
		`echo one > /workspace/out && echo two > /data/out && test "$(pwd)" = /workspace`)
	for _, f := range []string{filepath.Join(ws, "out"), filepath.Join(data, "out")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("file written inside is not on the host: %v", err)
		}
	}
}

func TestIdentity(t *testing.T) {
	requireSandbox(t)
	out := sh(t, Options{}, `id -u; id -g; id -un; hostname; cat /proc/self/uid_map /proc/self/gid_map`)
	f := strings.Fields(out)
	if len(f) != 10 {
		t.Fatalf("unexpected output:\n%s", out)
	}
	wantHost := fmt.Sprint(hostID(os.Getuid()))
	if f[0] != "1000" || f[1] != "1000" || f[2] != "sandbox" || f[3] != "sandbox" {
		t.Errorf("uid, gid, user, hostname = %v, want 1000 1000 sandbox sandbox", f[:4])
	}
	if f[4] != "1000" || f[5] != wantHost || f[6] != "1" || f[5] == "0" {
		t.Errorf("uid_map = %v, want 1000 %s 1 (never host root)", f[4:7], wantHost)
	}
	if wantGid := fmt.Sprint(hostID(os.Getgid())); f[7] != "1000" || f[8] != wantGid {
		t.Errorf("gid_map = %v, want 1000 %s 1", f[7:10], wantGid)
	}
}

func TestNoPrivileges(t *testing.T) {
	requireSandbox(t)
	out := sh(t, Options{}, `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status`)
	want := map[string]string{"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1"}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		got[k] = strings.TrimSpace(v)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestEnvironmentIsExactlyGiven(t *testing.T) {
	requireSandbox(t)
	t.Setenv("SBXTEST_HOST_SECRET", "leak")
	cmd := helperCmd("env")
	cmd.Env = append(cmd.Env, "FOO=bar", "PATH=/usr/bin")
	res := run(t, Options{Binds: []Bind{helperBind(t)}, Env: []string{"BASE=1", "FOO=base"}}, cmd)
	got := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	slices.Sort(got)
	want := []string{"BASE=1", "FOO=bar", "HOME=/workspace", "LANG=C.UTF-8", "PATH=/usr/bin", helperEnv + "=env"}
	// And Node's pointer to the trust store, where the host has one.
	if bundle := recipe.TrustBundleIn("", false); bundle != "" {
		want = append(want, "NODE_EXTRA_CA_CERTS="+bundle)
		slices.Sort(want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("environment inside:\n%v\nwant\n%v", got, want)
	}
}

func TestOnlyStdioInherited(t *testing.T) {
	requireSandbox(t)
	// An fd the caller holds open without close-on-exec must not leak.
	f, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// ls, a C program that starts no runtime of its own, opens the
	// directory it lists as the lowest free fd: 3 when nothing else came in.
	for _, inProcess := range []bool{false, true} {
		res := run(t, Options{Start: inProcessIf(inProcess)}, Command("/bin/ls", "/proc/self/fd"))
		if got := strings.Fields(string(res.Stdout)); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
			t.Errorf("InProcess=%v: open fds inside: %q (stderr %s), want 0 1 2 and ls's own 3", inProcess, got, res.Stderr)
		}
	}
}

func TestProcMasked(t *testing.T) {
	requireSandbox(t)
	out := sh(t, Options{}, `for f in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug; do
			test -e $f || continue; n=$(head -c 64 $f 2>/dev/null | wc -c); test "$n" = 0 || echo "readable $f"; done
		echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null && echo "writable /proc/sys"
		ls /proc/acpi 2>/dev/null | grep . && echo "listed /proc/acpi"
		readlink /proc/1/exe; true`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Errorf("/proc not masked:\n%s", out)
	}
	// The program is pid 1; the host binary is nowhere to be reached.
	if exe := lines[len(lines)-1]; strings.Contains(exe, "memfd") || strings.Contains(exe, "sandbox") {
		t.Errorf("/proc/1/exe = %q, the host binary", exe)
	}
}

func TestProcessHygiene(t *testing.T) {
	requireSandbox(t)
	// Fields 6 and 7 of /proc/self/stat: session and controlling tty.
	out := sh(t, Options{Limits: Limits{OpenFiles: 512}}, `ulimit -c; ulimit -n; cat /proc/self/oom_score_adj; cut -d' ' -f6,7 /proc/1/stat`)
	if f := strings.Fields(out); !slices.Equal(f, []string{"0", "512", "0", "1", "0"}) {
		t.Errorf("core limit, nofile, oom_score_adj, session, tty = %v, want [0 512 0 1 0]", f)
	}
}

func TestOOMScoreNotInherited(t *testing.T) {
	requireSandbox(t)
	old, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-900"), 0); err != nil {
		t.Skipf("cannot lower the test's own oom_score_adj to set up the case (needs CAP_SYS_RESOURCE): %v", err)
	}
	defer os.WriteFile("/proc/self/oom_score_adj", old, 0)
	// InProcess: the init is cloned from this process and inherits -900.
	if out := sh(t, Options{Start: InProcess{}}, `cat /proc/self/oom_score_adj`); strings.TrimSpace(out) != "0" {
		t.Errorf("oom_score_adj inside = %q, want 0", out)
	}
	// The reset is the sandbox's alone.
	if now, _ := os.ReadFile("/proc/self/oom_score_adj"); strings.TrimSpace(string(now)) != "-900" {
		t.Errorf("the caller's oom_score_adj is %q after the run, want its own -900", now)
	}
	// A process entering a live sandbox is forked from a spawner that
	// inherited -900 from its caller (a process of its own here).
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"=liveoom")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1000" {
		t.Errorf("oom_score_adj of a live sandbox's entrant, its spawner at -900: %q, %v; want 1000, above its init's", out, err)
	}
}

func TestWorkingDirectory(t *testing.T) {
	requireSandbox(t)
	cmd := Command("/bin/pwd")
	cmd.Dir = "/tmp"
	if res := run(t, Options{}, cmd); string(res.Stdout) != "/tmp\n" {
		t.Errorf("pwd = %q, want /tmp", res.Stdout)
	}
	cmd = Command("/bin/pwd")
	cmd.Dir = "/no/such/dir"
	_, err := newTest(t, Options{}).Run(context.Background(), cmd)
	if err == nil || !strings.Contains(err.Error(), "/no/such/dir") {
		t.Errorf("missing Cmd.Dir: err = %v, want an error naming it", err)
	}
}

func TestPythonIfPresent(t *testing.T) {
	requireSandbox(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("host has no /usr/bin/python3")
	}
	res := run(t, Options{}, Command("python3", "-c", "import sys; print(sum(range(10)))"))
	if !res.Success() || string(res.Stdout) != "45\n" {
		t.Errorf("python3: %v, stdout %q, stderr %q", res.Err(), res.Stdout, res.Stderr)
	}
}

func TestTmpfsSizeCaps(t *testing.T) {
	requireSandbox(t)
	opts := Options{Limits: Limits{TmpSize: 1 << 20}, Workspace: SessionWorkspace{Size: 2 << 20}}
	out := sh(t, opts, `head -c 1500000 /dev/zero > /tmp/f 2>/dev/null && echo "tmp took 1.5 MB"
		head -c 1500000 /dev/zero > /workspace/f || echo "workspace refused 1.5 MB"
		head -c 1500000 /dev/zero > /workspace/g 2>/dev/null && echo "workspace took 3 MB"; true`)
	if out != "" {
		t.Errorf("size caps not enforced:\n%s", out)
	}
}

func TestReexecCopyIsSealed(t *testing.T) {
	path, err := selfExe()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.Write([]byte("x"))
		f.Close()
	}
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("writing the sealed copy of the binary: err = %v, want a permission error", err)
	}
}
