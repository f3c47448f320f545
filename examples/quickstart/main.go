// Quickstart runs two small programs in sandboxes and prints how each ended:
// a shell that says hello from the sandbox's hostname and shows who it runs
// as, and a Python one-liner. If the host has no /usr/bin/python3, it says
// so and skips that part.
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
	// with the host's /usr, /bin and /lib*, tmpfs /tmp and /workspace.
	sb := sandbox.New(sandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := sb.Run(ctx, sandbox.Command("sh", "-c", "echo hello from $(hostname); id"))
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

// show prints how a run ended and what it printed.
func show(name string, res *sandbox.Result) {
	fmt.Printf("== %s: outcome %s, exit code %d, wall time %s\n",
		name, res.Outcome, res.ExitCode, res.WallTime.Round(100*time.Microsecond))
	fmt.Printf("%s", res.Stdout)
	if len(res.Stderr) > 0 {
		fmt.Printf("stderr:\n%s", res.Stderr)
	}
}
