//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

func benchRun(b *testing.B, opts Options, name string, args ...string) {
	requireSandbox(b)
	s := newTest(b, opts)
	ctx := context.Background()
	if _, err := s.Run(ctx, Command(name, args...)); err != nil { // start the spawner outside the timing
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := s.Run(ctx, Command(name, args...))
		if err != nil || !res.Success() {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkRunTrue is the start-to-end cost of one sandbox running /bin/true.
func BenchmarkRunTrue(b *testing.B) { benchRun(b, Options{}, "/bin/true") }

// BenchmarkRunTrueNoLimits is BenchmarkRunTrue without a cgroup (every
// limit off): the difference is the per-run cost of the run's cgroup.
func BenchmarkRunTrueNoLimits(b *testing.B) {
	benchRun(b, Options{Limits: Limits{Memory: -1, CPUs: -1, Pids: -1}}, "/bin/true")
}

// BenchmarkRunTrueNoSeccomp is BenchmarkRunTrue without the seccomp
// filter: the difference is the per-run cost of loading it and of handing
// its notification fd to the supervisor.
func BenchmarkRunTrueNoSeccomp(b *testing.B) {
	benchRun(b, Options{Seccomp: Unconfined{}}, "/bin/true")
}

// BenchmarkRunEcho runs sh -c 'echo hi' and captures its output.
func BenchmarkRunEcho(b *testing.B) { benchRun(b, Options{}, "/bin/sh", "-c", "echo hi") }

// BenchmarkRunTrueInProcess clones from the benchmark process itself.
func BenchmarkRunTrueInProcess(b *testing.B) { benchRun(b, Options{Start: InProcess{}}, "/bin/true") }

// heap is kept reachable so the collector cannot drop it mid-benchmark.
var heap [][]byte

// BenchmarkRunHeap shows Run's start cost is flat in the caller's size: the
// caller holds 10 MiB or 1 GiB of touched heap while it runs /bin/true
// through the spawner.
func BenchmarkRunHeap(b *testing.B) { benchHeap(b, Options{}, 10<<20, 1<<30) }

// BenchmarkRunHeapInProcess is the same without the spawner: the caller
// itself clones, and every start copies its page tables.
func BenchmarkRunHeapInProcess(b *testing.B) {
	benchHeap(b, Options{Start: InProcess{}}, 10<<20, 1<<30)
}

func benchHeap(b *testing.B, opts Options, sizes ...int) {
	for _, size := range sizes {
		name := fmt.Sprintf("%dMiB", size>>20)
		if size >= 1<<30 {
			name = fmt.Sprintf("%dGiB", size>>30)
		}
		b.Run(name, func(b *testing.B) {
			heap = make([][]byte, size>>20)
			for i := range heap {
				heap[i] = make([]byte, 1<<20)
				for j := 0; j < len(heap[i]); j += 4096 {
					heap[i][j] = 1
				}
			}
			defer func() { heap = nil; runtime.GC() }()
			runtime.GC()
			benchRun(b, opts, "/bin/true")
		})
	}
}

// BenchmarkRunTrueTerminal is BenchmarkRunTrue on a Cmd.Terminal: the
// difference is the pty's making in the init, its master's hand-over to
// the caller, and the relay.
func BenchmarkRunTrueTerminal(b *testing.B) {
	requireSandbox(b)
	s := newTest(b, Options{})
	ctx := context.Background()
	cmd := func() *Cmd {
		c := Command("/bin/true")
		c.Terminal = &Terminal{}
		return c
	}
	if _, err := s.Run(ctx, cmd()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := s.Run(ctx, cmd())
		if err != nil || !res.Success() {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
