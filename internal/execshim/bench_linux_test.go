package execshim

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// What the shim adds to a sandbox's start is one exec of itself. These
// benchmarks measure it on its own: the shim exec'd with an argv it
// refuses (one exec of it), and exec'd to exec itself so (two execs); the
// difference is its cost. Besides the time, each reports the CPU time its
// children used, less sensitive to a busy machine than the wall clock.
func benchShim(b *testing.B, argv func(path string) []string) {
	image := Image(3)
	if image == nil {
		b.Skip("no shim for this architecture")
	}
	path := filepath.Join(b.TempDir(), "shim")
	if err := os.WriteFile(path, image, 0o755); err != nil {
		b.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	attr := &syscall.ProcAttr{Files: []uintptr{0, 1, null.Fd(), null.Fd()}}
	args := argv(path)
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	for b.Loop() {
		pid, err := syscall.ForkExec(path, args, attr)
		if err != nil {
			b.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != ExitRefused {
			b.Fatalf("wait: %v, status %v", err, ws)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

func BenchmarkShimOnce(b *testing.B) {
	benchShim(b, func(string) []string { return []string{"refused"} })
}

func BenchmarkShimTwice(b *testing.B) {
	benchShim(b, func(path string) []string { return Args(1, []string{path}, []string{"refused"}) })
}
