package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
)

// loopTarget is where the tool's copy is bound inside the sandbox.
const loopTarget = "/opt/bench/table"

// seccompCost runs the getpid loop (getpidLoop) inside sandboxes with the
// default filter, with a filter that allows everything, and with none, in
// turn, one warm-up run of each first, prints the ns per call of each, and
// returns the ratio of the default filter's median to the unfiltered one.
// The allow-all row is what any filter costs: the kernel takes a filtered
// task's syscalls through its slower entry path whatever the filter says
// (and caches the verdict of one that depends only on the syscall number).
func seccompCost(opts sandbox.Options, c config) (float64, error) {
	fmt.Printf("seccomp: a loop of %d getpid calls inside the sandbox, %d runs of each row after 1 of warm-up,\n", c.calls, c.seccompRuns)
	fmt.Println("taken in turn; ns per call as timed inside")
	bind, cleanup, err := loopBinary()
	if err != nil {
		return 0, err
	}
	defer cleanup()
	filtered := opts
	filtered.Binds = []sandbox.Bind{bind}
	allowAll := filtered
	allowAll.Seccomp = &sandbox.SeccompPolicy{Default: sandbox.ActAllow, Unknown: sandbox.ActAllow}
	unfiltered := filtered
	unfiltered.Seccomp = sandbox.Unconfined{}
	rows := []struct {
		name string
		sb   *sandbox.Sandbox
	}{{"default filter", sandbox.New(filtered)}, {"allow-all filter", sandbox.New(allowAll)}, {"no filter", sandbox.New(unfiltered)}}
	none := len(rows) - 1
	samples := make([][]float64, len(rows))
	for iter := range 1 + c.seccompRuns {
		for k := range rows {
			i := (iter + k) % len(rows)
			ns, err2 := loopRun(rows[i].sb, c.calls)
			if err2 != nil {
				err = fmt.Errorf("seccomp, %s: %w", rows[i].name, err2)
				break
			}
			if iter > 0 {
				samples[i] = append(samples[i], ns)
			}
		}
		if err != nil {
			break
		}
	}
	for _, r := range rows {
		if err2 := r.sb.Close(); err == nil && err2 != nil {
			err = fmt.Errorf("seccomp, %s: close: %w", r.name, err2)
		}
	}
	if err != nil {
		return 0, err
	}
	medians := make([]float64, len(rows))
	for i := range rows {
		slices.Sort(samples[i])
		medians[i] = median(samples[i])
	}
	fmt.Printf("  %-16s %8s %8s %8s %12s\n", "row", "median", "min", "max", "median/none")
	for i, r := range rows {
		fmt.Printf("  %-16s %8.1f %8.1f %8.1f %12.2f\n", r.name, medians[i], samples[i][0], samples[i][len(samples[i])-1],
			ratio(medians[i], medians[none]))
	}
	fmt.Println()
	return ratio(medians[0], medians[none]), nil
}

// loopBinary copies this tool's binary into a new directory that the
// sandbox's host uid can read, since the sandbox cannot exec the host's
// /proc/self/exe, and returns the Bind that shows it at loopTarget and a
// function that removes the copy.
func loopBinary() (sandbox.Bind, func(), error) {
	dir, err := os.MkdirTemp("", "bench-table-")
	if err != nil {
		return sandbox.Bind{}, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	path := filepath.Join(dir, "table")
	err = os.Chmod(dir, 0o755)
	if err == nil {
		err = copyExecutable(path)
	}
	if err != nil {
		cleanup()
		return sandbox.Bind{}, nil, fmt.Errorf("copy of the tool for the sandbox: %w", err)
	}
	return sandbox.Bind{Source: path, Target: loopTarget}, cleanup, nil
}

func copyExecutable(dst string) error {
	in, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// loopRun runs the getpid loop in sb and returns its ns per call.
func loopRun(sb *sandbox.Sandbox, calls int) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	res, err := sb.Run(ctx, sandbox.Command(loopTarget, "-getpid", strconv.Itoa(calls)))
	if err != nil {
		return 0, fmt.Errorf("%s -getpid: %w", loopTarget, err)
	}
	if err := res.Err(); err != nil {
		return 0, fmt.Errorf("%s -getpid: %w (stderr: %q)", loopTarget, err, res.Stderr)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(res.Stdout)), 64)
}

// getpidLoop is the tool run inside the sandbox with -getpid N: N getpid
// calls, each a real syscall (Go does not cache the pid), then the time
// per call in ns on stdout.
func getpidLoop(n int) {
	start := time.Now()
	for range n {
		syscall.Getpid()
	}
	fmt.Printf("%.2f\n", float64(time.Since(start).Nanoseconds())/float64(n))
}
