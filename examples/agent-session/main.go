// Agent-session plays the part of an agent building a small Python project
// over several turns in one sandbox session: it writes code from the host,
// runs it and sees it fail, fixes it, runs the tests, takes a snapshot,
// breaks the workspace on purpose, restores the snapshot, and finally resets
// the workspace to its initial content. Every turn is a fresh, isolated run;
// only /workspace carries over.
//
// It needs python3 on the host (the sandbox sees the host's /usr).
//
//	go run ./examples/agent-session
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agent-session:", err)
		os.Exit(1)
	}
}

func run() error {
	// BestEffortLimits so the example also runs where no writable
	// cgroup exists; WorkspaceSize caps the session's files over all turns.
	// PYTHONDONTWRITEBYTECODE: a fix made within the second of the
	// previous run, keeping the file's size, would otherwise meet
	// Python's cached bytecode of the old file and not show.
	sb := sandbox.New(sandbox.Options{
		Limits:    sandbox.Limits{Policy: sandbox.BestEffortLimits},
		Workspace: sandbox.SessionWorkspace{Size: 32 << 20},
		Env:       []string{"PYTHONDONTWRITEBYTECODE=1"},
	})
	defer sb.Close() // removes the workspace and its snapshots

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	turn := 0
	shell := func(what, script string) (*sandbox.Result, error) {
		turn++
		res, err := sb.Run(ctx, sandbox.Command("sh", "-c", script))
		if err != nil {
			return nil, err // the sandbox could not run the turn
		}
		// A failed test, a crash or a turn past ctx's deadline (Outcome
		// Timeout) is what the agent reads next, not an error.
		how := "ok"
		if err := res.Err(); err != nil {
			how = err.Error()
		}
		fmt.Printf("\n== turn %d: %s\n$ %s\n%s%s-> %s\n", turn, what, script, res.Stdout, res.Stderr, how)
		return res, nil
	}

	// Turn 1: the agent writes its first attempt from the host.
	if err := sb.WriteFile("calc.py", []byte("def add(a, b):\n    return a - b\n"), 0o644); err != nil {
		return err
	}
	if err := sb.WriteFile("test_calc.py", []byte(testCalc), 0o644); err != nil {
		return err
	}
	res, err := shell("run the tests", "python3 test_calc.py")
	if errors.Is(err, sandbox.ErrNotFound) {
		fmt.Println("python3 is not installed on this host; this example needs it")
		return nil
	}
	if err != nil {
		return err
	}
	if res.Success() {
		return errors.New("the broken code passed its test")
	}

	// Turn 2: it reads the failure and fixes the code, inside the sandbox.
	if _, err := shell("fix the bug", "sed -i 's/a - b/a + b/' calc.py && cat calc.py"); err != nil {
		return err
	}
	// Turn 3: a fresh run sees the fixed file; nothing else carried over.
	if res, err = shell("run the tests again", "python3 test_calc.py && ls /tmp | wc -l"); err != nil {
		return err
	}
	if !res.Success() {
		return errors.New("the fixed code failed its test")
	}

	snap, err := sb.Snapshot()
	if err != nil {
		return err
	}
	fmt.Println("\n== snapshot taken")

	// Turn 4: something goes badly wrong.
	if _, err := shell("break everything", "rm -f *.py && echo oops > calc.py && ls"); err != nil {
		return err
	}
	if err := sb.Restore(snap); err != nil {
		return err
	}
	fmt.Println("\n== snapshot restored")
	if res, err = shell("the tests pass again", "python3 test_calc.py"); err != nil {
		return err
	}
	if !res.Success() {
		return errors.New("the restored code failed its test")
	}

	// The host fetches the project as a tar stream.
	var tarball strings.Builder
	if err := sb.WriteTar(&tarball, "."); err != nil {
		return err
	}
	entries, err := sb.ReadDir(".")
	if err != nil {
		return err
	}
	fmt.Printf("\n== the host fetched the workspace: %d bytes of tar;", tarball.Len())
	for _, e := range entries {
		fmt.Printf(" %s (%d bytes)", e.Name, e.Size)
	}
	fmt.Println()

	if err := sb.Reset(); err != nil {
		return err
	}
	entries, err = sb.ReadDir(".")
	if err != nil {
		return err
	}
	fmt.Printf("\n== reset: the workspace holds %d entries again\n", len(entries))
	return nil
}

const testCalc = `from calc import add
assert add(2, 3) == 5, "add(2, 3) = %d, want 5" % add(2, 3)
print("ok: add(2, 3) == 5")
`
