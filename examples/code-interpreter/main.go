// Code-interpreter keeps a Python interpreter alive across calls, as an
// agent's code-interpreter tool does. A small kernel (kernel.py, embedded
// in this program) runs in a live sandbox (Options.Live), started once
// with Sandbox.Start. The host sends it cells on its stdin and reads one
// reply line per cell from its stdout. It shows that a variable set in one
// cell is read in the next, that a file a cell writes in /workspace is
// fetched by the host, that a cell's exception is reported and the kernel
// lives on, that a runaway cell is seen in Processes and interrupted with
// SIGINT, and that Close ends the kernel.
//
// It needs python3 on the host (the sandbox sees the host's /usr).
//
//	go run ./examples/code-interpreter
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "code-interpreter:", err)
		os.Exit(1)
	}
}

// run plays the session, printing what happens to w.
func run(w io.Writer) error {
	// Live: one sandbox for all the calls, whose processes outlive the
	// call that started them, until Close. BestEffortLimits so the
	// example also runs where no writable cgroup exists; where one does,
	// its limits bound everything alive in the sandbox together.
	sb := sandbox.New(sandbox.Options{
		Live:      &sandbox.Live{},
		Limits:    sandbox.Limits{Policy: sandbox.BestEffortLimits},
		Workspace: sandbox.SessionWorkspace{Size: 16 << 20},
	})
	defer sb.Close()

	// ctx bounds the kernel's whole life: were the host to hang, the
	// deadline would end the kernel.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := startKernel(ctx, sb)
	if errors.Is(err, sandbox.ErrNotFound) {
		fmt.Fprintf(w, "python3 is not installed on this host; this example needs it (%v)\n", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("start the kernel: %w", err)
	}
	defer k.release()
	fmt.Fprintf(w, "== the kernel runs in the live sandbox as pid %d\n", k.proc.Pid())

	n := 0
	show := func(code string, r reply) {
		n++
		fmt.Fprintf(w, "\n[%d] %s\n", n, strings.ReplaceAll(code, "\n", "\n    "))
		if r.Output != "" {
			fmt.Fprint(w, indent("--> ", r.Output))
		}
		if r.Error != "" {
			fmt.Fprint(w, indent("!!! ", r.Error))
		}
	}
	// cell runs code in the kernel and prints it with its reply. The
	// reply, a failed cell's included, is what an agent reads next; an
	// error is for a kernel that could not answer.
	cell := func(code string) (reply, error) {
		r, err := k.run(ctx, code)
		if err != nil {
			return r, err
		}
		show(code, r)
		return r, nil
	}

	// A variable set in one cell...
	if _, err := cell("x = 6 * 7\nprint('x is', x)"); err != nil {
		return err
	}
	// ... is there in the next: the same interpreter runs both.
	r, err := cell("print('x is still', x)")
	if err != nil {
		return err
	}
	if r.Output != "x is still 42\n" {
		return fmt.Errorf("the second cell did not see the first one's x: %q %s", r.Output, r.Error)
	}

	// A cell writes a file into /workspace; the host fetches it.
	if _, err := cell("with open('/workspace/squares.csv', 'w') as f:\n" +
		"    f.writelines(f'{i},{i * i}\\n' for i in range(x // 10))\n" +
		"print('wrote squares.csv')"); err != nil {
		return err
	}
	data, err := sb.ReadFile("squares.csv")
	if err != nil {
		return fmt.Errorf("fetch squares.csv: %w", err)
	}
	fmt.Fprintf(w, "== the host fetched squares.csv with ReadFile: %q\n", data)

	// An exception is the cell's reply; the kernel lives on.
	if r, err = cell("1 / 0"); err != nil {
		return err
	}
	if !strings.Contains(r.Error, "ZeroDivisionError") {
		return fmt.Errorf("1 / 0 did not report ZeroDivisionError: %q", r.Error)
	}
	if r, err = cell("print('still alive, x =', x)"); err != nil {
		return err
	}
	if r.Output != "still alive, x = 42\n" {
		return fmt.Errorf("the kernel did not live on after the exception: %q %s", r.Output, r.Error)
	}

	// A cell that never ends: Processes shows the kernel busy, and the
	// host interrupts it as a notebook's stop button does.
	runaway := "n = 0\nwhile True:\n    n += 1"
	if err := k.send(runaway); err != nil {
		return err
	}
	busy, err := waitBusy(ctx, sb, k.proc.Pid())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== Processes shows the kernel busy on the runaway cell: pid %d %s, %s, CPU %s, RSS %.1f MiB\n",
		busy.Pid, commandLine(busy.Args), busy.State, busy.CPU.Round(time.Millisecond), float64(busy.RSS)/(1<<20))
	fmt.Fprintln(w, "== the host interrupts it with SIGINT")
	if err := k.interrupt(); err != nil {
		return fmt.Errorf("interrupt the kernel: %w", err)
	}
	if r, err = k.wait(ctx); err != nil {
		return err
	}
	show(runaway, r)
	if !strings.Contains(r.Error, "KeyboardInterrupt") {
		return fmt.Errorf("the interrupted cell did not report KeyboardInterrupt: %q", r.Error)
	}
	if r, err = cell("assert n > 0\nprint(f'the loop got to n = {n:,} before the interrupt')"); err != nil {
		return err
	}
	if r.Error != "" {
		return fmt.Errorf("the kernel did not live on after the interrupt: %s", r.Error)
	}

	// Close ends the live sandbox and the kernel with it.
	if err := sb.Close(); err != nil {
		return err
	}
	res, err := k.proc.Wait()
	if err != nil {
		return fmt.Errorf("the kernel's end: %w", err)
	}
	fmt.Fprintf(w, "\n== Close ended the kernel: %s", res.Outcome)
	if res.Signal != 0 {
		fmt.Fprintf(w, " by %s", unix.SignalName(res.Signal))
	}
	fmt.Fprintln(w)
	if _, err := sb.Processes(ctx); !errors.Is(err, sandbox.ErrClosed) {
		return fmt.Errorf("the sandbox still lists processes after Close: %v, want ErrClosed", err)
	}
	return nil
}

// waitBusy waits until the process pid in sb has used 200ms of CPU time
// more than when it first looked, and returns what Processes says of it
// then. Reading and compiling a cell takes far less: the kernel is then
// in the cell's loop, where SIGINT is the cell's KeyboardInterrupt.
func waitBusy(ctx context.Context, sb *sandbox.Sandbox, pid int) (sandbox.ProcessInfo, error) {
	var start time.Duration = -1
	for {
		procs, err := sb.Processes(ctx)
		if err != nil {
			return sandbox.ProcessInfo{}, fmt.Errorf("list the processes: %w", err)
		}
		i := slices.IndexFunc(procs, func(p sandbox.ProcessInfo) bool { return p.Pid == pid })
		if i < 0 {
			return sandbox.ProcessInfo{}, fmt.Errorf("the kernel (pid %d) is not among the sandbox's processes: %+v", pid, procs)
		}
		switch cpu := procs[i].CPU; {
		case start < 0:
			start = cpu
		case cpu-start >= 200*time.Millisecond:
			return procs[i], nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return sandbox.ProcessInfo{}, fmt.Errorf("waiting for the runaway cell to run: %w", ctx.Err())
		}
	}
}

// commandLine is args as a shell would show them, with the kernel's
// source, which python3 -c gets whole, shortened.
func commandLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == kernelSource {
			a = "<kernel.py>"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// indent prefixes every line of text with prefix.
func indent(prefix, text string) string {
	text = strings.TrimSuffix(text, "\n")
	return prefix + strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", len(prefix))) + "\n"
}
