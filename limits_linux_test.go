//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run where this process can make cgroups (root on the hybrid
// host here, root and a delegated user in the v2 VM); where it cannot, the
// best-effort rlimits are what is checked, and what no rlimit can do skips.

func limitOpts(t *testing.T, o Options) Options {
	t.Helper()
	o = testOpts(o)
	if o.Limits.Policy == BestEffortLimits {
		t.Logf("no writable cgroup (%v): checking the best-effort rlimits", cgroupErr())
	}
	return o
}

func TestLimitsReported(t *testing.T) {
	requireSandbox(t)
	res := run(t, limitOpts(t, Options{Limits: Limits{Memory: 100 << 20, CPUs: 0.5, Pids: 50}}), Command("true"))
	got := map[string]Limit{}
	for _, l := range res.Limits {
		got[l.Name] = l
	}
	for _, name := range []string{"memory", "cpu", "pids"} {
		l, ok := got[name]
		if !ok {
			t.Errorf("no %s in Result.Limits %+v", name, res.Limits)
			continue
		}
		if cgroupErr() == nil && (!l.Enforced || !strings.HasPrefix(l.By, "cgroup v")) {
			t.Errorf("%s: %+v, want enforced by the cgroup", name, l)
		}
	}
	if cgroupErr() != nil && (got["cpu"].Enforced || !got["memory"].Enforced || !strings.Contains(got["memory"].By, "RLIMIT_DATA")) {
		t.Errorf("best effort: %+v, want memory by RLIMIT_DATA and cpu not enforced", res.Limits)
	}
}

func TestMemoryHogStopped(t *testing.T) {
	requireSandbox(t)
	const limit = 64 << 20
	opts := limitOpts(t, Options{Limits: Limits{Memory: limit}, Binds: []Bind{helperBind(t)}})
	res := run(t, opts, helperCmd("hog"))
	if cgroupErr() != nil {
		// RLIMIT_DATA: the allocation fails and the Go runtime exits 2.
		if res.Success() || strings.Contains(string(res.Stdout), "allocated") {
			t.Errorf("hog under RLIMIT_DATA: %v %q", res.Err(), res.Stdout)
		}
		return
	}
	if res.Outcome != OutOfMemory || res.OOMKills < 1 {
		t.Fatalf("hog: outcome %v, OOM kills %d, stdout %q, want out of memory", res.Outcome, res.OOMKills, res.Stdout)
	}
	if res.MemoryPeak > limit+limit/8 {
		t.Errorf("peak %d bytes, more than the %d limit plus 1/8", res.MemoryPeak, limit)
	}
	// The host and later runs are unaffected.
	if res := run(t, opts, Command("echo", "after")); string(res.Stdout) != "after\n" {
		t.Errorf("run after the OOM: %q", res.Stdout)
	}
}

func TestForkBombContained(t *testing.T) {
	requireSandbox(t)
	m := "sbxbomb-" + marker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	// $0 is the marker: every forked shell carries it in its command line.
	res, err := newTest(t, limitOpts(t, Options{Limits: Limits{Pids: 64}})).Run(ctx, Command("/bin/sh", "-c", `b() { b | b & }; b; sleep 100`, m))
	if took := time.Since(start); took > 3*time.Second+2*time.Second {
		t.Errorf("Run took %v past a 3 s deadline", took)
	}
	if res == nil {
		t.Fatalf("fork bomb: %v", err)
	}
	if cgroupErr() == nil && !res.PidsLimitHit {
		t.Errorf("result %+v does not say the pids limit was hit", res)
	}
	if pids := hostProcesses(m); len(pids) != 0 {
		t.Errorf("fork bomb processes left on the host: %d", len(pids))
	}
}

func TestCPUQuota(t *testing.T) {
	requireSandbox(t)
	if err := cgroupErr(); err != nil {
		t.Skipf("a CPU share needs a cgroup, and none is writable here: %v", err)
	}
	// A shell spinning for 2 s of wall time at a quarter CPU uses 0.5 s of
	// CPU. Tolerance: 0.3-0.75 s, for the quota's 100 ms period and a
	// loaded or emulated machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := newTest(t, Options{Limits: Limits{CPUs: 0.25}}).Run(ctx, Command("/bin/sh", "-c", "while :; do :; done"))
	if err != nil || res == nil || res.Outcome != Timeout {
		t.Fatalf("spin: %v", err)
	}
	if cpu := res.CPUTime; cpu < 300*time.Millisecond || cpu > 750*time.Millisecond {
		t.Errorf("spinning 2 s under 0.25 CPU used %v of CPU, want about 0.5 s", cpu)
	}
}

func TestSysVShmCountedAndFreed(t *testing.T) {
	requireSandbox(t)
	if err := cgroupErr(); err != nil {
		t.Skipf("shared memory is bounded by the memory cgroup, and none is writable here: %v", err)
	}
	before, _ := os.ReadFile("/proc/sysvipc/shm")
	res := run(t, Options{Limits: Limits{Memory: 64 << 20}, Binds: []Bind{helperBind(t)}}, helperCmd("shm"))
	if res.Success() || res.OOMKills < 1 {
		t.Errorf("4 GiB of shm under a 64 MiB limit: %v, OOM kills %d, stdout %q", res.Err(), res.OOMKills, res.Stdout)
	}
	// The run's IPC namespace, and every segment in it, is gone.
	if after, _ := os.ReadFile("/proc/sysvipc/shm"); string(after) != string(before) {
		t.Errorf("host SysV shm changed:\nbefore %s\nafter %s", before, after)
	}
}

func TestFillTmpENOSPC(t *testing.T) {
	requireSandbox(t)
	res := run(t, Options{Limits: Limits{TmpSize: 8 << 20}, Binds: []Bind{helperBind(t)}}, helperCmd("fill", "/tmp/fill"))
	if got := strings.TrimSpace(string(res.Stdout)); got != "ENOSPC" {
		t.Errorf("filling an 8 MiB /tmp: %q (stderr %q), want ENOSPC", got, res.Stderr)
	}
	// The program's count, not the host's free space (which other
	// programs change): ENOSPC came from the 8 MiB cap, not from a disk
	// that filled up.
	if written, err := strconv.Atoi(strings.TrimSpace(string(res.Stderr))); err != nil || written > 8<<20 || written < 7<<20 {
		t.Errorf("the program wrote %q bytes to /tmp before ENOSPC, want about 8 MiB", res.Stderr)
	}
}

// A file may be as large as the space it is written into: a host
// workspace past the tmpfs sizes, up to MaxFileSize; past that, and past a
// tmpfs's size, the write fails with an errno the program reports, never
// SIGXFSZ. Under both inits, which must both leave SIGXFSZ ignored.
func TestFileSizes(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "bash")
	const dd = `dd if=/dev/zero of=%s bs=1M count=%d 2>&1 >/dev/null | grep -o -e 'File too large' -e 'No space left on device'; echo "exit ${PIPESTATUS[0]}"`
	for _, inProcess := range []bool{false, true} {
		ws := sharedTempDir(t)
		big := filepath.Join(ws, "big")
		script := fmt.Sprintf(dd, "/workspace/big", 100)
		res := run(t, Options{Workspace: HostWorkspace{Dir: ws}, Start: inProcessIf(inProcess)}, Command("bash", "-c", script))
		fi, err := os.Stat(big)
		if got := string(res.Stdout); got != "exit 0\n" || err != nil || fi.Size() != 100<<20 {
			t.Errorf("InProcess=%v: dd of 100 MiB into a host workspace: %q, stderr %q; host file %v", inProcess, got, res.Stderr, err)
		}
		if err == nil {
			t.Logf("InProcess=%v: the host file has %d bytes", inProcess, fi.Size())
		}
		os.Remove(big)

		res = run(t, Options{Workspace: HostWorkspace{Dir: ws}, Limits: Limits{FileSize: 1 << 20}, Start: inProcessIf(inProcess)}, Command("bash", "-c", script))
		fi, err = os.Stat(big)
		if got := string(res.Stdout); got != "File too large\nexit 1\n" || err != nil || fi.Size() != 1<<20 {
			t.Errorf("InProcess=%v: dd of 100 MiB past MaxFileSize 1 MiB: %q, stderr %q; host file %v, want \"File too large\" and exit 1 with 1 MiB written",
				inProcess, got, res.Stderr, err)
		}

		script = fmt.Sprintf(dd, "/tmp/big", 100)
		res = run(t, Options{Limits: Limits{TmpSize: 32 << 20}, Start: inProcessIf(inProcess)}, Command("bash", "-c", script))
		if got := string(res.Stdout); got != "No space left on device\nexit 1\n" {
			t.Errorf("InProcess=%v: dd of 100 MiB into a 32 MiB /tmp: %q, stderr %q, want ENOSPC and exit 1", inProcess, got, res.Stderr)
		}
	}
}

func TestRefusesWithoutCgroup(t *testing.T) {
	requireSandbox(t)
	if cgroupErr() == nil && os.Getuid() != 0 {
		t.Skip("this unprivileged user has a writable (delegated) cgroup")
	}
	if os.Getuid() != 0 {
		checkNoCgroupRefusal(t, "")
		return
	}
	// As root: ask as nobody, who has no writable cgroup.
	cmd := exec.Command(helperBind(t).Source)
	cmd.Env = []string{helperEnv + "=nocgroup", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	checkNoCgroupRefusal(t, string(out))
}

// checkNoCgroupRefusal checks the nocgroup helper's report, or makes it.
func checkNoCgroupRefusal(t *testing.T, out string) {
	t.Helper()
	if out == "" {
		out = noCgroupReport()
	}
	if !strings.Contains(out, "refused=true") || !strings.Contains(out, "Delegate=yes") || !strings.Contains(out, "besteffort=ok") {
		t.Errorf("without a writable cgroup:\n%s\nwant a refusal naming the delegation, and a best-effort run", out)
	}
	// What to do comes first, in Run's refusal and in Probe's first line.
	if !strings.Contains(out, "refused=true sandbox: set Options.Limits.Policy = BestEffortLimits") {
		t.Errorf("without a writable cgroup:\n%s\nwant the refusal to start with the fix", out)
	}
	if !strings.Contains(out, "probe=canrun:true default:false first:a default Run is refused here") ||
		!regexp.MustCompile(`first:[^\n]*Delegate=yes[^\n]*BestEffortLimits`).MatchString(out) {
		t.Errorf("without a writable cgroup:\n%s\nwant Probe to say that a default Run is refused, with both fixes in its first line", out)
	}
}

// noCgroupReport runs once with enforced and once with best-effort limits.
func noCgroupReport() string {
	_, err := New(Options{}).Run(context.Background(), Command("true"))
	out := fmt.Sprintf("refused=%v %v\n", errors.Is(err, ErrNotSupported) && errors.Is(err, ErrNoCgroup), err)
	if r, err := Probe(); err != nil {
		out += fmt.Sprintf("probe=%v\n", err)
	} else {
		first, _, _ := strings.Cut(r.String(), "\n")
		out += fmt.Sprintf("probe=canrun:%v default:%v first:%s\n", r.CanRun(), r.CanRunDefault(), first)
	}
	res, err := New(Options{Limits: Limits{Policy: BestEffortLimits}}).Run(context.Background(), Command("true"))
	if err == nil && res.Success() {
		out += "besteffort=ok\n"
	} else {
		out += fmt.Sprintf("besteffort=%v\n", err)
	}
	return out
}

func TestRunCgroupBeneathCaller(t *testing.T) {
	requireSandbox(t)
	if err := cgroupErr(); err != nil {
		t.Skipf("no writable cgroup here: %v", err)
	}
	m := marker(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		newTest(t, Options{}).Run(ctx, Command("/bin/sleep", m))
		close(done)
	}()
	if !waitFor(func() bool { return len(hostProcesses(m)) > 0 }) {
		t.Fatal("the sandboxed sleep never started")
	}
	own, _ := os.ReadFile("/proc/self/cgroup")
	theirs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", hostProcesses(m)[0]))
	cancel()
	<-done
	// Line by line (hierarchy by hierarchy), the run's cgroup lies beneath
	// this process's, in a cgroup of its own for the limited controllers.
	ownPaths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		// On v2 the caller may have moved itself to the host leaf.
		ownPaths[parts[0]+":"+parts[1]] = strings.TrimSuffix(parts[2], "/sandbox-host")
	}
	inRunCgroup := 0
	for _, line := range strings.Split(strings.TrimSpace(string(theirs)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		mine := ownPaths[parts[0]+":"+parts[1]]
		if !strings.HasPrefix(parts[2], strings.TrimSuffix(mine, "/")+"/") && parts[2] != mine {
			t.Errorf("run's cgroup %q is not beneath the caller's %q", line, mine)
		}
		if strings.Contains(parts[2], "/"+"sandbox-") {
			inRunCgroup++
		}
	}
	if inRunCgroup == 0 {
		t.Errorf("the run is in no run cgroup:\n%s", theirs)
	}
}

func TestIOThrottle(t *testing.T) {
	requireSandbox(t)
	if err := cgroupErr(); err != nil {
		t.Skipf("io limits need a cgroup, and none is writable here: %v", err)
	}
	ws := sharedTempDir(t)
	opts := Options{Workspace: HostWorkspace{Dir: ws}, Limits: Limits{IOWriteBPS: 1 << 20}}
	// Direct IO: v1 throttles only what bypasses the page cache.
	res := run(t, opts, Command("/bin/sh", "-c", "dd if=/dev/zero of=/workspace/f bs=64k count=32 oflag=direct 2>&1"))
	var io Limit
	for _, l := range res.Limits {
		if l.Name == "io" {
			io = l
		}
	}
	if !io.Enforced {
		t.Skipf("no disk under %s to throttle: %+v", ws, io)
	}
	if !res.Success() {
		t.Fatalf("dd: %v\n%s", res.Err(), res.Stdout)
	}
	// 2 MiB at 1 MiB/s: at least a second, whatever else the machine does
	// (the throttle allows a short burst).
	if !strings.HasPrefix(io.By, "cgroup v") || res.WallTime < time.Second {
		t.Errorf("2 MiB of direct writes under 1 MiB/s took %v; io limit %+v", res.WallTime, io)
	}
}
