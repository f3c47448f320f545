//go:build linux

package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/attack"
)

// The escape suite: each test runs one of internal/testsupport/attack's programs inside
// a sandbox, as a hostile program would run, and judges from its report and
// from the host that every attempt was blocked or limited. The attacks and
// the breakouts they model are listed in internal/testsupport/attack's files; the
// classes already tested elsewhere by what the program sees (TestProcMasked,
// TestOnlyStdioInherited, TestForkBombContained, ...) are attacked here
// once more by the attack program, so the suite stands on its own. Each
// attack runs in the host's /usr and in an image's root (forEachRoot).

// attackOpts is opts in root, with the attack program (the test binary)
// bound read-only at helperPath.
func attackOpts(t *testing.T, root escapeRoot, opts Options) Options {
	t.Helper()
	opts.Binds = append(slices.Clone(opts.Binds), helperBind(t))
	return root.with(opts)
}

// runAttack runs attack name in s and returns how the run ended and the
// attack's report (nil when the run ended before it printed one).
func runAttack(t *testing.T, s *Sandbox, name string, args ...string) (*Result, *attack.Report) {
	t.Helper()
	res, rep, err := runFor(t, s, 60*time.Second, name, args...)
	if err != nil {
		t.Fatalf("Run attack %s: %v", name, err)
	}
	return res, rep
}

// runFor runs attack name in s with a deadline of d and returns how it
// ended, the report, if one was printed, and Run's error.
func runFor(t *testing.T, s *Sandbox, d time.Duration, name string, args ...string) (*Result, *attack.Report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := s.Run(ctx, helperCmd("attack", append([]string{name}, args...)...))
	if res == nil {
		t.Fatalf("Run attack %s: %v", name, err)
	}
	rep, _ := attack.Parse(res.Stdout)
	if rep != nil {
		requireRan(t, s, rep)
	}
	return res, rep, err
}

// mustReport runs attack name in a new sandbox built from opts in root,
// requires that it finished and printed its report, and returns both.
func mustReport(t *testing.T, root escapeRoot, opts Options, name string, args ...string) (*Result, *attack.Report) {
	t.Helper()
	s := newTest(t, attackOpts(t, root, opts))
	res, rep := runAttack(t, s, name, args...)
	if rep == nil {
		t.Fatalf("attack %s printed no report: %v\nstdout:\n%s\nstderr:\n%s", name, res.Err(), res.Stdout, res.Stderr)
	}
	return res, rep
}

// requireBlocked fails the test for every attempt in rep that worked, and
// when rep holds fewer than min attempts (an attack that tried nothing
// proves nothing).
func requireBlocked(t *testing.T, rep *attack.Report, min int) {
	t.Helper()
	if len(rep.Attempts) < min {
		t.Errorf("attack %s made %d attempts, want at least %d: %+v", rep.Attack, len(rep.Attempts), min, rep.Attempts)
	}
	for _, a := range rep.Worked() {
		t.Errorf("attack %s: %q worked", rep.Attack, a.What)
	}
	if t.Failed() {
		t.Logf("attack %s saw: %v", rep.Attack, rep.Seen)
	}
}

// requireRefusedBy fails the test unless attempt what was made and failed
// with errno name want.
func requireRefusedBy(t *testing.T, rep *attack.Report, what, want string) {
	t.Helper()
	a, ok := rep.Find(what)
	if !ok {
		t.Errorf("attack %s made no attempt %q", rep.Attack, what)
	} else if a.Worked || a.Err != want {
		t.Errorf("attack %s: %q worked=%v err=%s, want refused with %s", rep.Attack, a.What, a.Worked, a.Err, want)
	}
}

// requireDenied fails the test unless every one of calls is among the
// run's reported seccomp refusals.
func requireDenied(t *testing.T, res *Result, calls ...string) {
	t.Helper()
	for _, call := range calls {
		if !slices.ContainsFunc(res.Denials, func(d Denial) bool { return d.Syscall == call }) {
			t.Errorf("Denials %v lack %s", res.Denials, call)
		}
	}
}

// spawnerPID is the running spawner's host pid, or 0.
func spawnerPID() int {
	ourSpawner.mu.Lock()
	defer ourSpawner.mu.Unlock()
	if ourSpawner.c == nil {
		return 0
	}
	return ourSpawner.c.pid
}

// TestEscapeNamespaces: nested user namespaces to regain capabilities,
// every other namespace, setns, setuid and capset. The seccomp policy
// refuses the namespace calls (EPERM, reported), and without it the kernel
// would still refuse most: the program holds no capability.
func TestEscapeNamespaces(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		res, rep := mustReport(t, root, Options{}, "userns")
		requireBlocked(t, rep, 25)
		requireRefusedBy(t, rep, "unshare user", "EPERM")
		requireRefusedBy(t, rep, "clone with a new user namespace", "EPERM")
		requireRefusedBy(t, rep, "clone3 with a new user namespace", "ENOSYS")
		requireRefusedBy(t, rep, "setns user", "EPERM")
		requireDenied(t, res, "unshare", "clone", "setns")
	})
}
