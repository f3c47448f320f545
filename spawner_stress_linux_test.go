//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The spawner under stress: it is killed between runs, under runs and at
// random moments, and every Run still either fails with ErrSpawner or
// succeeds fully confined; nothing of a dead spawner stays on the host
// (its children, its runs' processes, its run cgroups), and the next Run
// starts a new spawner.

// spawnerKills is how many times TestSpawnerKilledAtRandom kills the
// spawner: SANDBOX_SPAWNER_KILLS, else 30, or 10 with -short.
func spawnerKills(t *testing.T) int {
	return testCount(t, "SANDBOX_SPAWNER_KILLS", 30, 10, 1)
}

// spawnerModes are the Options the tests under kills run with: cold
// starts, and starts from a pool the spawner holds (whose prepared
// sandboxes must die with it too).
var spawnerModes = []struct {
	name string
	opts Options
}{{"cold", Options{}}, {"pool", Options{Start: Pool{Size: 2}}}}

// daemonScript starts a daemon that ignores the usual signals (a double
// fork into a new session: sh, then setsid sh, then a sleep left to pid 1)
// and then waits $1 in the foreground.
const daemonScript = `trap '' TERM HUP INT
setsid sh -c "trap '' TERM HUP INT; sleep 3600 &"
sleep "$1"`

// confinementScript reports, from inside, what confines the program
// (which is pid 1 of its namespace, so /proc/1 is itself), then starts a
// daemon and waits $1.
const confinementScript = `echo "pid=$$"
grep -E '^(Seccomp|NoNewPrivs|CapEff|Uid):' /proc/1/status
echo "uid_map=$(cat /proc/1/uid_map)"
echo "procs=$(ls /proc | grep -c '^[0-9][0-9]*$')"
` + daemonScript

// markedCmd runs script under /bin/sh with arg as $1 and marker in its
// environment, which every process it starts inherits.
func markedCmd(script, arg, marker string) *Cmd {
	c := Command("/bin/sh", "-c", script, "sh", arg)
	c.Env = []string{"SBXTEST_MARKER=" + marker}
	return c
}

// checkConfined returns what in a confinementScript report shows less
// than full confinement, or nil.
func checkConfined(out string) []string {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			k, v, _ = strings.Cut(line, ":")
		}
		got[k] = strings.Join(strings.Fields(v), " ")
	}
	want := map[string]string{
		"pid":        "1",
		"Seccomp":    "2", // a filter
		"NoNewPrivs": "1",
		"CapEff":     "0000000000000000",
		"Uid":        fmt.Sprintf("%d %[1]d %[1]d %[1]d", SandboxUID),
		"uid_map":    fmt.Sprintf("%d %d 1", SandboxUID, hostID(os.Getuid())),
	}
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, fmt.Sprintf("%s=%q, want %q", k, got[k], v))
		}
	}
	// sh, the $(...) subshell, ls and grep: the host has far more.
	if n := got["procs"]; len(n) != 1 || n > "5" || n < "1" {
		bad = append(bad, fmt.Sprintf("sees %q processes, want its own few", n))
	}
	return bad
}

// deadSpawner is a spawner the test killed, with the children it had.
type deadSpawner struct {
	pid      int
	children []int
}

// killSpawner SIGKILLs the spawner pid, which must be alive. The test
// ends only once the caller has seen the death (or replaced the spawner),
// so that a test failing right after a kill leaves the next one a
// spawner in a known state.
func killSpawner(t *testing.T, pid int) deadSpawner {
	t.Helper()
	if pid == 0 || !alive(pid) {
		t.Fatalf("no live spawner to kill (pid %d)", pid)
	}
	d := deadSpawner{pid: pid, children: childrenOf(pid)}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatalf("kill spawner %d: %v", pid, err)
	}
	t.Cleanup(func() { waitFor(func() bool { return spawnerPID() != pid || spawnerDead() }) })
	return d
}

// requireSpawnerGone fails the test unless the dead spawners have been
// reaped, their children have died and their run cgroups are removed.
func requireSpawnerGone(t *testing.T, dead ...deadSpawner) {
	t.Helper()
	var pids []int
	for _, d := range dead {
		pids = append(pids, d.pid)
	}
	var left []string
	gone := func() bool {
		left = left[:0]
		for _, d := range dead {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", d.pid)); err == nil {
				left = append(left, fmt.Sprintf("spawner %d", d.pid))
			}
			for _, k := range d.children {
				if alive(k) {
					b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k))
					left = append(left, fmt.Sprintf("spawner %d's child %d %q", d.pid, k, b))
				}
			}
		}
		for _, c := range cgroupsMadeBy(t, pids...) {
			left = append(left, "cgroup "+c)
		}
		return len(left) == 0
	}
	if !waitFor(gone) {
		t.Errorf("killed spawners %v left behind: %v", pids, left)
	}
}

// killMarked SIGKILLs the processes carrying marker (the test's own
// runs'), so that a test that found them alive can end.
func killMarked(marker string) {
	for _, p := range hostProcesses(marker) {
		unix.Kill(p, unix.SIGKILL)
	}
}

// spawnerDead says whether the caller has seen its spawner die.
func spawnerDead() bool {
	ourSpawner.mu.Lock()
	c := ourSpawner.c
	ourSpawner.mu.Unlock()
	return c != nil && !c.serving()
}

// requireEcho runs echo word in s and fails the test unless it printed
// exactly that.
func requireEcho(t *testing.T, s *Sandbox, word string) {
	t.Helper()
	res, err := s.Run(context.Background(), Command("/bin/sh", "-c", "echo "+word))
	if err != nil || !res.Success() || string(res.Stdout) != word+"\n" {
		t.Fatalf("Run echo %s: err %v, result %+v", word, err, res)
	}
}

// TestSpawnerKilledBetweenRuns: a spawner SIGKILLed while idle is replaced
// by the next Run, which succeeds with its right output, served by a new
// spawner; the old one is reaped and leaves no child (a pool's prepared
// sandboxes included) and no run cgroup. The next Run comes once the
// caller has seen the death, or at once, before it can have: a restart
// must not depend on who notices first. A pool is prepared again in the
// new spawner: Runs are pooled again soon after.
func TestSpawnerKilledBetweenRuns(t *testing.T) {
	requireSandbox(t)
	for _, mode := range spawnerModes {
		for _, when := range []struct {
			name string
			wait bool
		}{{"after the caller saw it", true}, {"at once", false}} {
			t.Run(mode.name+"/"+when.name, func(t *testing.T) {
				s := newTest(t, mode.opts)
				for round := range 5 {
					requireEcho(t, s, fmt.Sprintf("before%d", round))
					old := killSpawner(t, spawnerPID())
					if when.wait && !waitFor(spawnerDead) {
						t.Fatalf("the caller never saw spawner %d die", old.pid)
					}
					requireEcho(t, s, fmt.Sprintf("after%d", round))
					if p := spawnerPID(); p == old.pid || p == 0 || !alive(p) {
						t.Fatalf("round %d: spawner %d served the run after %d was killed, want a new live one", round, p, old.pid)
					}
					requireSpawnerGone(t, old)
					if poolSize(mode.opts) > 0 && !waitFor(func() bool {
						res, err := s.Run(context.Background(), Command("true"))
						return err == nil && res.Pooled
					}) {
						t.Fatalf("round %d: no Run was pooled after the spawner was replaced", round)
					}
				}
			})
		}
	}
}

// TestSpawnerKilledUnderRuns: the spawner is killed while four Runs are
// running programs that each left a daemon ignoring SIGTERM and SIGHUP.
// Every Run returns, with an error matching ErrSpawner; no process of
// theirs is left on the host, nor any child or run cgroup of the dead
// spawner; and the next Run works through a new spawner.
func TestSpawnerKilledUnderRuns(t *testing.T) {
	requireSandbox(t)
	for _, mode := range spawnerModes {
		t.Run(mode.name, func(t *testing.T) {
			s := newTest(t, mode.opts)
			requireEcho(t, s, "warm")
			m := randomToken(t, "sbxspawner-")
			const n = 4
			type ended struct {
				i   int
				res *Result
				err error
			}
			results := make(chan ended, n)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i := range n {
				go func() {
					res, err := s.Run(ctx, markedCmd(daemonScript, "3600", fmt.Sprintf("%s-%d", m, i)))
					results <- ended{i, res, err}
				}()
			}
			// Each run's program and its daemon's sleep, at least: a
			// shell that execs its last command (BusyBox in the VM) is
			// itself the foreground sleep.
			if !waitFor(func() bool {
				for i := range n {
					if len(hostProcesses(fmt.Sprintf("%s-%d", m, i))) < 2 {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("the runs' daemons never all started: %d marked processes", len(hostProcesses(m)))
			}
			running := len(hostProcesses(m))
			// Where runs get cgroups, the spawner made them; else the
			// check that they are gone would prove nothing.
			cgroups := cgroupsMadeBy(t, spawnerPID())
			if cgroupErr() == nil && len(cgroups) < n {
				t.Errorf("the spawner had made run cgroups %v, want at least one for each of the %d runs", cgroups, n)
			}
			old := killSpawner(t, spawnerPID())
			killed := time.Now()
			if len(old.children) < n {
				t.Errorf("the spawner had children %v, want at least the %d runs' inits", old.children, n)
			}
			for range n {
				select {
				case e := <-results:
					if !errors.Is(e.err, ErrSpawner) {
						t.Errorf("run %d: err %v, result %+v; want an error matching ErrSpawner", e.i, e.err, e.res)
					}
				case <-time.After(time.Minute):
					// Its processes hold its output open: end them,
					// so the test can end.
					t.Errorf("a Run still had not returned a minute after its spawner was killed; marked processes %v", hostProcesses(m))
					killMarked(m)
					<-results
				}
			}
			returned := time.Since(killed)
			if !waitFor(func() bool { return len(hostProcesses(m)) == 0 }) {
				t.Errorf("processes of the runs left on the host: %v", hostProcesses(m))
			}
			gone := time.Since(killed)
			requireSpawnerGone(t, old)
			requireEcho(t, s, "next")
			if p := spawnerPID(); p == old.pid {
				t.Errorf("the killed spawner %d is still the current one", p)
			}
			t.Logf("%d marked processes, %d spawner children, %d run cgroups; every Run returned %v after the kill, the processes were gone after %v",
				running, len(old.children), len(cgroups), returned.Round(time.Millisecond), gone.Round(time.Millisecond))
		})
	}
}

// TestSpawnerKilledAtRandom: while four goroutines keep starting Runs of
// a program that reports its confinement from inside and leaves a daemon,
// the current spawner is SIGKILLed at random moments, spawnerKills times.
// Every Run either fails with ErrSpawner or succeeds and reports full
// confinement (seccomp filter, no_new_privs, no capabilities, uid 1000
// mapped to an unprivileged host uid, pid 1 seeing only its own few
// processes). Afterwards no process of any run is left, no child or run
// cgroup of any killed spawner, and the next Run works. Both outcomes must
// have happened several times, or the test did not race.
func TestSpawnerKilledAtRandom(t *testing.T) {
	requireSandbox(t)
	for _, mode := range spawnerModes {
		t.Run(mode.name, func(t *testing.T) { killedAtRandom(t, mode.opts) })
	}
}

func killedAtRandom(t *testing.T, opts Options) {
	s := newTest(t, opts)
	m := randomToken(t, "sbxspawner-")
	kills := spawnerKills(t)
	// The kills come at random within four times the slowest of three
	// runs that each start a new spawner, so that some runs finish
	// between two kills and others do not, however fast this machine is
	// today.
	var slowest time.Duration
	requireEcho(t, s, "warm")
	for range 3 {
		d := killSpawner(t, spawnerPID())
		waitFor(spawnerDead)
		requireSpawnerGone(t, d)
		t0 := time.Now()
		res, err := s.Run(context.Background(), markedCmd(confinementScript, "0", m))
		if err != nil || !res.Success() {
			t.Fatalf("an undisturbed run: err %v, result %+v", err, res)
		}
		if bad := checkConfined(string(res.Stdout)); bad != nil {
			t.Fatalf("an undisturbed run is not fully confined: %v\n%s", bad, res.Stdout)
		}
		slowest = max(slowest, time.Since(t0))
	}

	stop := make(chan struct{})
	var killed []deadSpawner
	go func() {
		defer close(stop)
		for len(killed) < kills {
			time.Sleep(time.Millisecond + rand.N(4*slowest))
			// Not one already killed: the caller may not have started
			// its successor yet.
			p := spawnerPID()
			if p == 0 || len(killed) > 0 && p == killed[len(killed)-1].pid || !alive(p) {
				continue
			}
			d := deadSpawner{pid: p, children: childrenOf(p)}
			if err := unix.Kill(p, unix.SIGKILL); err != nil {
				t.Errorf("kill spawner %d: %v", p, err)
				return
			}
			killed = append(killed, d)
		}
	}()

	var (
		mu                 sync.Mutex
		succeeded, spawned int
		otherErrs          []string
	)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A Run that hangs ends with its deadline, an error
				// neither outcome allows.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				res, err := s.Run(ctx, markedCmd(confinementScript, fmt.Sprintf("0.0%d", (g+i)%3), m))
				cancel()
				mu.Lock()
				switch {
				case err == nil && res.Success():
					succeeded++
					if bad := checkConfined(string(res.Stdout)); bad != nil {
						t.Errorf("a run succeeded without full confinement: %v\nstdout:\n%s\nstderr:\n%s", bad, res.Stdout, res.Stderr)
					}
				case errors.Is(err, ErrSpawner):
					spawned++
				default:
					otherErrs = append(otherErrs, fmt.Sprintf("err %v, result %+v", err, res))
				}
				mu.Unlock()
			}
		}()
	}
	ended := make(chan struct{})
	go func() {
		wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(2 * time.Minute):
		t.Errorf("Runs still had not returned two minutes after the last kill; marked processes %v", hostProcesses(m))
		killMarked(m)
		<-ended
	}
	if n := len(killed); n > 0 {
		last := killed[n-1].pid
		waitFor(func() bool { return spawnerPID() != last || spawnerDead() })
	}
	for _, e := range otherErrs {
		t.Errorf("a run neither succeeded nor failed with ErrSpawner: %s", e)
	}
	if !waitFor(func() bool { return len(hostProcesses(m)) == 0 }) {
		t.Errorf("processes of the runs left on the host: %v", hostProcesses(m))
	}
	requireSpawnerGone(t, killed...)
	requireEcho(t, s, "next")
	t.Logf("%d spawners killed; %d runs succeeded confined, %d failed with ErrSpawner", len(killed), succeeded, spawned)
	if least := min(3, kills); succeeded < least || spawned < least {
		t.Errorf("%d runs succeeded and %d failed with ErrSpawner, want at least %d of each: the kills did not race the runs",
			succeeded, spawned, least)
	}
}
