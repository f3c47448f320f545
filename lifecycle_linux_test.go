//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests look from outside: how runs end, and that nothing is left.

func TestExitStatusIsData(t *testing.T) {
	requireSandbox(t)
	res := run(t, Options{}, Command("/bin/sh", "-c", "echo out; echo err >&2; exit 7"))
	if res.Outcome != Exited || res.ExitCode != 7 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("got %v %d %q %q, want exited 7 with its output", res.Outcome, res.ExitCode, res.Stdout, res.Stderr)
	}
	var ee *ExitError
	if err := res.Err(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("Result.Err() = %v, want an *ExitError with code 7", err)
	}
	if res.WallTime <= 0 || res.CPUTime <= 0 {
		t.Errorf("wall %v cpu %v, want both measured", res.WallTime, res.CPUTime)
	}
}

func TestCrashIsSignaled(t *testing.T) {
	requireSandbox(t)
	res := run(t, Options{Binds: []Bind{helperBind(t)}}, helperCmd("segv"))
	if res.Outcome != Signaled || res.Signal != syscall.SIGSEGV || res.ExitCode != -1 {
		t.Errorf("got %v signal %v code %d, want signaled SIGSEGV", res.Outcome, res.Signal, res.ExitCode)
	}
}

func TestMissingExecutable(t *testing.T) {
	requireSandbox(t)
	res, err := newTest(t, Options{}).Run(context.Background(), Command("no-such-program-xyz", "arg"))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(fmt.Sprint(err), "no-such-program-xyz") {
		t.Errorf("err = %v, want ErrNotFound naming the program", err)
	}
	if res == nil || res.ExitCode != 127 {
		t.Errorf("result = %+v, want exit code 127", res)
	}
	// A path is looked for there only, and the error says so.
	res, err = newTest(t, Options{}).Run(context.Background(), Command("/usr/bin/no-such-program-xyz"))
	if msg := fmt.Sprint(err); !errors.Is(err, ErrNotFound) || !errors.Is(err, os.ErrNotExist) || res == nil || res.ExitCode != 127 ||
		!strings.Contains(msg, `"/usr/bin/no-such-program-xyz" not found: no such file`) || strings.Contains(msg, "PATH") {
		t.Errorf("missing absolute path: err = %v, result %+v; want ErrNotFound saying there is no such file, not PATH, and exit code 127", err, res)
	}
	if msg := fmt.Sprint(func() error {
		_, err := newTest(t, Options{}).Run(context.Background(), Command("no-such-program-xyz"))
		return err
	}()); !strings.Contains(msg, "not found in the sandbox's PATH (/usr/local/sbin:") {
		t.Errorf("missing name: err = %v, want it to name the PATH searched", msg)
	}
	res, err = newTest(t, Options{}).Run(context.Background(), Command("/etc/passwd"))
	if !errors.Is(err, os.ErrPermission) || res == nil || res.ExitCode != 126 {
		t.Errorf("non-executable: err = %v, result %+v, want a permission error and exit code 126", err, res)
	}
}

func TestBadOptions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	cases := []struct {
		opts   Options
		option string
	}{
		{Options{Root: RootDir("relative/dir")}, "Options.Root (RootDir)"},
		{Options{Root: RootDir("/no/such/dir")}, "Options.Root (RootDir)"},
		{Options{Root: RootDir("")}, "Options.Root (RootDir)"},
		{Options{Workspace: HostWorkspace{}}, "Options.Workspace (HostWorkspace.Dir)"},
		{Options{Workspace: HostWorkspace{Dir: file}}, "Options.Workspace (HostWorkspace.Dir)"},
		{Options{Limits: Limits{TmpSize: -1}}, "Options.Limits.TmpSize"},
		{Options{Limits: Limits{Output: -5}}, "Options.Limits.Output"},
		{Options{Binds: []Bind{{Source: "/usr", Target: "/proc/x"}}}, "Options.Binds[0].Target"},
		{Options{Binds: []Bind{{Source: "/usr"}, {Source: "/no/such/path"}}}, "Options.Binds[1].Source"},
		{Options{Binds: []Bind{{Source: "/usr", Target: "/a/../b"}}}, "Options.Binds[0].Target"},
		{Options{Env: []string{"NOEQUALS"}}, "Options.Env[0]"},
		{Options{Hostname: "a/b"}, "Options.Hostname"},
		{Options{HostUID: -1}, "Options.HostUID"},
		{Options{Limits: Limits{Memory: 100}}, "Options.Limits.Memory"},
		{Options{Limits: Limits{Memory: 64 << 10}}, "Options.Limits.Memory"},
		{Options{Limits: Limits{Memory: MinMemory - 1}}, "Options.Limits.Memory"},
		{Options{Workspace: HostWorkspace{Dir: filepath.Join(t.TempDir(), "missing")}}, "Options.Workspace (HostWorkspace.Dir)"},
	}
	for _, c := range cases {
		s := newTest(t, c.opts)
		_, err := s.Run(context.Background(), Command("true"))
		var oe *OptionError
		if !errors.Is(err, ErrInvalidOption) || !errors.As(err, &oe) || oe.Option != c.option || s.Err() != err {
			t.Errorf("%+v: err = %v, want an OptionError naming %s", c.opts, err, c.option)
		}
	}
	cmds := []struct {
		cmd    *Cmd
		option string
	}{
		{&Cmd{}, "Cmd.Path"},
		{&Cmd{Path: "true", Dir: "relative"}, "Cmd.Dir"},
		{&Cmd{Path: "true", Env: []string{"=x"}}, "Cmd.Env[0]"},
		{nil, "Cmd"},
	}
	for _, c := range cmds {
		_, err := newTest(t, Options{}).Run(context.Background(), c.cmd)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option {
			t.Errorf("%+v: err = %v, want an OptionError naming %s", c.cmd, err, c.option)
		}
	}
}

// TestHostDirNotWritable: a host Workspace or writable Bind the sandbox's
// host uid cannot write is refused by New, naming the uid and the fix; one
// it can write is accepted. A missing Workspace is refused, not made.
func TestHostDirNotWritable(t *testing.T) {
	uid, gid := (&Options{}).HostIDs()
	if os.Getuid() != 0 {
		t.Skip("needs root: an unprivileged caller's sandbox has the caller's own ids and access")
	}
	locked := sharedTempDir(t)
	os.Chmod(locked, 0o755) // root's, as root's sandbox (uid 65534) meets it
	open := sharedTempDir(t)
	os.Chown(open, uid, gid)
	os.Chmod(open, 0o700)
	want := fmt.Sprintf("not writable by the sandbox's host uid %d", uid)
	for _, c := range []struct {
		opts   Options
		option string
	}{
		{Options{Workspace: HostWorkspace{Dir: locked}}, "Options.Workspace (HostWorkspace.Dir)"},
		{Options{Binds: []Bind{{Source: open, Target: "/a"}, {Source: locked, Target: "/data", Writable: true}}}, "Options.Binds[1].Source"},
	} {
		err := New(c.opts).Err()
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), fmt.Sprintf("chown %d:%d %s", uid, gid, locked)) || !strings.Contains(err.Error(), "Options.HostUID") {
			t.Errorf("%+v: New: %v; want an OptionError naming %s, %q and the fixes", c.opts, err, c.option, want)
		}
	}
	// Read-only, it needs no write access; the owner's copy is writable.
	for _, o := range []Options{{Binds: []Bind{{Source: locked, Target: "/data"}}}, {Workspace: HostWorkspace{Dir: open}},
		{Binds: []Bind{{Source: open, Target: "/data", Writable: true}}}} {
		if err := New(o).Err(); err != nil {
			t.Errorf("%+v: New: %v, want it accepted", o, err)
		}
	}
	// One it owns, beneath a directory it cannot search.
	hidden := filepath.Join(t.TempDir(), "ws") // t.TempDir's parent is 0700 root
	os.Mkdir(hidden, 0o700)
	os.Chown(hidden, uid, gid)
	if err := New(Options{Workspace: HostWorkspace{Dir: hidden}}).Err(); !strings.Contains(fmt.Sprint(err), fmt.Sprintf("cannot be reached by the sandbox's host uid %d", uid)) {
		t.Errorf("a Workspace beneath a directory uid %d cannot search: New: %v, want it refused", uid, err)
	}
	missing := filepath.Join(open, "missing")
	if err := New(Options{Workspace: HostWorkspace{Dir: missing}}).Err(); !strings.Contains(fmt.Sprint(err), "does not exist") {
		t.Errorf("a missing Workspace: New: %v, want it refused as missing", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("New made the missing Workspace %s", missing)
	}
}

// TestMemoryBelowMinimum: a memory limit a sandbox cannot start in is
// refused by New with the minimum in the message; MinMemory itself runs,
// under both inits.
func TestMemoryBelowMinimum(t *testing.T) {
	requireSandbox(t)
	err := New(Options{Limits: Limits{Memory: 200000}}).Err()
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(fmt.Sprint(err), "Options.Limits.Memory") ||
		!strings.Contains(fmt.Sprint(err), fmt.Sprint(MinMemory)) {
		t.Errorf("Memory 200000: New: %v, want an OptionError naming Options.Limits.Memory and the minimum %d", err, MinMemory)
	}
	for _, inProcess := range []bool{false, true} {
		res := run(t, Options{Limits: Limits{Memory: MinMemory}, Start: inProcessIf(inProcess)}, Command("/bin/sh", "-c", "echo ran"))
		if !res.Success() || string(res.Stdout) != "ran\n" {
			t.Errorf("InProcess=%v: Memory MinMemory: %v, stdout %q, stderr %q", inProcess, res.Err(), res.Stdout, res.Stderr)
		}
	}
}

// TestInitDiesDuringSetup: an init that dies while it builds the sandbox
// (here the OOM killer, at a memory limit below MinMemory that New would
// refuse) is an error from Run that says so, under both inits, never a
// Result that looks like the program's exit.
func TestInitDiesDuringSetup(t *testing.T) {
	requireSandbox(t)
	if err := cgroupErr(); err != nil {
		t.Skipf("the init dies here at a memory cgroup's limit, and none is writable: %v", err)
	}
	// With and without a seccomp listener, whose fd otherwise marks the
	// end of the setup.
	for _, o := range []Options{{}, {Start: InProcess{}}, {Seccomp: Unconfined{}}, {Seccomp: Unconfined{}, Start: InProcess{}}} {
		for _, mem := range []int64{100, 64 << 10} {
			// Not newTest: a pool prepared before the change would serve it.
			s := New(testOpts(o))
			defer s.Close()
			s.cfg.Limits.Memory = mem // past New's check
			res, err := s.Run(context.Background(), Command("/bin/echo", "hi"))
			// Either the init dies, or a step fails for want of memory
			// (ENOMEM; ENOSPC from a tmpfs whose pages the limit
			// refuses; ENFILE from a socket whose inode it refuses) and
			// is named, with the limit.
			var se *SetupError
			died := errors.As(err, &se) && se.Stage == "start" && strings.Contains(err.Error(), "the sandbox's init died during setup")
			named := errors.As(err, &se) && (errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENFILE)) && se.Stage != "" &&
				strings.Contains(err.Error(), "Options.Limits.Memory")
			if res != nil || !died && !named {
				t.Errorf("Start=%#v Seccomp=%#v, Memory %d: result %+v, err %v; want no Result and a SetupError saying the init died during setup or which step ran out of memory",
					o.Start, o.Seccomp, mem, res, err)
				continue
			}
			t.Logf("Start=%#v Seccomp=%#v, Memory %d: %v", o.Start, o.Seccomp, mem, err)
		}
	}
	// Both marks end a setup that worked.
	for _, o := range []Options{{Seccomp: Unconfined{}}, {Seccomp: Unconfined{}, Start: InProcess{}}} {
		if res := run(t, o, Command("/bin/echo", "hi")); !res.Success() || string(res.Stdout) != "hi\n" {
			t.Errorf("Start=%#v, Unconfined: %v, stdout %q", o.Start, res.Err(), res.Stdout)
		}
	}
}

func TestCmdNotReusable(t *testing.T) {
	requireSandbox(t)
	cmd := Command("true")
	s := newTest(t, Options{})
	if _, err := s.Run(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), cmd); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("second Run of a Cmd: err = %v, want ErrInvalidOption", err)
	}
}

func TestStdinAndStreams(t *testing.T) {
	requireSandbox(t)
	cmd := Command("/bin/sh", "-c", "cat; echo done >&2")
	cmd.Stdin = strings.NewReader("from stdin\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res := run(t, Options{}, cmd)
	if string(res.Stdout) != "from stdin\n" || stderr.String() != "done\n" || len(res.Stderr) != 0 || res.StderrBytes != 5 {
		t.Errorf("stdout %q, streamed stderr %q, captured stderr %q (%d bytes)", res.Stdout, stderr.String(), res.Stderr, res.StderrBytes)
	}
}

// markers counts this process's markers.
var markers atomic.Int64

// marker makes a sleep argument to find a run's processes on the host,
// unique on it: the process's own pid, which no other live process has,
// and a count, each of fixed width, so that no other test process's
// marker holds it (those of processes that outlived their test caller
// are found by it, so the test cannot look only beneath itself).
func marker(t *testing.T) string {
	return fmt.Sprintf("9%07d%06d", os.Getpid(), markers.Add(1)%1e6)
}

func TestTimeoutKillsDaemons(t *testing.T) {
	requireSandbox(t)
	m := marker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// A daemon (new session, double fork) and a plain background child.
	script := fmt.Sprintf(`setsid sh -c '(sleep %[1]s &)' ; sleep %[1]s & echo started; sleep %[1]s`, m)
	res, err := newTest(t, Options{}).Run(ctx, Command("/bin/sh", "-c", script))
	if err != nil {
		t.Fatalf("err = %v, want none: a timeout is an Outcome", err)
	}
	if res == nil || res.Outcome != Timeout || string(res.Stdout) != "started\n" {
		t.Fatalf("result = %+v, want timeout with the partial output", res)
	}
	if pids := hostProcesses(m); len(pids) != 0 {
		t.Errorf("processes of the run left after Run returned: %v", pids)
	}
}

func TestCancel(t *testing.T) {
	requireSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := newTest(t, Options{})
	// Cancel once the program has printed, however slow the machine (the
	// test VM emulates its CPU): it says so in the session's workspace.
	go func() {
		waitFor(func() bool { _, err := s.ReadFile("printed"); return err == nil })
		cancel()
	}()
	res, err := s.Run(ctx, Command("/bin/sh", "-c", "echo partial; touch printed; sleep 30"))
	if err != nil || res == nil || res.Outcome != Canceled || string(res.Stdout) != "partial\n" || !errors.Is(res.Err(), context.Canceled) {
		t.Errorf("err = %v, result = %+v, want no error and Outcome canceled with the partial output", err, res)
	}
	if _, err := newTest(t, Options{}).Run(ctx, Command("true")); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a done ctx: err = %v, want Canceled", err)
	}
}

func TestParentKilledLeavesNothing(t *testing.T) {
	requireSandbox(t)
	for _, mode := range []string{"spawner", "inprocess", "live"} {
		t.Run(mode, func(t *testing.T) {
			m := marker(t)
			cmd := exec.Command("/proc/self/exe", m, mode)
			cmd.Env = append(os.Environ(), helperEnv+"=caller")
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("caller said %q", line)
			}
			cmd.Process.Kill() // SIGKILL: no chance to clean up
			cmd.Wait()
			if !waitFor(func() bool { return len(hostProcesses(m+".25")) == 0 }) {
				t.Errorf("sandbox processes outlived their killed caller: %v", hostProcesses(m+".25"))
			}
		})
	}
}

func TestOutputFlood(t *testing.T) {
	requireSandbox(t)
	flood := int64(1 << 30)
	if testing.Short() {
		flood = 128 << 20 // the v2 VM emulates its CPU: a pipe moves ~30 MB/s there
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := run(t, Options{Limits: Limits{Output: 1 << 20}}, Command("/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero; echo tail", flood)))
	runtime.ReadMemStats(&after)
	if !res.StdoutTruncated || res.StdoutBytes != flood+5 || !bytes.HasSuffix(res.Stdout, []byte("\x00tail\n")) {
		t.Errorf("truncated %v, counted %d, kept %d bytes ending %q", res.StdoutTruncated, res.StdoutBytes, len(res.Stdout), res.Stdout[len(res.Stdout)-6:])
	}
	if n := len(res.Stdout); n > 1<<20+100 {
		t.Errorf("kept %d bytes, more than the limit", n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("draining a %d MiB flood allocated %d MiB on the host", flood>>20, alloc>>20)
	}
}

func TestConcurrentRuns(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				want := fmt.Sprintf("%d-%d", i, j)
				res, err := s.Run(context.Background(), Command("echo", want))
				if err != nil || string(res.Stdout) != want+"\n" {
					t.Errorf("run %s: err %v, stdout %q", want, err, res.Stdout)
				}
			}
		}()
	}
	wg.Wait()
}

func TestRefusesWithoutUserNamespaces(t *testing.T) {
	requireSandbox(t)
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"=nouserns")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "notsupported=true") || !strings.Contains(got, "user.max_user_namespaces is 0") ||
		!strings.Contains(got, "sysctl -w user.max_user_namespaces") || !strings.Contains(got, "canrun=false") {
		t.Errorf("with user namespaces disabled, Run and Probe said:\n%s", got)
	}
}

func TestSpawnerDeathFailsRunAndRecovers(t *testing.T) {
	requireSandbox(t)
	s := newTest(t, Options{})
	if _, err := s.Run(context.Background(), Command("true")); err != nil {
		t.Fatal(err)
	}
	m := marker(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), Command("/bin/sleep", m))
		done <- err
	}()
	if !waitFor(func() bool { return len(hostProcesses(m)) > 0 }) {
		t.Fatal("the sandboxed sleep never started")
	}
	ourSpawner.mu.Lock()
	pid := ourSpawner.c.pid
	ourSpawner.mu.Unlock()
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case err := <-done:
		if !errors.Is(err, ErrSpawner) {
			t.Errorf("run whose spawner died: err = %v, want ErrSpawner", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its spawner died")
	}
	if !waitFor(func() bool { return len(hostProcesses(m)) == 0 }) {
		t.Errorf("sandbox outlived its spawner: %v", hostProcesses(m))
	}
	if res, err := s.Run(context.Background(), Command("echo", "again")); err != nil || string(res.Stdout) != "again\n" {
		t.Errorf("Run after the spawner died: %v", err)
	}
}

func TestSetupFailureNamesPathAndChangesNothing(t *testing.T) {
	requireSandbox(t)
	target := fmt.Sprintf("/usr/sbxtest-%d", time.Now().UnixNano())
	_, err := newTest(t, Options{Binds: []Bind{{Source: "/etc/hostname", Target: target}}}).Run(context.Background(), Command("true"))
	var se *SetupError
	if !errors.As(err, &se) || !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), target) {
		t.Errorf("bind target in the read-only /usr: err = %v, want a SetupError naming %s with EROFS", err, target)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed setup created %s on the host", target)
	}
}
