package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// liveTest is a live Sandbox for a test, whose processes carry a marker
// the host can find them by, closed when the test ends.
func liveTest(t *testing.T, o Options) (*Sandbox, string) {
	t.Helper()
	requireSandbox(t)
	m := marker(t)
	if o.Live == nil {
		o.Live = &Live{}
	}
	o.Env = append(o.Env, "LIVE_MARKER="+m)
	return newTest(t, o), m
}

// runOK runs a shell script in s and returns its stdout, failing the test
// unless it exits 0.
func runOK(t *testing.T, s *Sandbox, script string) string {
	t.Helper()
	res, err := s.Run(context.Background(), Command("/bin/sh", "-c", script))
	name := script
	if first, _, more := strings.Cut(script, "\n"); more || len(first) > 60 {
		name = first[:min(len(first), 60)] + "..."
	}
	if err != nil {
		t.Fatalf("Run(%q): %v", name, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("Run(%q): %v, exit %d, stderr %q", name, res.Outcome, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// TestLiveKeepsProcessesAndFiles: the calls of a live Sandbox share one
// running sandbox: a background process started by one call runs on after
// it returned, and the next call sees it, the same PID namespace and the
// same /tmp. Close, not the end of the call, kills it.
func TestLiveKeepsProcessesAndFiles(t *testing.T) {
	s, m := liveTest(t, Options{})
	first := runOK(t, s, "echo kept > /tmp/f; /bin/sleep 1000 >/dev/null 2>&1 & echo $! > /tmp/bg; echo $$")
	if pid := strings.TrimSpace(first); pid == "1" || pid == "" {
		t.Errorf("the first call's shell is pid %q; a call enters the live sandbox as a new process, not as its init", pid)
	}
	out := runOK(t, s, "cat /tmp/f; kill -0 $(cat /tmp/bg) && echo alive; cat /proc/1/cmdline | tr '\\0' ' '")
	if !strings.Contains(out, "kept\n") || !strings.Contains(out, "alive\n") {
		t.Errorf("second call saw %q; want the first call's /tmp file and its background process alive", out)
	}
	if len(ownProcesses(m)) == 0 {
		t.Errorf("no process of the live sandbox on the host between its calls")
	}
	s.Close()
	requireNothingLeft(t, m)
	if _, err := s.Run(context.Background(), Command("true")); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close: err = %v, want ErrClosed", err)
	}
}

// TestLiveStartSignalAndList: Start in a live sandbox gives the process's
// own pid inside; Processes lists it as the sandbox's ps would, and a
// signal it has no handler for ends it (it is not its namespace's init).
func TestLiveStartSignalAndList(t *testing.T) {
	s, _ := liveTest(t, Options{})
	ctx := context.Background()
	p, err := s.Start(ctx, Command("/bin/sleep", "100"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() <= 1 {
		t.Errorf("Pid() = %d, want the entered process's own pid (> 1)", p.Pid())
	}
	var (
		procs []ProcessInfo
		i     int
	)
	// Until it sleeps: just started, it may still be running.
	waitFor(func() bool {
		procs, err = s.Processes(ctx)
		i = slices.IndexFunc(procs, func(pi ProcessInfo) bool { return pi.Pid == p.Pid() })
		return err == nil && i >= 0 && procs[i].State == "sleeping"
	})
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		t.Fatalf("Processes() = %+v, want pid %d among them", procs, p.Pid())
	}
	if pi := procs[i]; !slices.Equal(pi.Args, []string{"/bin/sleep", "100"}) || pi.State != "sleeping" || pi.PPid != 0 || pi.RSS <= 0 {
		t.Errorf("Processes()[%d] = %+v, want /bin/sleep 100, sleeping, PPid 0, some RSS", i, pi)
	}
	// What the sandbox itself sees: the same pid, in its /proc.
	if out := runOK(t, s, fmt.Sprintf("cat /proc/%d/cmdline | tr '\\0' ' '", p.Pid())); out != "/bin/sleep 100 " {
		t.Errorf("inside, /proc/%d/cmdline = %q", p.Pid(), out)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.Outcome != Signaled || res.Signal != syscall.SIGTERM {
		t.Errorf("Wait after SIGTERM: %v, %+v; want Signaled SIGTERM", err, res)
	}
	// Sandbox.Signal reaches a process by its pid inside.
	runOK(t, s, "/bin/sleep 200 >/dev/null 2>&1 &")
	procs, _ = s.Processes(ctx)
	i = slices.IndexFunc(procs, func(pi ProcessInfo) bool { return len(pi.Args) == 2 && pi.Args[1] == "200" })
	if i < 0 {
		t.Fatalf("the background sleep is not among %+v", procs)
	}
	if procs[i].PPid != 1 {
		t.Errorf("the orphaned background sleep has PPid %d, want 1 (the live sandbox's init)", procs[i].PPid)
	}
	if err := s.Signal(procs[i].Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool {
		ps, _ := s.Processes(ctx)
		return !slices.ContainsFunc(ps, func(pi ProcessInfo) bool { return pi.Pid == procs[i].Pid })
	}) {
		t.Errorf("pid %d still runs after Signal(SIGKILL)", procs[i].Pid)
	}
	if err := s.Signal(procs[i].Pid, syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal of a gone pid: %v, want os.ErrProcessDone", err)
	}
	if err := s.Signal(1, syscall.SIGTERM); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Signal of the init: %v, want ErrInvalidOption", err)
	}
}

// TestLiveDialContext: a server started in one call is reached from the
// host in the next through DialContext, over TCP on the sandbox's loopback
// and over a Unix socket in its /tmp; nothing listens on the host.
func TestLiveDialContext(t *testing.T) {
	requirePrograms(t, "python3")
	s, _ := liveTest(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runOK(t, s, `cd /tmp && echo page > index.html &&
		python3 -m http.server 8000 --bind 127.0.0.1 >/tmp/http.log 2>&1 &
		python3 -c '
import os, socket
s = socket.socket(socket.AF_UNIX); s.bind("/tmp/app.sock"); s.listen()
if os.fork(): os._exit(0)
while True:
    c, _ = s.accept(); c.sendall(b"unix says hi\n"); c.close()
' >/dev/null 2>&1`)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return s.DialContext(ctx, "tcp", "localhost:8000")
	}}}
	var body []byte
	if !waitFor(func() bool {
		resp, err := client.Get("http://sandbox/index.html")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == 200
	}) {
		t.Fatalf("no page from the sandbox's http.server through DialContext")
	}
	if string(body) != "page\n" {
		t.Errorf("GET index.html = %q, want the file the call wrote", body)
	}
	c, err := s.DialContext(ctx, "unix", "/tmp/app.sock")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "unix says hi\n" {
		t.Errorf("the Unix socket said %q", got)
	}
	if _, err := s.DialContext(ctx, "tcp", "127.0.0.1:8001"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("DialContext to a closed port: %v, want ECONNREFUSED", err)
	}
	if _, err := s.DialContext(ctx, "unix", "/tmp/none.sock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DialContext to a missing socket: %v, want ErrNotExist", err)
	}
	for _, bad := range [][2]string{{"udp", "127.0.0.1:53"}, {"tcp", "example.com:80"}, {"unix", "relative.sock"}, {"tcp4", "[::1]:80"}} {
		if _, err := s.DialContext(ctx, bad[0], bad[1]); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("DialContext(%q, %q): %v, want ErrInvalidOption", bad[0], bad[1], err)
		}
	}
	oneShot := newTest(t, Options{})
	if _, err := oneShot.DialContext(ctx, "tcp", "127.0.0.1:8000"); !errors.Is(err, ErrNotLive) {
		t.Errorf("DialContext on a one-shot Sandbox: %v, want ErrNotLive", err)
	}
	if _, err := oneShot.Processes(ctx); !errors.Is(err, ErrNotLive) {
		t.Errorf("Processes on a one-shot Sandbox: %v, want ErrNotLive", err)
	}
}

// TestLiveExpiry: an idle timeout and a maximum lifetime each end the
// live sandbox, everything in it, and the Sandbox; later calls say why.
func TestLiveExpiry(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		s, m := liveTest(t, Options{Live: &Live{IdleTimeout: 300 * time.Millisecond}})
		runOK(t, s, "/bin/sleep 1000 >/dev/null 2>&1 &")
		// A call in flight holds the timeout off.
		runOK(t, s, "sleep 0.6")
		runOK(t, s, "true")
		// Its processes go once it expires; a call would hold it off.
		if !waitFor(func() bool { return len(ownProcesses(m)) == 0 }) {
			t.Fatal("the idle live sandbox did not expire")
		}
		_, err := s.Run(context.Background(), Command("true"))
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "IdleTimeout") {
			t.Errorf("a call after the idle timeout: %v, want ErrExpired and ErrClosed naming Options.Live.IdleTimeout", err)
		}
		requireNothingLeft(t, m)
	})
	t.Run("lifetime", func(t *testing.T) {
		s, m := liveTest(t, Options{Live: &Live{MaxLifetime: 500 * time.Millisecond}})
		res, err := s.Run(context.Background(), Command("/bin/sleep", "30"))
		if err != nil || res.Outcome != Signaled || res.Signal != syscall.SIGKILL {
			t.Errorf("a call running at the maximum lifetime: %v, %+v; want it killed", err, res)
		}
		if _, err := s.Processes(context.Background()); !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "MaxLifetime") {
			t.Errorf("Processes after the lifetime: %v, want ErrExpired naming Options.Live.MaxLifetime", err)
		}
		requireNothingLeft(t, m)
	})
}

// TestLiveOptions: options that a live sandbox cannot have are refused by
// name.
func TestLiveOptions(t *testing.T) {
	for _, o := range []Options{
		{Live: &Live{}, Start: InProcess{}},
		{Live: &Live{MaxLifetime: -time.Second}},
	} {
		if err := New(o).Err(); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(%+v).Err() = %v, want ErrInvalidOption", o, err)
		}
	}
	// A filter under which the live sandbox's init could not wait.
	p := DefaultSeccompPolicy()
	p.Rules = append([]SyscallRule{{Names: []string{"ppoll"}, Action: ActErrno(syscall.EPERM)}}, p.Rules...)
	if err := New(Options{Live: &Live{}, Seccomp: p}).Err(); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "ppoll") {
		t.Errorf("a live Sandbox whose filter refuses ppoll: %v, want ErrInvalidOption naming ppoll", err)
	}
	if err := New(Options{Seccomp: p}).Err(); err != nil {
		t.Errorf("the same filter without Live: %v", err)
	}
}

// TestLiveLimitsAndReshape: the live sandbox's pids limit bounds its
// background processes and its calls together, and a call that cannot
// start for it fails with an error that says so and leaves nothing; an
// OOM kill names the call it hit. Snapshot ends the running processes
// and keeps the workspace, as its doc says.
func TestLiveLimitsAndReshape(t *testing.T) {
	if cgroupErr() != nil {
		t.Skipf("needs cgroup limits: %v", cgroupErr())
	}
	s, m := liveTest(t, Options{Limits: Limits{Pids: 24, Memory: 128 << 20}})
	// Fill the pids limit from the background, leaving the shell.
	fillPids(t, s)
	_, err := s.Run(context.Background(), Command("true"))
	if err == nil || !strings.Contains(err.Error(), "Options.Limits.Pids") {
		t.Errorf("a call with the pids limit full: %v, want an error naming Options.Pids", err)
	}
	if out := ownProcesses(m); len(out) > 24 {
		t.Errorf("%d processes carry the marker, more than the pids limit", len(out))
	}
	procs, err := s.Processes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		s.Signal(p.Pid, syscall.SIGKILL)
	}
	if !waitFor(func() bool { ps, _ := s.Processes(context.Background()); return len(ps) == 0 }) {
		t.Fatal("the background sleeps did not end")
	}
	runOK(t, s, "echo again > /workspace/f")
	res, err := s.Run(context.Background(), Command("python3", "-c", "b = bytearray(400 << 20)"))
	if err != nil || res.Outcome != OutOfMemory {
		t.Errorf("a call over the memory limit: %v, %+v; want OutOfMemory", err, res)
	}
	runOK(t, s, "/bin/sleep 1000 >/dev/null 2>&1 &")
	if _, err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.Processes(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("after Snapshot: %v, %+v; want a new live sandbox with no process", err, ps)
	}
	if out := runOK(t, s, "cat /workspace/f"); out != "again\n" {
		t.Errorf("the workspace after Snapshot: %q", out)
	}
	s.Close()
	requireNothingLeft(t, m)
}

// TestLiveManyCallsLeaveNothing: a thousand calls started one after
// another in one live sandbox leave nothing of theirs behind: no process
// in it, and in the caller no descriptor, goroutine or mount more, and
// still the one cgroup, the live sandbox's.
func TestLiveManyCallsLeaveNothing(t *testing.T) {
	s, m := liveTest(t, Options{})
	runOK(t, s, "true")
	fds, goroutines, mounts := fdCount(t), runtime.NumGoroutine(), testMounts(t, "/proc/self/mountinfo")
	groups := len(liveCgroups(t))
	for i := range 1000 {
		if _, err := s.Run(context.Background(), Command("/bin/true")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if ps, err := s.Processes(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("after 1000 calls: %v, %+v left in the live sandbox", err, ps)
	}
	if !waitFor(func() bool { return fdCount(t) <= fds && runtime.NumGoroutine() <= goroutines+2 }) {
		t.Errorf("after 1000 calls: %d descriptors (was %d), %d goroutines (was %d)", fdCount(t), fds, runtime.NumGoroutine(), goroutines)
	}
	if now := testMounts(t, "/proc/self/mountinfo"); now != mounts {
		t.Errorf("after 1000 calls: the test's mounts are %q (were %q)", now, mounts)
	}
	// A pool refilling meanwhile (SANDBOX_TEST_POOL) may be making one.
	if !waitFor(func() bool { return len(liveCgroups(t)) <= groups }) {
		t.Errorf("after 1000 calls: %d cgroups of this test's processes (was %d)", len(liveCgroups(t)), groups)
	}
	s.Close()
	requireNothingLeft(t, m)
}

// liveCgroups lists the run cgroups this process and its spawner made,
// where runs have cgroups, but those of prepared sandboxes in a pool.
func liveCgroups(t *testing.T) []string {
	if cgroupErr() != nil {
		return nil
	}
	owners := []int{os.Getpid()}
	if sp := currentSpawner(); sp != nil {
		owners = append(owners, sp.pid)
	}
	return slices.DeleteFunc(cgroupsMadeBy(t, owners...), holdsPreparedInit)
}

// fdCount counts this process's open descriptors.
func fdCount(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestLiveTerminal: a call entering a live sandbox gets a terminal of the
// sandbox's devpts as any run does, at its size, and resized while it runs.
func TestLiveTerminal(t *testing.T) {
	requirePrograms(t, "bash")
	s, _ := liveTest(t, Options{})
	c := Command("bash", "-c", `tty; stty size; trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done`)
	c.Terminal = &Terminal{Rows: 10, Cols: 20}
	res, got := runResized(t, s, c)
	if !res.Success() || !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "10 20") || !strings.Contains(got, "42 123") {
		t.Errorf("outcome %v exit %d, output %q; want a /dev/pts tty of 10 20, then 42 123", res.Outcome, res.ExitCode, got)
	}
}

// TestLiveNetworkAllow: a live sandbox's egress proxy serves all of its
// calls, each as it served a one-shot run, for as long as it lives.
func TestLiveNetworkAllow(t *testing.T) {
	requireSandbox(t)
	w := newEgressWorld(t)
	url := "http://api.example.com:" + port(w.http) + "/plain"
	opts := w.opts(false)
	opts.Live = &Live{}
	opts.Binds = []Bind{helperBind(t)}
	s := newTest(t, opts)
	for i := range 2 {
		res, err := s.Run(context.Background(), helperCmd("fetch", url))
		if err != nil || !res.Success() {
			t.Fatalf("call %d: %v, %+v", i, err, res)
		}
		if want := url + " 200 hello from api.example.com:" + port(w.http) + " /plain\n"; string(res.Stdout) != want {
			t.Errorf("call %d fetched %q, want %q", i, res.Stdout, want)
		}
	}
	if got := w.seen(); len(got) != 2 {
		t.Errorf("the server saw %q, want the two calls' GETs", got)
	}
}

// TestLiveStartedProcessAndSession: a process started with Start holds
// neither the session (Snapshot ends it, as its doc says, instead of
// waiting for it) nor, once Start has returned, the idle timeout; a
// Wait for it holds the timeout off.
func TestLiveStartedProcessAndSession(t *testing.T) {
	s, m := liveTest(t, Options{Live: &Live{IdleTimeout: 500 * time.Millisecond}})
	p, err := s.Start(context.Background(), Command("/bin/sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	// A Wait in progress holds the timeout off, however long.
	waited := make(chan *Result, 1)
	go func() {
		res, _ := p.Wait()
		waited <- res
	}()
	time.Sleep(1200 * time.Millisecond)
	if ps, err := s.Processes(context.Background()); err != nil || len(ps) != 1 {
		t.Fatalf("while a Wait waits: %v, %+v; want the sleep alive", err, ps)
	}
	snapped := make(chan error, 1)
	go func() {
		_, err := s.Snapshot()
		snapped <- err
	}()
	select {
	case err := <-snapped:
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Snapshot waits for the started process")
	}
	if res := <-waited; res == nil || res.Signal != syscall.SIGKILL {
		t.Errorf("the started process after Snapshot: %+v, want killed", res)
	}
	// Without a Wait, a started process does not hold the timeout off.
	if _, err := s.Start(context.Background(), Command("/bin/sleep", "1000")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return len(ownProcesses(m)) == 0 }) {
		t.Fatal("a started process held the idle timeout off")
	}
	if _, err := s.Run(context.Background(), Command("true")); !errors.Is(err, ErrExpired) {
		t.Errorf("a call after the idle timeout: %v, want ErrExpired", err)
	}
}
