//go:build linux

package cgroupdrivers

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/bench/cgroupdrivers/containerd"
	"github.com/fumehood/sandbox/bench/cgroupdrivers/driver"
	"github.com/fumehood/sandbox/bench/cgroupdrivers/opencontainers"
	"github.com/fumehood/sandbox/bench/cgroupdrivers/ours"
)

var drivers = []driver.Driver{ours.Driver{}, opencontainers.Driver{}, containerd.Driver{}}

// prepared is PrepareV2's error: it runs once, before any driver, so that
// each finds this process's cgroup ready and none pays for moving it.
var prepared error

func TestMain(m *testing.M) {
	prepared = driver.PrepareV2()
	os.Exit(m.Run())
}

// need skips where this process may not make cgroups beneath its own.
func need(tb testing.TB) {
	tb.Helper()
	if prepared != nil {
		tb.Skipf("cannot prepare this process's v2 cgroup for children: %v", prepared)
	}
	dir, err := driver.Dir(map[bool]string{true: "", false: "memory"}[driver.V2()], "")
	if err != nil {
		tb.Skipf("no cgroup: %v", err)
	}
	if err := syscall.Access(dir, 2); err != nil {
		tb.Skipf("%s is not writable by uid %d: run as root (or in a delegated v2 cgroup)", dir, os.Getuid())
	}
}

// name is a run cgroup's name, unique to this process.
func name(i int) string { return fmt.Sprintf("cgdrivers-%d-%d", os.Getpid(), i) }

// leftover removes what a failed driver left of the run cgroup n (some do
// not clean up after a failed create), so that a failure leaves nothing.
func leftover(n string) {
	for _, c := range append([]string{""}, driver.V1Controllers...) {
		if dir, err := driver.Dir(c, n); err == nil {
			os.Remove(dir)
		}
	}
}

// phases are the times of one lifecycle's steps.
type phases struct{ create, place, proc, usage, remove time.Duration }

// lifecycle is one run's cgroup as the library uses it: create with the
// limits l, start argv placed in it (CLONE_INTO_CGROUP where the group has
// a directory fd, else cgroup.procs right after the start, while the
// process waits on its stdin), let it exit, read usage, remove.
func lifecycle(d driver.Driver, n string, l driver.Limits, argv ...string) (driver.Usage, phases, error) {
	var ph phases
	t0 := time.Now()
	g, err := d.New(n, l)
	if err != nil {
		return driver.Usage{}, ph, fmt.Errorf("%s: new: %w", d.Name(), err)
	}
	ph.create = time.Since(t0)
	fail := func(err error) (driver.Usage, phases, error) {
		g.Delete()
		return driver.Usage{}, ph, fmt.Errorf("%s: %w", d.Name(), err)
	}

	t0 = time.Now()
	fd, err := g.CloneFD()
	if err != nil {
		return fail(err)
	}
	ph.place = time.Since(t0)
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = r
	if fd >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	t0 = time.Now()
	err = cmd.Start()
	r.Close()
	ph.proc = time.Since(t0)
	if err != nil {
		w.Close()
		g.Release()
		return fail(err)
	}
	t0 = time.Now()
	if fd < 0 {
		err = g.Add(cmd.Process.Pid)
	}
	g.Release()
	ph.place += time.Since(t0)
	t0 = time.Now()
	w.Close() // the process reads EOF and goes on
	werr := cmd.Wait()
	ph.proc += time.Since(t0)
	if err != nil {
		return fail(fmt.Errorf("add pid: %w", err))
	}
	if _, ok := werr.(*exec.ExitError); werr != nil && !ok {
		return fail(werr)
	}

	t0 = time.Now()
	u, err := g.Usage()
	ph.usage = time.Since(t0)
	if err != nil {
		return fail(fmt.Errorf("usage: %w", err))
	}
	t0 = time.Now()
	if err := g.Delete(); err != nil {
		return u, ph, fmt.Errorf("%s: delete: %w", d.Name(), err)
	}
	ph.remove = time.Since(t0)
	return u, ph, nil
}

// BenchmarkLifecycle is one run's cgroup per iteration, with a process
// (cat, which exits at EOF on its stdin) placed in it. Besides ns/op, which
// includes the process's fork, exec and exit, it reports each step's time
// and driver-µs, the driver's share: create + place + usage + remove.
func BenchmarkLifecycle(b *testing.B) {
	need(b)
	for _, d := range drivers {
		b.Run(d.Name(), func(b *testing.B) {
			var sum phases
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_, ph, err := lifecycle(d, name(i), driver.Bench, "/bin/cat")
				if err != nil {
					leftover(name(i))
					b.Fatal(err)
				}
				sum.create += ph.create
				sum.place += ph.place
				sum.proc += ph.proc
				sum.usage += ph.usage
				sum.remove += ph.remove
			}
			us := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e3 }
			b.ReportMetric(us(sum.create+sum.place+sum.usage+sum.remove), "driver-µs")
			b.ReportMetric(us(sum.create), "create-µs")
			b.ReportMetric(us(sum.place), "place-µs")
			b.ReportMetric(us(sum.usage), "usage-µs")
			b.ReportMetric(us(sum.remove), "remove-µs")
			b.ReportMetric(us(sum.proc), "process-µs")
		})
	}
}

// BenchmarkDriver is the driver alone, without a process: create with the
// limits, open and close the CLONE_INTO_CGROUP descriptor where there is
// one, read usage, remove. Its allocs/op are the driver's own.
func BenchmarkDriver(b *testing.B) {
	need(b)
	for _, d := range drivers {
		b.Run(d.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				g, err := d.New(name(i), driver.Bench)
				if err != nil {
					leftover(name(i))
					b.Fatal(err)
				}
				if _, err := g.CloneFD(); err != nil {
					b.Fatal(err)
				}
				g.Release()
				if _, err := g.Usage(); err != nil {
					b.Fatal(err)
				}
				if err := g.Delete(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
