//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// soakRuns is how many sequential runs TestSoak makes: SANDBOX_SOAK_RUNS
// (make soak sets 10,000), else 1,000, or 200 with -short (the v2 VM
// emulates its CPU).
func soakRuns(t *testing.T) int {
	return testCount(t, "SANDBOX_SOAK_RUNS", 1000, 200, 20)
}

// testCount is the count in the environment variable name, else def, or
// short with -short; at least least.
func testCount(t *testing.T, name string, def, short, least int) int {
	t.Helper()
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < least {
			t.Fatalf("%s=%q: want a number, at least %d", name, s, least)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return def
}

// percentiles reports the p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[(len(s)*99)/100]
}

// TestSoak: many sequential runs of one session, then 64 at once, leave
// nothing behind (fds, goroutines, mounts, the spawner's fds, mounts and
// children, run cgroups, temporary files), every run answers correctly,
// and the latency at the start and the end is logged (judged by reading,
// not asserted: tests here never time). make soak runs the long form.
func TestSoak(t *testing.T) {
	requireSandbox(t)
	// Cold: the leak check counts the spawner's children, which a pool's prepared sandboxes are.
	s := newColdTest(t, Options{})
	ctx := context.Background()
	if _, err := s.Run(ctx, Command("true")); err != nil { // start the spawner and the keeper
		t.Fatal(err)
	}
	// A private temp directory, so other programs on the machine cannot
	// disturb the count; the library must leave nothing in it.
	t.Setenv("TMPDIR", t.TempDir())
	before := takeSnapshot(t)

	runs := soakRuns(t)
	lat := make([]time.Duration, runs)
	for i := range runs {
		start := time.Now()
		res, err := s.Run(ctx, Command("/bin/sh", "-c", `echo "$1" >/workspace/n && cat /workspace/n`, "sh", strconv.Itoa(i)))
		lat[i] = time.Since(start)
		if err != nil || !res.Success() || string(res.Stdout) != strconv.Itoa(i)+"\n" {
			t.Fatalf("run %d: %v, stdout %q, result %+v", i, err, res.Stdout, res)
		}
	}
	tenth := runs / 10
	p50a, p99a := percentiles(lat[:tenth])
	p50b, p99b := percentiles(lat[runs-tenth:])
	t.Logf("soak: %d sequential runs; first %d: p50 %v p99 %v; last %d: p50 %v p99 %v",
		runs, tenth, p50a.Round(10*time.Microsecond), p99a.Round(10*time.Microsecond),
		tenth, p50b.Round(10*time.Microsecond), p99b.Round(10*time.Microsecond))

	// 64 at once, a few rounds, each run checking its own answer.
	const width = 64
	rounds := max(2, runs/1000)
	var wg sync.WaitGroup
	conc := make([]time.Duration, width*rounds)
	for g := range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				want := fmt.Sprintf("%d-%d", g, r)
				start := time.Now()
				res, err := s.Run(ctx, Command("/bin/echo", want))
				conc[g*rounds+r] = time.Since(start)
				if err != nil || string(res.Stdout) != want+"\n" {
					t.Errorf("concurrent run %s: %v, stdout %q", want, err, res.Stdout)
					return
				}
			}
		}()
	}
	wg.Wait()
	p50c, p99c := percentiles(conc)
	t.Logf("soak: %d runs %d at a time: p50 %v p99 %v", len(conc), width, p50c.Round(10*time.Microsecond), p99c.Round(10*time.Microsecond))

	after := takeSnapshot(t)
	if after != before {
		t.Errorf("after the soak: %+v\nbefore:         %+v", after, before)
	}
	if after.spawnerChildren != 0 {
		t.Errorf("spawner still has %d children", after.spawnerChildren)
	}
	for _, c := range cgroupsMadeBy(t, ourSpawner.c.pid) {
		t.Errorf("run cgroup left after the soak: %s", c)
	}
}
