package main

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// callerCounts are the numbers of concurrent callers throughput is
// measured with.
var callerCounts = []int{1, 2}

// slot is one row driven by a number of concurrent callers.
type slot struct {
	row     string
	callers int
}

// tally sums a slot's slices.
type tally struct {
	runs    int
	elapsed time.Duration
	cpu     time.Duration
}

// throughputs are the tallies of every slot.
type throughputs map[slot]*tally

// rate is a slot's completed runs per second.
func (t throughputs) rate(row string, callers int) float64 {
	s := t[slot{row, callers}]
	return float64(s.runs) / s.elapsed.Seconds()
}

// ratio is row a's rate over row b's, both with the given callers; NaN
// when either was not measured.
func (t throughputs) ratio(a, b string, callers int) float64 {
	if t[slot{a, callers}] == nil || t[slot{b, callers}] == nil {
		return math.NaN()
	}
	return t.rate(a, callers) / t.rate(b, callers)
}

// cpuPerRun is a row's CPU per run over all its slices.
func (t throughputs) cpuPerRun(row string) time.Duration {
	var cpu time.Duration
	var runs int
	for _, n := range callerCounts {
		cpu += t[slot{row, n}].cpu
		runs += t[slot{row, n}].runs
	}
	return cpu / time.Duration(max(runs, 1))
}

// throughput drives every row with each caller count for c.rounds slices
// of c.duration, the slices of all slots alternating, and prints the rates.
func throughput(rows []*row, c config) (throughputs, error) {
	fmt.Printf("throughput, completed runs/s: %d rounds of a %v slice per row and caller count, interleaved\n", c.rounds, c.duration)
	type job struct {
		r       *row
		callers int
	}
	var jobs []job
	t := throughputs{}
	for _, r := range rows {
		for _, n := range callerCounts {
			jobs = append(jobs, job{r, n})
			t[slot{r.name, n}] = &tally{}
		}
	}
	for round := range c.rounds {
		for k := range jobs {
			j := jobs[(round+k)%len(jobs)]
			if err := measureSlice(j.r, j.callers, c.duration, t[slot{j.r.name, j.callers}]); err != nil {
				return nil, fmt.Errorf("throughput, %s with %d callers: %w", j.r.name, j.callers, err)
			}
		}
	}
	fmt.Printf("  %-7s %10s %10s %10s %10s %11s\n", "row", "1 caller", "2 callers", "/bwrap@1", "/bwrap@2", "cpu ms/run")
	for _, r := range rows {
		fmt.Printf("  %-7s %10.1f %10.1f %10.2f %10.2f %11s\n", r.name, t.rate(r.name, 1), t.rate(r.name, 2),
			t.ratio(r.name, "bwrap", 1), t.ratio(r.name, "bwrap", 2), ms(t.cpuPerRun(r.name)))
	}
	fmt.Println("  cpu: user+system of this process's tree (its cgroup, where it has one: see cpu by process),")
	fmt.Println("  over both caller counts; kernel threads (deferred namespace teardown) are missed; warm's")
	fmt.Println("  background refills may fall in the next slice of another row")
	fmt.Println()
	return t, nil
}

// measureSlice has callers goroutines run r back to back until d has
// passed, and adds the runs, the time until the last finished and the CPU
// used to t.
func measureSlice(r *row, callers int, d time.Duration, t *tally) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		runs int
		errs []error
	)
	cpu := treeCPU()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			n := 0
			var err error
			for time.Since(start) < d {
				if err = r.run(); err != nil {
					break
				}
				n++
			}
			mu.Lock()
			defer mu.Unlock()
			runs += n
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	t.elapsed += time.Since(start)
	t.cpu += treeCPU() - cpu
	t.runs += runs
	return errors.Join(errs...)
}
