// Mcp-client is a Go agent that uses "sandbox mcp" as its tool server,
// through the Model Context Protocol's Go SDK, as an agent framework
// would. It builds the CLI (or takes a built one with -sandbox), starts
// "sandbox mcp --live --audit FILE" over stdio with the SDK's
// CommandTransport, and makes the calls a model would: it lists the
// tools, writes a Python program into the workspace and runs it, sees a
// failing run come back as a tool error that says what happened, starts a
// process in the background, finds it in the process list and ends it
// with a signal, takes a snapshot, deletes a file and restores it. Then it
// closes the session, which ends the server, and sums up the audit trail
// the server wrote: a start and an end for every run it was asked for.
//
// It needs python3 on the host (the sandbox sees the host's /usr), and,
// without -sandbox, the go command to build the CLI with.
//
//	go run ./examples/mcp-client
//	go run ./examples/mcp-client -sandbox /usr/local/bin/sandbox
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

var sandboxPath = flag.String("sandbox", "", "the sandbox CLI to serve the tools; empty builds it from this module with the go command")

// program is what the agent writes into the workspace: the primes up to
// its argument.
const program = `import sys

def primes(n):
    return [p for p in range(2, n + 1) if all(p % d for d in range(2, int(p ** 0.5) + 1))]

if __name__ == "__main__":
    print(*primes(int(sys.argv[1])))
`

// ticker is the background process: it writes how long it has run to a
// file, until a signal ends it.
const ticker = `import time
n = 0
while True:
    n += 1
    with open("ticks.txt", "w") as f:
        f.write(f"{n}\n")
    time.sleep(0.1)
`

func main() {
	flag.Parse()
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-client:", err)
		os.Exit(1)
	}
}

// run plays the agent's session, printing what happens to w.
func run(w io.Writer) error {
	dir, err := os.MkdirTemp("", "mcp-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := *sandboxPath
	if bin == "" {
		if bin, err = build(dir); err != nil {
			return err
		}
	}
	trail := filepath.Join(dir, "audit.jsonl")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// --live: the session is one running sandbox, so the background
	// process outlives the call that starts it. --best-effort so the
	// example also runs where no writable cgroup exists. The server logs
	// to its stderr, kept to show should something fail; its stdout is
	// the protocol's.
	args := []string{"mcp", "--live", "--best-effort", "--audit", trail}
	server := exec.Command(bin, args...)
	serverLog := &lockedBuffer{}
	server.Stderr = serverLog
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-client-example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: server}, nil)
	if err != nil {
		return fmt.Errorf("start %s %s: %w\n%s", bin, strings.Join(args, " "), err, serverLog.String())
	}
	// Closing the session closes the server's stdin, which ends it and
	// the sandbox; on an early return too, so nothing is left running.
	defer cs.Close()
	initRes := cs.InitializeResult()
	fmt.Fprintf(w, "== started sandbox %s over stdio: server %q version %s, protocol %s\n",
		strings.Join(args, " "), initRes.ServerInfo.Name, initRes.ServerInfo.Version, initRes.ProtocolVersion)

	a := &agent{w: w, ctx: ctx, cs: cs}
	if err := a.session(); err != nil {
		return fmt.Errorf("%w\nthe server's log:\n%s", err, serverLog.String())
	}

	// The end of the session: the server sees its stdin close, closes the
	// session's sandbox, flushes the audit trail and exits.
	if err := cs.Close(); err != nil {
		return fmt.Errorf("close the session: %w\nthe server's log:\n%s", err, serverLog.String())
	}
	fmt.Fprintf(w, "\n== closed the session: the server ended (%s), and its sandbox with it\n", server.ProcessState)

	return summarize(w, trail, a.runs)
}

// build builds the CLI into dir with the go command, from the module this
// example is in (the current directory must be inside it, as it is for go
// run and go test).
func build(dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build the sandbox CLI with (give -sandbox PATH): %w", err)
	}
	bin := filepath.Join(dir, "sandbox")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/fumehood/sandbox/cmd/sandbox")
	// Without cgo the CLI links no libc, as the README builds it.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the sandbox CLI (run from the module, or give -sandbox PATH): %w\n%s", err, out)
	}
	return bin, nil
}

// agent makes the tool calls and prints them.
type agent struct {
	w    io.Writer
	ctx  context.Context
	cs   *mcp.ClientSession
	runs []string // the calls that ran a program: run, run_code, start_process
}

// call calls a tool. A tool error is returned as the result, with IsError
// set, for the agent to read as a model would; the error is for a call
// that could not be made at all.
func (a *agent) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	switch name {
	case "run", "run_code", "start_process":
		a.runs = append(a.runs, name)
	}
	res, err := a.cs.CallTool(a.ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", name, err)
	}
	return res, nil
}

// mustCall calls a tool that must succeed, prints its text under what,
// and decodes its structured content into out, if not nil.
func (a *agent) mustCall(what, name string, args map[string]any, out any) error {
	res, err := a.call(name, args)
	if err != nil {
		return err
	}
	if what != "" {
		a.show(what, res)
	}
	if res.IsError {
		return fmt.Errorf("call %s: tool error: %s", name, text(res))
	}
	if out == nil {
		return nil
	}
	return decode(res, out)
}

// decode decodes a result's structured content into out. The SDK's
// client hands it over as it came off the wire, a map.
func decode(res *mcp.CallToolResult, out any) error {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// show prints a call's result's text, indented.
func (a *agent) show(what string, res *mcp.CallToolResult) {
	how := ""
	if res.IsError {
		how = " (a tool error)"
	}
	fmt.Fprintf(a.w, "\n== %s%s\n", what, how)
	for line := range strings.Lines(text(res)) {
		fmt.Fprintf(a.w, "   %s\n", strings.TrimSuffix(line, "\n"))
	}
}

// text is the text content of a tool's result, what a model reads.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// The parts of the tools' structured results the agent reads.
type (
	runResult struct {
		Stdout string `json:"stdout"`
	}
	fileResult struct {
		Content string `json:"content"`
	}
	startResult struct {
		Pid int `json:"pid"`
	}
	processesResult struct {
		Processes  []processInfo    `json:"processes"`
		Background []backgroundInfo `json:"background"`
	}
	processInfo struct {
		Pid  int      `json:"pid"`
		Args []string `json:"args"`
	}
	backgroundInfo struct {
		Pid     int  `json:"pid"`
		Running bool `json:"running"`
		Result  *struct {
			Signal syscall.Signal `json:"signal"` // its number
		} `json:"result"`
	}
)

// session makes the calls of the agent's session.
func (a *agent) session() error {
	tools, err := a.cs.ListTools(a.ctx, nil)
	if err != nil {
		return fmt.Errorf("list the tools: %w", err)
	}
	fmt.Fprintf(a.w, "\n== tools/list: %d tools\n", len(tools.Tools))
	for _, t := range tools.Tools {
		desc, _, _ := strings.Cut(t.Description, ". ")
		fmt.Fprintf(a.w, "   %-15s %s\n", t.Name, desc)
	}

	// A program in the workspace, run by one call and imported by the
	// next: the calls share the session's /workspace.
	if err := a.mustCall("write_file primes.py", "write_file", map[string]any{"path": "primes.py", "content": program}, nil); err != nil {
		return err
	}
	var out runResult
	if err := a.mustCall("run python3 primes.py 50", "run", map[string]any{"argv": []string{"python3", "primes.py", "50"}}, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.w, "== stdout, from the structured result: %s", out.Stdout)
	if err := a.mustCall("run_code python: import primes; print(sum(primes.primes(1000)))", "run_code",
		map[string]any{"language": "python", "code": "import primes; print(sum(primes.primes(1000)))"}, &out); err != nil {
		return err
	}
	fmt.Fprintf(a.w, "== stdout, from the structured result: %s", out.Stdout)

	// A failing run is a result too, a tool error whose text says how
	// it ended and what it printed: the model reads it and tries again.
	res, err := a.call("run", map[string]any{"argv": []string{"python3", "primes.py", "fifty"}})
	if err != nil {
		return err
	}
	a.show("run python3 primes.py fifty", res)
	if !res.IsError {
		return errors.New("a run that fails came back as no tool error")
	}

	if err := a.background(); err != nil {
		return err
	}

	// A snapshot brings back what a later call deleted.
	if err := a.mustCall("snapshot before-delete", "snapshot", map[string]any{"name": "before-delete"}, nil); err != nil {
		return err
	}
	if err := a.mustCall("delete_file primes.py", "delete_file", map[string]any{"path": "primes.py"}, nil); err != nil {
		return err
	}
	if res, err = a.call("read_file", map[string]any{"path": "primes.py"}); err != nil {
		return err
	}
	a.show("read_file primes.py", res)
	if !res.IsError {
		return errors.New("read_file found primes.py after delete_file")
	}
	if err := a.mustCall("restore before-delete", "restore", map[string]any{"snapshot": "before-delete"}, nil); err != nil {
		return err
	}
	var file fileResult
	if err := a.mustCall("", "read_file", map[string]any{"path": "primes.py"}, &file); err != nil {
		return err
	}
	if file.Content != program {
		return fmt.Errorf("primes.py after restore: %q, want the program written", file.Content)
	}
	fmt.Fprintf(a.w, "\n== read_file primes.py after the restore: the %d bytes written are back\n", len(file.Content))
	return nil
}

// background starts the ticker with start_process, finds it in
// list_processes at work, and ends it with signal_process.
func (a *agent) background() error {
	var start startResult
	if err := a.mustCall("write_file ticker.py", "write_file",
		map[string]any{"path": "ticker.py", "content": ticker}, nil); err != nil {
		return err
	}
	if err := a.mustCall("start_process python3 ticker.py", "start_process", map[string]any{"argv": []string{"python3", "ticker.py"}}, &start); err != nil {
		return err
	}

	// The call returned while the ticker runs on: list_processes shows
	// it, and the count it writes goes up between calls.
	var ps processesResult
	if err := a.mustCall("list_processes", "list_processes", nil, &ps); err != nil {
		return err
	}
	if !slices.ContainsFunc(ps.Processes, func(p processInfo) bool { return p.Pid == start.Pid }) {
		return fmt.Errorf("list_processes does not show pid %d: %+v", start.Pid, ps)
	}
	first, err := a.waitTicks(1)
	if err != nil {
		return err
	}
	later, err := a.waitTicks(first + 3)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.w, "== read_file ticks.txt: %d, and in a later call %d: the ticker works between calls\n", first, later)

	if err := a.mustCall(fmt.Sprintf("signal_process %d TERM", start.Pid), "signal_process", map[string]any{"pid": start.Pid, "signal": "TERM"}, nil); err != nil {
		return err
	}
	// The signal is sent; the process ends a moment later.
	for {
		if err := a.mustCall("", "list_processes", nil, &ps); err != nil {
			return err
		}
		// One answer lists the processes, then the background ones: a
		// process that ended between the two is in both.
		listed := slices.ContainsFunc(ps.Processes, func(p processInfo) bool { return p.Pid == start.Pid })
		if i := slices.IndexFunc(ps.Background, func(b backgroundInfo) bool { return b.Pid == start.Pid }); i >= 0 && !listed && !ps.Background[i].Running && ps.Background[i].Result != nil {
			fmt.Fprintf(a.w, "\n== list_processes: pid %d ended by %s; %d processes left in the sandbox\n", start.Pid, unix.SignalName(ps.Background[i].Result.Signal), len(ps.Processes))
			return nil
		}
		select {
		case <-a.ctx.Done():
			return fmt.Errorf("pid %d still runs after SIGTERM: %w", start.Pid, a.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitTicks reads ticks.txt until the ticker has counted to n at least,
// and returns its count. Before the ticker's first write, or while it
// rewrites the file, there is no count to read.
func (a *agent) waitTicks(n int) (int, error) {
	for {
		res, err := a.call("read_file", map[string]any{"path": "ticks.txt"})
		if err != nil {
			return 0, err
		}
		var file fileResult
		if !res.IsError && decode(res, &file) == nil {
			var got int
			if _, err := fmt.Sscan(file.Content, &got); err == nil && got >= n {
				return got, nil
			}
		}
		select {
		case <-a.ctx.Done():
			return 0, fmt.Errorf("the ticker never counted to %d in ticks.txt: %w", n, a.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// summarize prints how many events of each kind the audit trail holds
// and the runs it records, and checks that it has a start and an end for
// each call that ran a program. The file tools and snapshots run no
// program in the sandbox, and a live session lists no changed files, so
// those calls leave no event.
func summarize(w io.Writer, trail string, calls []string) error {
	f, err := os.Open(trail)
	if err != nil {
		return err
	}
	defer f.Close()
	type run struct {
		argv     []string
		outcome  string
		exitCode int
		signal   string
		ended    bool
	}
	var (
		counts    = map[string]int{}
		sandboxes = map[string]bool{}
		runs      = map[int]*run{}
		order     []int
		total     int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Msg      string   `json:"msg"`
			Sandbox  string   `json:"sandbox"`
			Run      int      `json:"run"`
			Argv     []string `json:"argv"`
			Outcome  string   `json:"outcome"`
			ExitCode int      `json:"exit_code"`
			Signal   string   `json:"signal"`
		}
		total++
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("%s: line %d: %w", trail, total, err)
		}
		counts[ev.Msg]++
		sandboxes[ev.Sandbox] = true
		switch ev.Msg {
		case "run start":
			runs[ev.Run] = &run{argv: ev.Argv}
			order = append(order, ev.Run)
		case "run end":
			if r := runs[ev.Run]; r != nil {
				r.outcome, r.exitCode, r.signal, r.ended = ev.Outcome, ev.ExitCode, ev.Signal, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== the audit trail the server wrote (%s): %d events, all of sandbox %s\n",
		filepath.Base(trail), total, strings.Join(slices.Sorted(maps.Keys(sandboxes)), ", "))
	for _, msg := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "   %-12s %d\n", msg, counts[msg])
	}
	if len(sandboxes) != 1 {
		return fmt.Errorf("the trail's events name %d sandboxes, want the session's one", len(sandboxes))
	}
	fmt.Fprintf(w, "== its runs, one for each call that ran a program:\n")
	for i, id := range order {
		r := runs[id]
		how := fmt.Sprintf("%s %d", r.outcome, r.exitCode)
		if r.signal != "" {
			how = fmt.Sprintf("%s (%s)", r.outcome, r.signal)
		}
		if !r.ended {
			how = "no run end"
		}
		call := "?"
		if i < len(calls) {
			call = calls[i]
		}
		fmt.Fprintf(w, "   %-13s %s -> %s\n", call, strings.Join(r.argv, " "), how)
		if !r.ended {
			return fmt.Errorf("run %d has a run start and no run end", id)
		}
	}
	if len(order) != len(calls) {
		return fmt.Errorf("the audit trail has %d runs, want %d, one for each call that ran a program", len(order), len(calls))
	}
	return nil
}

// lockedBuffer is a buffer for the server's stderr, which exec copies to
// it from a goroutine of its own while the example may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
