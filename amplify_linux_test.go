//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
)

// The amplification suite: a run attacks what serves it in the caller's
// process (this test process), and the caller's memory, descriptors and
// goroutines are sampled during the attack and after it. Bounds come from
// the package documentation.

// callerUsage is what the caller (this process) holds at one moment.
type callerUsage struct {
	RSS        uint64 // resident set (VmRSS)
	HWM        uint64 // peak resident set since the last resetPeakRSS (VmHWM)
	Heap       uint64 // bytes in live and unswept heap objects
	GoMem      uint64 // memory the Go runtime has mapped and not released
	FDs        int    // open descriptors
	Goroutines int
}

func (u callerUsage) String() string {
	return fmt.Sprintf("rss %.1f MiB (peak %.1f), heap %.1f MiB, go %.1f MiB, %d fds, %d goroutines",
		mib(u.RSS), mib(u.HWM), mib(u.Heap), mib(u.GoMem), u.FDs, u.Goroutines)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// sampleCaller reads the caller's usage now; it stops nothing.
func sampleCaller() callerUsage {
	var u callerUsage
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				u.RSS = kb << 10
			case "VmHWM:":
				u.HWM = kb << 10
			}
		}
	}
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	u.Heap = s[0].Value.Uint64()
	u.GoMem = s[1].Value.Uint64() - s[2].Value.Uint64()
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		u.FDs = len(ents) - 1 // the directory being read
	}
	u.Goroutines = runtime.NumGoroutine()
	return u
}

// openFDs lists what this process's descriptors are open on.
func openFDs() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+target)
	}
	return out
}

// settledCaller is sampleCaller after the garbage collector ran and gave
// freed memory back to the system.
func settledCaller() callerUsage {
	runtime.GC()
	debug.FreeOSMemory()
	return sampleCaller()
}

// resetPeakRSS restarts VmHWM from the current resident set.
func resetPeakRSS() {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// watchCaller samples the caller every 20 ms until the returned function
// is called, which returns the largest value seen of each field.
func watchCaller() (stop func() callerUsage) {
	var mu sync.Mutex
	var peak callerUsage
	take := func() {
		u := sampleCaller()
		mu.Lock()
		peak.RSS, peak.HWM = max(peak.RSS, u.RSS), max(peak.HWM, u.HWM)
		peak.Heap, peak.GoMem = max(peak.Heap, u.Heap), max(peak.GoMem, u.GoMem)
		peak.FDs, peak.Goroutines = max(peak.FDs, u.FDs), max(peak.Goroutines, u.Goroutines)
		mu.Unlock()
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			take()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() callerUsage {
		close(done)
		<-finished
		take()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// proxyAttack is the attacking program: python3 opens n connections to the
// proxy and on each does what mode says, then holds them for hold seconds.
//
//	huge      an unfinished request header of 250,000 bytes of tiny fields ("a:b\r\n")
//	held      an unfinished header within the proxy's limits: 120 fields, 30,000 bytes
//	complete  the huge header, finished, for an allowed URL
//	silent    nothing
const proxyAttack = `
import socket, sys, time
n, mode, hold, url = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
head = b"GET " + url.encode() + b" HTTP/1.1\r\nHost: x\r\n" + b"a:b\r\n" * 50000
if mode == "held":
    head = b"GET " + url.encode() + b" HTTP/1.1\r\n" + (b"a:" + b"b" * 245 + b"\r\n") * 120
if mode == "complete":
    head += b"\r\n"
socks, sent = [], 0
for i in range(n):
    s = socket.socket()
    s.settimeout(30)
    try:
        s.connect(("127.0.0.1", 3128))
    except OSError as e:
        print("connect", i, e, flush=True)
        break
    socks.append(s)
    if mode != "silent":
        try:
            s.sendall(head)
            sent += 1
        except OSError:
            pass
print("opened", len(socks), "sent", sent, flush=True)
time.sleep(hold)
`

// amplifyProxy runs runs Egress sandboxes at once, each attacking
// the proxy with conns connections in mode, and checks the caller's memory,
// descriptors and goroutines during and after. It returns each run's result.
func amplifyProxy(t *testing.T, runs, conns int, mode string) []*Result {
	requireSandbox(t)
	requirePrograms(t, "python3")
	w := newEgressWorld(t)
	opts := w.opts(false)
	s := newTest(t, opts)
	defer s.Close()
	url := "http://api.example.com:" + port(w.http) + "/"
	attack := func(hold string) (*Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		return s.Run(ctx, Command("/usr/bin/python3", "-c", proxyAttack, strconv.Itoa(conns), mode, hold, url))
	}
	// First runs start what every run shares (the spawner and its
	// channels, what the Sandbox prepares for its runs), which is not the
	// attack's cost; the start is taken once that has settled.
	for range 2 {
		if _, err := attack("0"); err != nil {
			t.Fatal(err)
		}
	}
	start := settledCaller()
	for i := 0; i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		again := settledCaller()
		if again.FDs == start.FDs && again.Goroutines == start.Goroutines {
			break
		}
		start = again
	}
	startFDs := openFDs()
	resetPeakRSS()
	stop := watchCaller()
	results := make([]*Result, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() { results[i], errs[i] = attack("3") })
	}
	wg.Wait()
	peak := stop()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if !results[i].Success() || !strings.Contains(string(results[i].Stdout), fmt.Sprintf("opened %d", conns)) {
			t.Fatalf("run %d: %v\n%s%s", i, results[i].Err(), results[i].Stdout, results[i].Stderr)
		}
		// Every connection the run opened is in its report: served,
		// refused, or held back (by MaxConns or the CPU budget) until
		// the run ended.
		if got := len(results[i].Connections) + results[i].ConnectionsDropped; got < conns {
			t.Errorf("run %d: %d connections reported of %d opened", i, got, conns)
		}
	}
	// The test's own copy of the reports is not the proxy's to free.
	reports := 0
	for _, r := range results {
		reports += len(r.Connections)
	}
	var after callerUsage
	settled := waitFor(func() bool {
		after = settledCaller()
		return after.FDs <= start.FDs && after.Goroutines <= start.Goroutines
	})
	t.Logf("%d run(s) x %d %s connections (%d reported)\nstart  %v\npeak   %v\nafter  %v",
		runs, conns, mode, reports, start, peak, after)
	if !settled {
		t.Errorf("descriptors or goroutines not back after the runs: %d fds, %d goroutines, started with %d and %d\nfds now: %v\nfds at the start: %v",
			after.FDs, after.Goroutines, start.FDs, start.Goroutines, openFDs(), startFDs)
	}
	// The bound is the proxy's documented one per run. The runtime may
	// let the heap grow to twice what is live before it collects, and the
	// runs themselves (output, the spawner's messages) cost a little.
	bound := uint64(runs)*2*egress.MaxProxyMemory + 16<<20
	if grown := max(peak.RSS, peak.HWM) - min(start.RSS, max(peak.RSS, peak.HWM)); grown > bound {
		t.Errorf("the caller's resident set grew by %.1f MiB during the attack; the bound is %.1f MiB (%d runs, %.1f MiB each)",
			mib(grown), mib(bound), runs, mib(egress.MaxProxyMemory))
	}
	// Descriptors: the proxy's bound, and a few of the run's own (its
	// pipes, pidfd, proxy channel); goroutines: two a connection, and a
	// few for the run.
	if grown := peak.FDs - start.FDs; grown > runs*(egress.MaxProxyFDs+16) {
		t.Errorf("the caller opened %d descriptors during the attack; the bound is %d a run (MaxProxyFDs) and 16 for the run", grown, egress.MaxProxyFDs)
	}
	if grown := peak.Goroutines - start.Goroutines; grown > runs*(2*egress.DefaultMaxConns+16) {
		t.Errorf("the caller ran %d more goroutines during the attack; the bound is %d a run", grown, 2*egress.DefaultMaxConns+16)
	}
	// Given back: the heap is where it started, but for the reports the
	// test still holds.
	if after.Heap > start.Heap+uint64(reports)*1024+2<<20 {
		t.Errorf("heap %.1f MiB after the runs, %.1f MiB before: not given back", mib(after.Heap), mib(start.Heap))
	}
	if after.RSS > start.RSS+uint64(runs)*egress.MaxProxyMemory+8<<20 {
		t.Errorf("resident set %.1f MiB after the runs, %.1f MiB before: not given back", mib(after.RSS), mib(start.RSS))
	}
	return results
}

// TestAmplifyProxyHugeHeaders: 256 connections each hold an unfinished
// header of 250,000 bytes of tiny fields.
func TestAmplifyProxyHugeHeaders(t *testing.T) {
	amplifyProxy(t, 1, 256, "huge")
}

// TestAmplifyProxyHeldHeaders: 256 connections each hold an unfinished
// header just within the limits, so the proxy keeps what it read of each.
func TestAmplifyProxyHeldHeaders(t *testing.T) {
	amplifyProxy(t, 1, 256, "held")
}

// TestAmplifyProxyHugeHeadersFourRuns: the same from four runs at once.
func TestAmplifyProxyHugeHeadersFourRuns(t *testing.T) {
	amplifyProxy(t, 4, 256, "huge")
}

// TestAmplifyProxyManyFields: complete requests with 50,000 fields.
func TestAmplifyProxyManyFields(t *testing.T) {
	for i, r := range amplifyProxy(t, 1, 256, "complete") {
		for _, c := range r.Connections {
			// 431, or no answer: a connection the proxy's CPU budget
			// or MaxConns held back until the run ended.
			if c.Status != 431 && c.Status != 0 {
				t.Errorf("run %d: a request of 50,000 fields was answered %d: %+v", i, c.Status, c)
				break
			}
		}
	}
}

// TestAmplifyProxySilent: 256 connections that never send a byte are
// reported, each of them.
func TestAmplifyProxySilent(t *testing.T) {
	for i, r := range amplifyProxy(t, 1, 256, "silent") {
		if got := len(r.Connections) + r.ConnectionsDropped; got < 256 {
			t.Errorf("run %d: %d connections reported of 256 opened: %+v", i, got, r.Connections)
		}
	}
}
