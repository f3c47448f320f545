package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cpuSettle is how long a batch's span goes on after its last run, so
// that the teardown the kernel defers (a namespace's cleanup_net, a
// cgroup's css_free work, RCU callbacks) lands in the batch that caused it.
const cpuSettle = 100 * time.Millisecond

// cpuShares is the CPU time used in a span, by where it ran. The run's
// total is its tree's and the kernel threads'; the machine's busy time
// less that is the "other" column.
type cpuShares struct {
	caller, spawner, sandbox cpuSplit
	kthreads, machine        time.Duration
}

func (s cpuShares) total() time.Duration {
	return s.caller.total() + s.spawner.total() + s.sandbox.total() + s.kthreads
}

func (s cpuShares) other() time.Duration { return s.machine - s.total() }

func (s cpuShares) add(t cpuShares) cpuShares {
	return cpuShares{s.caller.add(t.caller), s.spawner.add(t.spawner), s.sandbox.add(t.sandbox),
		s.kthreads + t.kthreads, s.machine + t.machine}
}

func (s cpuShares) div(n int) cpuShares {
	d := time.Duration(max(n, 1))
	return cpuShares{s.caller.div(d), s.spawner.div(d), s.sandbox.div(d), s.kthreads / d, s.machine / d}
}

// cpuPerRun is each row's shares per run, by row name.
type cpuPerRun map[string]cpuShares

// ratio is row a's total CPU per run over row b's; NaN when either was not
// measured.
func (c cpuPerRun) ratio(a, b string) float64 {
	return rowRatio(c, a, b, cpuShares.total)
}

// kthreadChurn counts the kernel threads that started or exited during the
// batches.
type kthreadChurn struct{ started, exited int }

// cpuByProcess runs each row in batches of c.cpuRuns runs, c.rounds batches
// per row, the rows taken in turn from one that rotates, and prints each
// row's CPU per run by where it ran.
func cpuByProcess(rows []*row, c config) (cpuPerRun, error) {
	fmt.Printf("cpu by process, ms per run: %d rounds of a batch of %d runs per row, interleaved\n", c.rounds, c.cpuRuns)
	sums := map[string]cpuShares{}
	var churn kthreadChurn
	for round := range c.rounds {
		for k := range rows {
			r := rows[(round+k)%len(rows)]
			s, err := cpuBatch(r, c.cpuRuns, &churn)
			if err != nil {
				return nil, fmt.Errorf("cpu by process, %s: %w", r.name, err)
			}
			sums[r.name] = sums[r.name].add(s)
		}
	}
	per := cpuPerRun{}
	fmt.Printf("  %-7s %-15s %-15s %-15s\n", "", "    caller", "    spawner", "    sandbox")
	fmt.Printf("  %-7s %7s %7s %7s %7s %7s %7s %8s %7s %7s\n", "row", "user", "sys", "user", "sys", "user", "sys", "kthreads", "other", "total")
	for _, r := range rows {
		s := sums[r.name].div(c.rounds * c.cpuRuns)
		per[r.name] = s
		fmt.Printf("  %-7s %7s %7s %7s %7s %7s %7s %8s %7s %7s\n", r.name, ms(s.caller.user), ms(s.caller.sys),
			ms(s.spawner.user), ms(s.spawner.sys), ms(s.sandbox.user), ms(s.sandbox.sys), ms(s.kthreads), ms(s.other()), ms(s.total()))
	}
	fmt.Println("  caller: this process (getrusage). spawner: its own utime and stime (/proc/PID/stat, 10 ms ticks).")
	if theCPUGroup != nil {
		fmt.Println("  sandbox: the rest of this process's cgroup (cpuacct, ns), made for the table: the inits and")
		fmt.Println("  programs, the commands of the floor, bwrap and cli rows, and what left the tree before it was")
		fmt.Println("  reaped (bwrap's pid 1, re-parented, with its namespaces' teardown); user and sys from getrusage")
		fmt.Println("  and /proc, the remainder put in sys.")
	} else {
		fmt.Println("  sandbox: what the spawner reaped and this process reaped (getrusage, /proc/PID/stat); without a")
		fmt.Println("  cgroup of the table's, a process that leaves the tree before it is reaped is missed (bwrap's pid 1).")
	}
	fmt.Printf("  kthreads: kthreadd and its children, from /proc/PID/schedstat (ns); a thread that exits during a\n")
	fmt.Printf("  batch is missed for that batch (%d started and %d exited in all). total: the columns' sum, which\n", churn.started, churn.exited)
	fmt.Println("  cpu/bwrap compares. other: /proc/stat's busy time of all cpus (user+nice+system+irq+softirq+steal)")
	fmt.Println("  less total: other processes and irq work charged to no task; near 0 on a quiet machine. A batch's")
	fmt.Printf("  span ends %v after its last run, to take in the teardown the kernel defers.\n", cpuSettle)
	fmt.Println()
	return per, nil
}

// cpuBatch runs r n times and returns the CPU used meanwhile by where it
// ran. The kernel threads' reads, the costliest, lie outside the other
// counters' span, so that the caller's column does not pay for them.
func cpuBatch(r *row, n int, churn *kthreadChurn) (cpuShares, error) {
	kt0 := kthreadTimes()
	t0 := treeShares()
	m0 := machineBusy()
	var err error
	for range n {
		if err = r.run(); err != nil {
			break
		}
	}
	time.Sleep(cpuSettle)
	m1 := machineBusy()
	t1 := treeShares()
	kt1 := kthreadTimes()
	s := cpuShares{caller: t1.caller.sub(t0.caller), spawner: t1.spawner.sub(t0.spawner),
		sandbox: t1.sandbox.sub(t0.sandbox), machine: m1 - m0}
	for pid, d := range kt1 {
		d0, ok := kt0[pid]
		if !ok || d0 > d { // new, or a new thread with an old one's pid
			churn.started++
			d0 = 0
		}
		s.kthreads += d - d0
	}
	for pid := range kt0 {
		if _, ok := kt1[pid]; !ok {
			churn.exited++
		}
	}
	return s, err
}

// treeShares reads the caller's, the spawner's and the sandboxes' CPU
// time so far. A process the spawner reaps moves from its live children
// to its cutime and cstime whole, so the sum only grows by what ran.
func treeShares() (s cpuShares) {
	s = cpuShares{caller: rusage(unix.RUSAGE_SELF), sandbox: rusage(unix.RUSAGE_CHILDREN)}
	defer func() {
		// The cgroup's counter holds what the tree's processes used,
		// those that left it too: the sandbox column is its remainder.
		if g := theCPUGroup; g != nil {
			if tree, ok := g.usage(); ok {
				if rest := tree - s.caller.total() - s.spawner.total() - s.sandbox.total(); rest > 0 {
					s.sandbox.sys += rest
				}
			}
		}
	}()
	for _, pid := range childrenOf("self") {
		st, ok := readStat(pid)
		if !ok {
			continue
		}
		if !isSpawner(pid) {
			s.sandbox = s.sandbox.add(st.own).add(st.reaped)
			continue
		}
		s.spawner = st.own
		s.sandbox = s.sandbox.add(st.reaped)
		for _, c := range childrenOf(pid) {
			if cs, ok := readStat(c); ok {
				s.sandbox = s.sandbox.add(cs.own).add(cs.reaped)
			}
		}
	}
	return s
}

// isSpawner tells the spawner from the other children of this process by
// the argv[0] the library starts it with; its executable does not tell,
// being this program's own.
func isSpawner(pid string) bool {
	b, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return argv0 == "sandbox-spawner"
}

// kthreadTimes reads the CPU time so far of kthreadd and of each of its
// children, which are all the kernel's threads, by pid.
func kthreadTimes() map[string]time.Duration {
	m := map[string]time.Duration{}
	for _, pid := range append([]string{"2"}, childrenOf("2")...) {
		b, err := os.ReadFile("/proc/" + pid + "/schedstat")
		if err != nil {
			continue
		}
		if d, ok := parseSchedstat(b); ok {
			m[pid] = d
		}
	}
	return m
}

// parseSchedstat returns a task's time on a cpu, the first field of its
// /proc/PID/schedstat, in ns.
func parseSchedstat(b []byte) (time.Duration, bool) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err == nil
}

// machineBusy is the busy time of all the machine's cpus so far.
func machineBusy() time.Duration {
	b, _ := os.ReadFile("/proc/stat")
	d, _ := parseProcStat(b)
	return d
}

// parseProcStat returns the busy time of /proc/stat's "cpu" line, the sum
// over all cpus: user, nice, system, irq, softirq and steal (guest time is
// in user already; idle and iowait are not busy). Steal is in, as it is in
// a task's time on a cpu (schedstat, cpuacct): the time the host gave
// another guest while the task held the cpu.
func parseProcStat(b []byte) (time.Duration, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, k := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, true
}
