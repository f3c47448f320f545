package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// heapSizes are the callers' heaps: a small service and a large one.
var heapSizes = []struct {
	name  string
	bytes int64
}{{"10 MiB", 10 << 20}, {"1 GiB", 1 << 30}}

// callerHeap times Run from two worker processes holding the heapSizes,
// asked in turn, and prints each one's latency; it returns the ratio of
// the large caller's median to the small one's.
func callerHeap(c config) (float64, error) {
	fmt.Printf("caller heap: Run of /bin/true from a worker process holding touched heap, each with its own\n")
	fmt.Printf("spawner; %d runs of each after %d of warm-up, the workers asked in turn\n", c.n, c.warmup)
	var workers []*worker
	var err error
	for _, s := range heapSizes {
		var w *worker
		if w, err = startWorker(s.bytes); err != nil {
			break
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err == nil {
			err = w.ready()
		}
	}
	samples := make([][]time.Duration, len(workers))
	for iter := range c.warmup + c.n {
		if err != nil {
			break
		}
		for k := range workers {
			i := (iter + k) % len(workers)
			var d time.Duration
			if d, err = workers[i].run(); err != nil {
				err = fmt.Errorf("caller heap, %s worker: %w", heapSizes[i].name, err)
				break
			}
			if iter >= c.warmup {
				samples[i] = append(samples[i], d)
			}
		}
	}
	for _, w := range workers {
		if err2 := w.stop(); err == nil {
			err = err2
		}
	}
	if err != nil {
		return 0, err
	}
	sums := make([]summary, len(workers))
	for i := range workers {
		sums[i] = summarize(samples[i])
	}
	fmt.Printf("  %-8s %8s %10s %10s %13s\n", "caller", "rss MiB", "median ms", "p99 ms", "median/10MiB")
	for i, w := range workers {
		fmt.Printf("  %-8s %8d %10s %10s %13.2f\n", heapSizes[i].name, w.rssKiB>>10, ms(sums[i].median), ms(sums[i].p99),
			ratio(sums[i].median, sums[0].median))
	}
	fmt.Println()
	return ratio(sums[1].median, sums[0].median), nil
}

// worker is a running heap worker (see heapWorker) and its pipes.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	rssKiB int64
}

// startWorker re-executes this tool as a heap worker of size bytes.
func startWorker(size int64) (*worker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	w := &worker{cmd: exec.Command(self, "-heap-worker", strconv.FormatInt(size, 10))}
	w.cmd.Stderr = os.Stderr
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.out = bufio.NewReader(out)
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start heap worker: %w", err)
	}
	return w, nil
}

// ready waits for the worker to have its heap and its spawner.
func (w *worker) ready() error {
	line, err := w.line()
	if err != nil {
		return err
	}
	kib, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		return fmt.Errorf("heap worker said %q, want \"ready RSS\"", line)
	}
	w.rssKiB, err = strconv.ParseInt(kib, 10, 64)
	return err
}

// run asks the worker for one Run and returns its latency.
func (w *worker) run() (time.Duration, error) {
	if _, err := io.WriteString(w.in, "run\n"); err != nil {
		return 0, err
	}
	line, err := w.line()
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(line, 10, 64)
	return time.Duration(ns), err
}

func (w *worker) line() (string, error) {
	line, err := w.out.ReadString('\n')
	if errors.Is(err, io.EOF) {
		return "", fmt.Errorf("heap worker ended early (its error is above)")
	}
	return strings.TrimSuffix(line, "\n"), err
}

// stop ends the worker's input, which makes it close its Sandbox and exit,
// and waits for it.
func (w *worker) stop() error {
	w.in.Close()
	if err := w.cmd.Wait(); err != nil {
		return fmt.Errorf("heap worker: %w", err)
	}
	return nil
}
