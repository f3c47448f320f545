// Quickstart runs two small programs in sandboxes and prints how each ended
// and which resource limits it ran under: a shell that says hello from the
// sandbox's hostname and shows who it runs as, and a Python one-liner. If
// the host has no /usr/bin/python3, it says so and skips that part.
//
// It starts with the default Options, which limit each run's memory, CPU
// and processes with a cgroup and refuse to run where no writable cgroup
// exists (an unprivileged user without a delegated cgroup, or a cgroup v1
// host). Then it prints the library's explanation once and carries on with
// LimitPolicy BestEffortLimits, which lets rlimits stand in.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/fumehood/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	// The zero Options are the safe default: no network, a read-only root
	// with the host's /usr, /bin and /lib*, tmpfs /tmp and /workspace, and
	// a cgroup per run limiting memory, CPU and processes.
	opts := sandbox.Options{}
	sb := sandbox.New(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sh := func() *sandbox.Cmd { return sandbox.Command("sh", "-c", "echo hello from $(hostname); id") }
	res, err := sb.Run(ctx, sh())
	if errors.Is(err, sandbox.ErrNotSupported) {
		// The error says what is missing and, in its hint, how to
		// enable it. Say it once, then run without the cgroup.
		fmt.Printf("-- the default Options cannot run here:\n   %v\n", err)
		fmt.Println("-- retrying with Limits.Policy: sandbox.BestEffortLimits: rlimits stand in for the cgroup" +
			" where they can, and each Result's Limits says what was enforced and how")
		opts.Limits.Policy = sandbox.BestEffortLimits
		sb = sandbox.New(opts)
		res, err = sb.Run(ctx, sh())
	}
	// err is for a sandbox that could not run. However the program ended
	// (an exit status, a signal, out of memory, or ctx's deadline as
	// Outcome Timeout) is in res, with what it printed.
	if err != nil {
		return fmt.Errorf("run sh: %w", err)
	}
	show("sh", res)

	code := `import sys, platform; print("python", platform.python_version())`
	res, err = sb.Run(ctx, sandbox.Command("python3", "-c", code))
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		// The sandbox sees the host's /usr: python3 must be installed there.
		fmt.Println("python3 is not installed on this host (no /usr/bin/python3); skipping the Python example")
		return nil
	case err != nil:
		return fmt.Errorf("run python3: %w", err)
	}
	show("python3", res)
	return nil
}

// show prints how a run ended, what it printed and the limits it ran under.
func show(name string, res *sandbox.Result) {
	fmt.Printf("== %s: outcome %s, exit code %d, wall time %s, CPU time %s\n",
		name, res.Outcome, res.ExitCode, res.WallTime.Round(100*time.Microsecond), res.CPUTime.Round(100*time.Microsecond))
	fmt.Printf("%s", res.Stdout)
	if len(res.Stderr) > 0 {
		fmt.Printf("stderr:\n%s", res.Stderr)
	}
	for _, l := range res.Limits {
		fmt.Printf("   limit %-6s %-18s enforced=%-5t by: %s\n", l.Name, l.Value, l.Enforced, l.By)
	}
}
