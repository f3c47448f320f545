package sandbox

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// liveInitPid finds the host pid of the live sandbox's init among the
// test's own processes carrying marker m: the one that is pid 1 of its
// PID namespace.
func liveInitPid(t *testing.T, m string) int {
	t.Helper()
	for _, pid := range ownProcesses(m) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(v); len(f) > 1 && f[len(f)-1] == "1" {
					return pid
				}
			}
		}
	}
	t.Fatalf("no process carrying %s is the init of a PID namespace", m)
	return 0
}

// requireEndedFor checks that every kind of call on s fails with an error
// matching ErrClosed that holds why.
func requireEndedFor(t *testing.T, s *Sandbox, why string) {
	t.Helper()
	ctx := context.Background()
	_, runErr := s.Run(ctx, Command("true"))
	_, startErr := s.Start(ctx, Command("true"))
	_, procsErr := s.Processes(ctx)
	sigErr := s.Signal(2, syscall.SIGTERM)
	_, dialErr := s.DialContext(ctx, "tcp", "127.0.0.1:80")
	_, runAgainErr := s.Run(ctx, Command("true"))
	for name, err := range map[string]error{"Run": runErr, "Start": startErr, "Processes": procsErr, "Signal": sigErr, "DialContext": dialErr, "a second Run": runAgainErr} {
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s after the live sandbox's init died: %v; want an error matching ErrClosed that says %q", name, err, why)
		}
	}
}

// requireKeeperGone checks that the workspace keeper pid, a live
// sandbox's, ends with it. Only this keeper is looked at: others of the
// test process end in their own time.
func requireKeeperGone(t *testing.T, pid int) {
	t.Helper()
	if pid == 0 {
		t.Fatal("the live sandbox had no workspace keeper")
	}
	if !waitFor(func() bool { return !alive(pid) }) {
		t.Errorf("the live sandbox's workspace keeper (pid %d) is still running after it ended", pid)
	}
}

// TestLiveInitKilled: a live sandbox whose init is killed from outside
// ends for good: every later call fails with ErrClosed naming the signal,
// and nothing of it is left, as after Close.
func TestLiveInitKilled(t *testing.T) {
	s, m := liveTest(t, Options{})
	runOK(t, s, "/bin/sleep 1000 >/dev/null 2>&1 &")
	keeper := keeperPid(s)
	pidfd, err := unix.PidfdOpen(liveInitPid(t, m), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	// The calls come once it has exited: a call meeting the signal on
	// its way would run.
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, -1); err != nil {
		t.Fatal(err)
	}
	requireEndedFor(t, s, "SIGKILL")
	requireNothingLeft(t, m)
	requireKeeperGone(t, keeper)
}

// TestLiveInitOOMKilled: a live sandbox whose init the OOM killer takes
// ends as one whose init was killed, saying so. The test makes the init
// the OOM killer's first choice, which it never is by itself
// (TestLiveInitLastOOMChoice): an oom_score_adj of 1000, set from
// outside, and 0 for the call, which fills the memory limit with a file
// in /tmp, memory of no process's.
func TestLiveInitOOMKilled(t *testing.T) {
	if cgroupErr() != nil {
		t.Skipf("needs a cgroup memory limit: %v", cgroupErr())
	}
	s, m := liveTest(t, Options{Limits: Limits{Memory: 64 << 20, TmpSize: 256 << 20}})
	runOK(t, s, "true")
	keeper := keeperPid(s)
	init := liveInitPid(t, m)
	if err := os.WriteFile("/proc/"+strconv.Itoa(init)+"/oom_score_adj", []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), Command("/bin/sh", "-c", "echo 0 > /proc/self/oom_score_adj && exec head -c 134217728 /dev/zero > /tmp/f"))
	if err != nil {
		t.Fatalf("the hog's call: %v", err)
	}
	if res.Outcome != OutOfMemory || res.OOMKills < 1 {
		t.Errorf("the call filling the memory: %v, %d OOM kills, stderr %q; want OutOfMemory, killed with the sandbox", res.Outcome, res.OOMKills, res.Stderr)
	}
	requireEndedFor(t, s, "killed by the OOM killer")
	requireNothingLeft(t, m)
	requireKeeperGone(t, keeper)
}

// TestLiveInitLastOOMChoice: every process a call starts in a live
// sandbox, and what it starts, has an oom_score_adj above its init's, so
// that the OOM killer takes them first at the memory limit, and a memory
// hog in the background is killed while the sandbox lives on.
func TestLiveInitLastOOMChoice(t *testing.T) {
	s, _ := liveTest(t, Options{})
	out := strings.Fields(runOK(t, s, "cat /proc/1/oom_score_adj /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"))
	if len(out) != 3 {
		t.Fatalf("oom_score_adj of the init, a call and its child: %q", out)
	}
	init, _ := strconv.Atoi(out[0])
	for _, v := range out[1:] {
		if n, _ := strconv.Atoi(v); n <= init || n != 1000 {
			t.Errorf("oom_score_adj of a call's process %s, the init's %d; want 1000, above the init's", v, init)
		}
	}
}

// TestLiveBackgroundOOMKillReported: an OOM kill of a process left in the
// background of a live sandbox, between calls, is counted in the next
// call's Result, once, and the sandbox lives on.
func TestLiveBackgroundOOMKillReported(t *testing.T) {
	if cgroupErr() != nil {
		t.Skipf("needs a cgroup memory limit: %v", cgroupErr())
	}
	s, _ := liveTest(t, Options{Limits: Limits{Memory: 64 << 20}, Binds: []Bind{helperBind(t)}})
	// The hog starts once the host writes the workspace file go, with
	// no call running.
	runOK(t, s, "(while [ ! -e /workspace/go ]; do sleep 0.05; done; SBXTEST_HELPER=hog exec "+helperPath+") >/dev/null 2>&1 &")
	if err := s.WriteFile("go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { ps, err := s.Processes(context.Background()); return err == nil && len(ps) == 0 }) {
		ps, err := s.Processes(context.Background())
		t.Fatalf("the background hog did not end: %v, %+v", err, ps)
	}
	res, err := s.Run(context.Background(), Command("true"))
	if err != nil || res.Outcome != Exited {
		t.Fatalf("the call after the hog: %v, %+v", err, res)
	}
	if res.OOMKills != 1 {
		t.Errorf("the call after a background hog was OOM-killed: OOMKills %d, want 1", res.OOMKills)
	}
	res, err = s.Run(context.Background(), Command("true"))
	if err != nil || res.OOMKills != 0 {
		t.Errorf("the call after that: %v, OOMKills %+v; want the kill counted once", err, res)
	}
}
