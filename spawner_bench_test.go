//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkRunConcurrent: 1, 2, 8 and 64 goroutines share one Sandbox,
// and so one spawner, each running /bin/true with the default Options;
// b.N runs in all, split between them. It reports the completed runs per
// second and the median and p99 latency of one Run: if the spawner
// served one start at a time, runs/s would stay flat as callers are added
// and the latency would grow with their number.
func BenchmarkRunConcurrent(b *testing.B) {
	for _, callers := range []int{1, 2, 8, 64} {
		b.Run(fmt.Sprint(callers), func(b *testing.B) {
			requireSandbox(b)
			s := newTest(b, Options{})
			ctx := context.Background()
			if _, err := s.Run(ctx, Command("/bin/true")); err != nil { // start the spawner and the keeper
				b.Fatal(err)
			}
			lat := make([]time.Duration, b.N)
			var (
				wg   sync.WaitGroup
				next = make(chan int, b.N)
			)
			for i := range b.N {
				next <- i
			}
			close(next)
			b.ResetTimer()
			begin := time.Now()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						t0 := time.Now()
						res, err := s.Run(ctx, Command("/bin/true"))
						lat[i] = time.Since(t0)
						if err != nil || !res.Success() {
							b.Errorf("run %d: %v %+v", i, err, res)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(begin)
			b.StopTimer()
			if b.Failed() {
				return
			}
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
			b.ReportMetric(float64(p50)/1e6, "p50-ms")
			b.ReportMetric(float64(p99)/1e6, "p99-ms")
		})
	}
}
