//go:build linux

package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkSeccompSyscall measures what the filter adds to each syscall:
// a loop of getpid, and of 4 KiB reads of /dev/zero, inside a sandbox with
// the default policy, with a policy that allows everything (the fixed cost
// of having a filter at all), and with none. The figure is ns/syscall, timed inside
// the sandbox; ns/op is the whole run and is not the point.
func BenchmarkSeccompSyscall(b *testing.B) {
	requireSandbox(b)
	const calls = 2_000_000
	for _, call := range []string{"getpid", "read"} {
		for _, filter := range []string{"default", "allow-all", "none"} {
			b.Run(call+"/filter="+filter, func(b *testing.B) {
				opts := Options{Binds: []Bind{helperBind(b)}}
				switch filter {
				case "allow-all":
					opts.Seccomp = &SeccompPolicy{Default: ActAllow, Unknown: ActAllow}
				case "none":
					opts.Seccomp = Unconfined{}
				}
				s := newTest(b, opts)
				var total float64
				for range b.N {
					res, err := s.Run(context.Background(), helperCmd("syscalls", call, strconv.Itoa(calls)))
					if err != nil || !res.Success() {
						b.Fatalf("%v %v %s", err, res.Err(), res.Stderr)
					}
					ns, err := strconv.ParseFloat(strings.TrimSpace(string(res.Stdout)), 64)
					if err != nil {
						b.Fatal(err)
					}
					total += ns
				}
				b.ReportMetric(total/float64(b.N), "ns/syscall")
			})
		}
	}
}

// BenchmarkSeccompCompile is what compiling the default policy would cost
// every Run; New pays it once per process (BenchmarkSeccompNew).
func BenchmarkSeccompCompile(b *testing.B) {
	var cf *compiledFilter
	for range b.N {
		var err error
		if cf, err = DefaultSeccompPolicy().compile("bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(cf.prog)/8), "instructions")
}

// BenchmarkSeccompNew is New with the default policy, which is compiled
// when the module is built (defaultProg) or once per process, and shared.
func BenchmarkSeccompNew(b *testing.B) {
	for range b.N {
		if err := New(Options{}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
