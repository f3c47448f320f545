package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/fumehood/sandbox"
)

// ballast is the worker's heap, kept reachable so the collector cannot
// drop it while the worker measures.
var ballast [][]byte

// heapWorker is the tool re-executed with -heap-worker SIZE: it allocates
// and touches SIZE bytes of heap, makes its own Sandbox (and, at its first
// Run, its own spawner), says "ready RSS_KIB", then, for every line on
// stdin, runs /bin/true once and prints the run's latency in ns. It returns
// at the end of stdin.
func heapWorker(size int64) error {
	ballast = make([][]byte, max(size>>20, 1))
	for i := range ballast {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += os.Getpagesize() {
			b[j] = 1
		}
		ballast[i] = b
	}
	runtime.GC()
	opts, _ := defaultOptions()
	sb := sandbox.New(opts)
	err := serveRuns(sb)
	return errors.Join(err, sb.Close())
}

// serveRuns starts the worker's spawner with a first Run, says it is
// ready, then serves one Run per line of stdin.
func serveRuns(sb *sandbox.Sandbox) error {
	if err := sandboxRun(sb); err != nil {
		return err
	}
	fmt.Printf("ready %d\n", rssKiB())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		start := time.Now()
		err := sandboxRun(sb)
		d := time.Since(start)
		if err != nil {
			return err
		}
		fmt.Println(int64(d))
	}
	return in.Err()
}

// rssKiB is this process's resident set size, from /proc/self/status.
func rssKiB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kib, _ := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kib
		}
	}
	return 0
}
