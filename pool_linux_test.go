//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/recipe"
)

// preparedInits are the spawner's children that are inits waiting in a
// pool.
func preparedInits() []int {
	var l []int
	for _, pid := range childrenOf(spawnerPID()) {
		if isPreparedInit(strconv.Itoa(pid)) {
			l = append(l, pid)
		}
	}
	return l
}

// isPreparedInit says whether pid is an init that has not exec'd a program
// yet: one waiting in a pool. It is a clone of the spawner, whose memory,
// and so argv, it shares or copies.
func isPreparedInit(pid string) bool {
	b, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return string(b) == "sandbox-spawner\x00"
}

// newFilled is a Sandbox for o, which asks for a pool, with its pool full.
// It is closed when the test ends (Close may be called before).
func newFilled(t *testing.T, o Options) *Sandbox {
	t.Helper()
	s := New(testOpts(o))
	t.Cleanup(func() { s.Close() })
	if err := s.fillPool(); err != nil {
		t.Fatalf("fill the pool: %v", err)
	}
	return s
}

// TestPoolServesEachRunOnce: a pooled Sandbox's Runs take prepared
// sandboxes, each used once: a run sees neither the /tmp nor the processes
// of the run before it, has its stdio and the session workspace, and the
// pool is refilled in the background. Close destroys what is prepared and
// leaves no init, no run cgroup and no spawner child behind.
func TestPoolServesEachRunOnce(t *testing.T) {
	requireSandbox(t)
	s := newFilled(t, Options{Start: Pool{Size: 2}})
	if n := len(preparedInits()); n != 2 {
		t.Fatalf("%d prepared inits wait in the spawner, want 2", n)
	}
	if err := s.WriteFile("from-caller", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pooled := 0
	for i := range 6 {
		cmd := Command("/bin/sh", "-c", `cat; cat /workspace/from-caller; echo; ls /tmp; echo $$ > /tmp/mine; sleep 60 & echo run >> /workspace/log`)
		cmd.Stdin = strings.NewReader("in-" + strconv.Itoa(i) + "\n")
		res, err := s.Run(ctx, cmd)
		if err != nil || !res.Success() {
			t.Fatalf("run %d: %v %v", i, err, res)
		}
		if want := "in-" + strconv.Itoa(i) + "\nhello\n"; string(res.Stdout) != want {
			t.Errorf("run %d printed %q, want %q: another run's /tmp or stdio", i, res.Stdout, want)
		}
		if res.Pooled {
			pooled++
		}
		// Let the refill catch up, as a caller's own work between
		// tool calls would.
		if err := s.fillPool(); err != nil {
			t.Fatalf("refill the pool: %v", err)
		}
	}
	if pooled != 6 {
		t.Errorf("%d of 6 runs were pooled, want all with the pool refilled between them", pooled)
	}
	if b, err := s.ReadFile("log"); err != nil || strings.Count(string(b), "run\n") != 6 {
		t.Errorf("the workspace log = %q, %v; want 6 lines, one per run", b, err)
	}
	sp := spawnerPID()
	prepared := preparedInits()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range prepared {
		if alive(pid) {
			t.Errorf("prepared init %d alive after Close", pid)
		}
	}
	if kids := childrenOf(sp); len(kids) != 0 {
		t.Errorf("the spawner has children after Close: %v", kids)
	}
	if cgroupErr() == nil {
		if left := cgroupsMadeBy(t, sp, os.Getpid()); len(left) != 0 {
			t.Errorf("run cgroups left after Close: %v", left)
		}
	}
}

// TestPoolConfinesLikeCold: the program of a pooled run is confined as a
// cold one's is: same namespaces as each other never, no capabilities,
// no_new_privs, the seccomp filter, the cgroup's limits.
func TestPoolConfinesLikeCold(t *testing.T) {
	requireSandbox(t)
	s := newFilled(t, Options{Start: Pool{Size: 1}, Limits: Limits{Pids: 32}})
	script := `grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; id -u; echo pid $$; readlink /proc/self/ns/pid /proc/self/ns/mnt /proc/self/ns/net; cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || echo no-cgroupfs`
	res, err := s.Run(context.Background(), Command("/bin/sh", "-c", script))
	if err != nil || !res.Success() {
		t.Fatalf("%v %v\n%s", err, res.Err(), res.Stderr)
	}
	if !res.Pooled {
		t.Fatal("the run was not pooled after the pool was filled")
	}
	out := string(res.Stdout)
	for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "\n1000\n", "pid 1\n", "no-cgroupfs"} {
		if !strings.Contains(out, want) {
			t.Errorf("pooled run: %q missing from\n%s", want, out)
		}
	}
	for _, ns := range []string{"pid", "mnt", "net"} {
		own, _ := os.Readlink("/proc/self/ns/" + ns)
		if strings.Contains(out, own) {
			t.Errorf("pooled run shares the caller's %s namespace %s", ns, own)
		}
	}
	if cgroupErr() == nil {
		found := false
		for _, l := range res.Limits {
			found = found || l.Name == "pids" && l.Enforced && strings.HasPrefix(l.By, "cgroup")
		}
		if !found {
			t.Errorf("pooled run's pids limit not enforced by its cgroup: %+v", res.Limits)
		}
		// A fork bomb meets the pool's limit as a cold run would.
		res, err = s.Run(context.Background(), Command("/bin/sh", "-c", `for i in $(seq 64); do sleep 5 & done 2>/dev/null; wait`))
		if err != nil {
			t.Fatal(err)
		}
		if !res.PidsLimitHit {
			t.Errorf("64 sleeps under Pids 32 did not hit the limit (pooled %v)", res.Pooled)
		}
	}
}

// TestPoolOptionErrors: Pool values that cannot work are refused by New,
// naming Options.Start (Pool.Size).
func TestPoolOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Start: Pool{Size: -1}},
		{Start: Pool{Size: maxPool + 1}},
		{Start: Pool{Size: 2}, Network: &Egress{}},
		{Start: Pool{Size: 2}, Binds: []Bind{{Source: "/usr", Target: "/workspace/usr"}}},
	} {
		err := New(o).Err()
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != "Options.Start (Pool.Size)" || !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(%+v).Err() = %v, want an OptionError naming Options.Start (Pool.Size)", o, err)
		}
	}
}

// TestPoolTimeoutKeepsOutput: a pooled run ended by its deadline keeps
// what it printed, as a cold one does.
func TestPoolTimeoutKeepsOutput(t *testing.T) {
	requireSandbox(t)
	s := newFilled(t, Options{Start: Pool{Size: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Command("/bin/sh", "-c", "echo started; exec sleep 60"))
	if err != nil || res == nil || res.Outcome != Timeout {
		t.Fatalf("err %v, result %+v; want a Timeout and no error", err, res)
	}
	if string(res.Stdout) != "started\n" || !res.Pooled {
		t.Errorf("stdout %q, pooled %v; want the partial output of a pooled run", res.Stdout, res.Pooled)
	}
}

// TestPoolTakesWhatFits: a pooled sandbox's init
// receives its program in a block of fixed size. A program that fits runs
// in it; one too long for it runs cold and leaves it for the next run; a
// missing program or working directory fails as it does cold, named in
// the error.
func TestPoolTakesWhatFits(t *testing.T) {
	requireSandbox(t)
	s := newFilled(t, Options{Start: Pool{Size: 1}})
	cold := newTest(t, Options{})
	ctx := context.Background()
	res, err := s.Run(ctx, Command("echo", "fits"))
	if err != nil || !res.Success() || string(res.Stdout) != "fits\n" || !res.Pooled {
		t.Fatalf("echo fits: %v %v, pooled %v; want it run in a prepared sandbox", err, res, res.Pooled)
	}
	if err := s.fillPool(); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", recipe.BlockBytes)
	res, err = s.Run(ctx, Command("/bin/sh", "-c", `echo ${#1}`, "sh", long))
	if err != nil || !res.Success() || string(res.Stdout) != strconv.Itoa(recipe.BlockBytes)+"\n" || res.Pooled {
		t.Errorf("an argument of %d bytes: %v %v, pooled %v; want it run cold", recipe.BlockBytes, err, res, res.Pooled)
	}
	res, err = s.Run(ctx, Command("echo", "next"))
	if err != nil || !res.Success() || !res.Pooled {
		t.Errorf("the run after: %v %v, pooled %v; want the sandbox the long one left", err, res, res.Pooled)
	}
	for _, c := range []struct{ path, dir string }{{"no-such-program", ""}, {"true", "/no/such/dir"}} {
		if err := s.fillPool(); err != nil {
			t.Fatal(err)
		}
		cmd := func() *Cmd {
			cmd := Command(c.path)
			cmd.Dir = c.dir
			return cmd
		}
		_, err := s.Run(ctx, cmd())
		_, coldErr := cold.Run(ctx, cmd())
		if err == nil || coldErr == nil || err.Error() != coldErr.Error() {
			t.Errorf("%s in %q: pooled %v, cold %v; want the same error", c.path, c.dir, err, coldErr)
		}
	}
}

// TestPoolRefillsDuringALongRun: the pool is refilled after a run is
// reported, so that the preparation does not compete with its start, but
// a run that goes on lets it go after refillDelay: the pool is full again
// while the run still sleeps, and the next run is pooled.
func TestPoolRefillsDuringALongRun(t *testing.T) {
	requireSandbox(t)
	s := newFilled(t, Options{Start: Pool{Size: 1}})
	first := preparedInits()
	if len(first) != 1 {
		t.Fatalf("%d prepared inits wait in the spawner, want 1", len(first))
	}
	ctx := context.Background()
	type outcome struct {
		res *Result
		err error
	}
	long := make(chan outcome, 1)
	go func() {
		res, err := s.Run(ctx, Command("/bin/sleep", "3"))
		long <- outcome{res, err}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if now := preparedInits(); len(now) == 1 && now[0] != first[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool was not refilled within 2s of a run that sleeps 3s: prepared %v, %v before", preparedInits(), first)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case o := <-long:
		t.Fatalf("the long run ended before the pool was seen refilled: %v %+v", o.err, o.res)
	default:
	}
	// The refill under way is counted: this waits for it, and starts
	// no other.
	if err := s.fillPool(); err != nil {
		t.Fatalf("wait for the refill: %v", err)
	}
	res, err := s.Run(ctx, Command("/bin/true"))
	if err != nil || !res.Success() || !res.Pooled {
		t.Errorf("run during the long one: %v, success %v, pooled %v; want a pooled success", err, res != nil && res.Success(), res != nil && res.Pooled)
	}
	o := <-long
	if o.err != nil || !o.res.Success() || !o.res.Pooled {
		t.Errorf("long run: %v %+v; want a pooled success", o.err, o.res)
	}
}

// TestPoolTakesOnlyItsSpec: a prepared sandbox serves only a run whose
// sandbox is the one it was prepared as. Sandboxes whose Options differ in
// a Bind, the memory limit or the network are given the owner name of a
// Sandbox whose pool is full, so that their runs meet its prepared
// sandbox in the spawner: each runs cold (Result.Pooled), in the sandbox
// its own Options describe, seen from inside (the bound directory, the
// network namespace) and outside (Result.Limits). A Sandbox with the same
// Options, and the pool's own, take it.
func TestPoolTakesOnlyItsSpec(t *testing.T) {
	requireSandbox(t)
	dirA, dirB := sharedTempDir(t), sharedTempDir(t)
	for dir, which := range map[string]string{dirA: "a", dirB: "b"} {
		if err := os.WriteFile(filepath.Join(dir, "which"), []byte(which), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const memA, memB = 96 << 20, 128 << 20
	base := Options{Binds: []Bind{{Source: dirA, Target: "/data"}}, Limits: Limits{Memory: memA}}
	withPool := base
	withPool.Start = Pool{Size: 1}
	pooled := newFilled(t, withPool)
	ownNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// run runs the probe in s and returns what it saw: the bound file,
	// whether it shares the caller's network namespace, its memory limit.
	run := func(s *Sandbox) (which string, hostNet bool, mem string, wasPooled bool) {
		t.Helper()
		res, err := s.Run(ctx, Command("/bin/sh", "-c", `cat /data/which; echo; readlink /proc/self/ns/net`))
		if err != nil || !res.Success() {
			t.Fatalf("%v %v\n%s", err, res, res.Stderr)
		}
		lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		if len(lines) != 2 {
			t.Fatalf("the probe printed %q", res.Stdout)
		}
		for _, l := range res.Limits {
			if l.Name == "memory" {
				mem = l.Value
			}
		}
		return lines[0], lines[1] == ownNet, mem, res.Pooled
	}
	// sharing is a Sandbox for o that sends its runs to pooled's pool.
	sharing := func(o Options) *Sandbox {
		t.Helper()
		s := New(testOpts(o)) // Pool 0: New fills no pool of its own
		t.Cleanup(func() { s.Close() })
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		s.cfg.Pool, s.ws.owner = 1, pooled.ws.owner
		return s
	}

	otherBind, otherMemory, otherNetwork := base, base, base
	otherBind.Binds = []Bind{{Source: dirB, Target: "/data"}}
	otherMemory.Limits.Memory = memB
	otherNetwork.Network = HostNetworkUnsafe{}
	for _, c := range []struct {
		name    string
		o       Options
		which   string
		hostNet bool
		mem     int64
	}{
		{"Binds", otherBind, "b", false, memA},
		{"Memory", otherMemory, "a", false, memB},
		{"Network", otherNetwork, "a", true, memA},
	} {
		if err := pooled.fillPool(); err != nil {
			t.Fatalf("fill the pool: %v", err)
		}
		if n := len(preparedInits()); n < 1 {
			t.Fatalf("%s: no prepared init waits in the spawner", c.name)
		}
		which, hostNet, mem, wasPooled := run(sharing(c.o))
		if wasPooled {
			t.Errorf("another %s: the run took a sandbox prepared for the pool's Options", c.name)
		}
		if which != c.which || hostNet != c.hostNet || !strings.HasPrefix(mem, fmt.Sprint(c.mem)) {
			t.Errorf("another %s: the run saw /data/which %q, the host's network %v, memory %q; want %q, %v, %d bytes",
				c.name, which, hostNet, mem, c.which, c.hostNet, c.mem)
		}
	}

	for name, s := range map[string]*Sandbox{"the pool's own Sandbox": pooled, "a Sandbox with the same Options": sharing(base)} {
		if err := pooled.fillPool(); err != nil {
			t.Fatalf("fill the pool: %v", err)
		}
		which, hostNet, mem, wasPooled := run(s)
		if !wasPooled || which != "a" || hostNet || !strings.HasPrefix(mem, fmt.Sprint(memA)) {
			t.Errorf("%s: pooled %v, /data/which %q, the host's network %v, memory %q; want a pooled run in the pool's sandbox",
				name, wasPooled, which, hostNet, mem)
		}
	}
}

// BenchmarkRunTruePooled is BenchmarkRunTrue from a pool of two: each Run
// takes a prepared sandbox while the last one's is refilled in the
// background. pooled/op is the share of Runs that found one ready.
func BenchmarkRunTruePooled(b *testing.B) {
	requireSandbox(b)
	s := New(testOpts(Options{Start: Pool{Size: 2}}))
	b.Cleanup(func() { s.Close() })
	if err := s.fillPool(); err != nil {
		b.Fatalf("fill the pool: %v", err)
	}
	ctx := context.Background()
	pooled := 0
	for b.Loop() {
		res, err := s.Run(ctx, Command("/bin/true"))
		if err != nil || !res.Success() {
			b.Fatalf("%v %+v", err, res)
		}
		if res.Pooled {
			pooled++
		}
	}
	b.ReportMetric(float64(pooled)/float64(b.N), "pooled/op")
}
