package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools every session offers, and those only a live one does.
var (
	mcpTools     = []string{"delete_file", "list_files", "read_file", "reset", "restore", "run", "run_code", "snapshot", "write_file"}
	mcpLiveTools = []string{"list_processes", "signal_process", "start_process"}
)

// syncBuffer is a bytes.Buffer safe for a process's stderr and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// mcpArgs are the arguments of "sandbox mcp" with extra, plus
// --best-effort where this user cannot make cgroups: the tests are not
// about limits.
func mcpArgs(extra ...string) []string {
	args := append([]string{"mcp"}, extra...)
	if !canCreateCgroups() {
		args = append(args, "--best-effort")
	}
	return args
}

// connectStdio starts "sandbox mcp" with args through the SDK's
// CommandTransport and returns the client session, the server's stderr
// and its process.
func connectStdio(t *testing.T, bin string, args ...string) (*mcp.ClientSession, *syncBuffer, *exec.Cmd) {
	t.Helper()
	stderr := &syncBuffer{}
	cmd := exec.Command(bin, mcpArgs(args...)...)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %s %q: %v\nstderr:\n%s", bin, args, err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr, cmd
}

// startHTTP starts "sandbox mcp --http 127.0.0.1:0" with args and returns
// its URL and process, which the test's end kills.
func startHTTP(t *testing.T, bin string, args ...string) (string, *syncBuffer, *exec.Cmd) {
	t.Helper()
	stderr := &syncBuffer{}
	cmd := exec.Command(bin, mcpArgs(append([]string{"--http", "127.0.0.1:0"}, args...)...)...)
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		pw.Close()
	})
	urlRE := regexp.MustCompile(`url=(https?://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case u := <-found:
		return u, stderr, cmd
	case <-time.After(time.Minute):
		t.Fatalf("sandbox mcp --http did not say where it listens; stderr:\n%s", stderr)
	}
	return "", nil, nil
}

// connectHTTP opens a session with the server at url.
func connectHTTP(t *testing.T, url string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// call calls a tool; a protocol error fails the test, a tool error does not.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: protocol error %v", name, args, err)
	}
	return res
}

// callOK calls a tool that must succeed and decodes its structured content
// into out, if not nil.
func callOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("call %s %v: tool error: %s", name, args, textOf(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("call %s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// callErr calls a tool that must fail with a message containing want.
func callErr(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Errorf("call %s %v: no error, want one saying %q; got %s", name, args, want, textOf(res))
	} else if !strings.Contains(textOf(res), want) {
		t.Errorf("call %s %v: error %q, want it to say %q", name, args, textOf(res), want)
	}
	return res
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// toolNames lists the session's tools, sorted.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tool.Name)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// exerciseTools calls every tool of a session that is not live and checks
// what each did from inside the sandbox, through the other tools.
func exerciseTools(t *testing.T, cs *mcp.ClientSession) {
	if got := toolNames(t, cs); !slices.Equal(got, mcpTools) {
		t.Errorf("tools %q, want %q", got, mcpTools)
	}

	// A file written by one tool is read by another and by a program.
	callOK(t, cs, "write_file", map[string]any{"path": "src/hello.txt", "content": "hello, sandbox\n"}, nil)
	var file fileOutput
	callOK(t, cs, "read_file", map[string]any{"path": "src/hello.txt"}, &file)
	if file.Content != "hello, sandbox\n" || file.Encoding != "utf-8" || file.Size != 15 {
		t.Errorf("read_file: %+v, want the content written", file)
	}
	var run runOutput
	res := callOK(t, cs, "run", map[string]any{"argv": []string{"cat", "/workspace/src/hello.txt"}}, &run)
	if string(run.Stdout) != "hello, sandbox\n" || run.Outcome != sandbox.Exited || run.ExitCode != 0 || !run.ChangesTracked || len(run.Changes) != 0 {
		t.Errorf("run cat: %+v, want the file's content and no change", run)
	}
	if !strings.Contains(textOf(res), "exited with code 0") || !strings.Contains(textOf(res), "hello, sandbox") {
		t.Errorf("run cat: text %q, want how it ended and its output", textOf(res))
	}

	// A program's changes are listed, and another tool sees them.
	callOK(t, cs, "run", map[string]any{"shell": "echo made > made.txt && chmod +x made.txt && rm src/hello.txt"}, &run)
	want := []sandbox.Change{{Path: "made.txt", Kind: sandbox.ChangeAdded, Size: 5, Mode: 0o755}, {Path: "src/hello.txt", Kind: sandbox.ChangeDeleted, Size: 15, Mode: 0o644}}
	if !slices.Equal(run.Changes, want) {
		t.Errorf("run's changes %+v, want %+v", run.Changes, want)
	}
	var list listOutput
	callOK(t, cs, "list_files", nil, &list)
	if len(list.Entries) != 2 || list.Entries[0].Name != "made.txt" || list.Entries[0].Mode != "0755" || list.Entries[1].Name != "src" || list.Entries[1].Type != "dir" {
		t.Errorf("list_files: %+v, want made.txt (0755) and src/", list.Entries)
	}

	// Binary content goes both ways as base64.
	callOK(t, cs, "write_file", map[string]any{"path": "bin.dat", "content": "AP+A", "encoding": "base64"}, nil)
	callOK(t, cs, "run", map[string]any{"shell": "od -An -tx1 bin.dat"}, &run)
	if strings.TrimSpace(string(run.Stdout)) != "00 ff 80" {
		t.Errorf("od of a file written as base64 AP+A: %q, want 00 ff 80", run.Stdout)
	}
	callOK(t, cs, "read_file", map[string]any{"path": "bin.dat"}, &file)
	if file.Content != "AP+A" || file.Encoding != "base64" {
		t.Errorf("read_file of bytes: %+v, want base64 AP+A", file)
	}

	// A snapshot restored brings a deleted file back; reset empties.
	var snap snapshotOutput
	callOK(t, cs, "snapshot", map[string]any{"name": "before"}, &snap)
	if snap.Snapshot != "before" {
		t.Errorf("snapshot: %+v, want the name given", snap)
	}
	callOK(t, cs, "delete_file", map[string]any{"path": "made.txt"}, nil)
	callErr(t, cs, "read_file", map[string]any{"path": "made.txt"}, "no such file")
	callOK(t, cs, "restore", map[string]any{"snapshot": "before"}, nil)
	callOK(t, cs, "read_file", map[string]any{"path": "made.txt"}, &file)
	if file.Content != "made\n" {
		t.Errorf("read_file after restore: %+v, want made.txt back", file)
	}
	callOK(t, cs, "reset", nil, nil)
	callOK(t, cs, "run", map[string]any{"shell": "ls -A /workspace | wc -l"}, &run)
	if strings.TrimSpace(string(run.Stdout)) != "0" {
		t.Errorf("files in /workspace after reset: %s, want 0", run.Stdout)
	}
	callErr(t, cs, "restore", map[string]any{"snapshot": "nope"}, `no snapshot "nope": this session has "before"`)

	// Code in each language; stdin reaches it.
	for lang, code := range map[string]string{
		"python": "import sys; print(int(sys.stdin.read()) * 6)",
		"node":   "let s = ''; process.stdin.on('data', d => s += d).on('end', () => console.log(Number(s) * 6))",
		"shell":  "read n; echo $((n * 6))",
	} {
		callOK(t, cs, "run_code", map[string]any{"language": lang, "code": code, "stdin": "7\n"}, &run)
		if string(run.Stdout) != "42\n" {
			t.Errorf("run_code %s: stdout %q, stderr %q; want 42", lang, run.Stdout, run.Stderr)
		}
	}

	// Failures are tool errors that say what happened.
	res = callErr(t, cs, "run", map[string]any{"shell": "echo oops >&2; exit 3"}, "exited with code 3")
	if !strings.Contains(textOf(res), "oops") {
		t.Errorf("failed run's text %q, want its stderr", textOf(res))
	}
	callErr(t, cs, "run", map[string]any{"argv": []string{"sleep", "10"}, "timeout_seconds": 0.3}, "killed after its 300ms timeout")
	callErr(t, cs, "run", map[string]any{"argv": []string{"no-such-program"}}, "no-such-program: not found in the sandbox")
	callErr(t, cs, "run", map[string]any{}, "no command: give argv")
	callErr(t, cs, "run", map[string]any{"argv": []string{"true"}, "shell": "true"}, "give argv or shell, not both")
	callErr(t, cs, "run", map[string]any{"shell": "true", "timeout_seconds": 1e6}, "more than the 600 this server allows")
	callErr(t, cs, "run_code", map[string]any{"language": "cobol", "code": "x"}, "language")
	callErr(t, cs, "read_file", map[string]any{"path": "../../etc/passwd"}, "may not leave it")
	callErr(t, cs, "write_file", map[string]any{"path": "/etc/motd", "content": "x"}, "may not leave it")
	callErr(t, cs, "delete_file", map[string]any{"path": "/workspace"}, "may not leave it")
	callErr(t, cs, "write_file", map[string]any{"path": "x", "content": "!", "encoding": "base64"}, "not base64")
	// The live tools are not offered: calling one is the protocol's
	// unknown tool.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_processes"}); err == nil || !strings.Contains(err.Error(), `unknown tool "list_processes"`) {
		t.Errorf("list_processes on a session that is not live: %v, want unknown tool", err)
	}
}

// TestMCPGoClient drives "sandbox mcp" with the Go SDK's client, over
// stdio and over streamable HTTP, through every tool.
func TestMCPGoClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	requireNode(t)
	bin := cliBinary(t)
	t.Run("stdio", func(t *testing.T) {
		cs, stderr, _ := connectStdio(t, bin)
		exerciseTools(t, cs)
		if t.Failed() {
			t.Logf("server's stderr:\n%s", stderr)
		}
	})
	t.Run("http", func(t *testing.T) {
		url, stderr, _ := startHTTP(t, bin)
		cs, err := connectHTTP(t, url)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
		}
		exerciseTools(t, cs)
		if t.Failed() {
			t.Logf("server's stderr:\n%s", stderr)
		}
	})
}

// TestMCPStdoutIsProtocol checks that nothing but JSON-RPC messages reaches
// the stdout of "sandbox mcp", whatever a program in the sandbox writes,
// and that the server ends when its stdin does.
func TestMCPStdoutIsProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	cmd := exec.Command(bin, mcpArgs()...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var raw syncBuffer
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(io.TeeReader(stdout, &raw)), Writer: stdin}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	call(t, cs, "run", map[string]any{"shell": "echo to-stdout; echo to-stderr >&2; printf 'no newline'"})
	call(t, cs, "run", map[string]any{"argv": []string{"no-such-program"}})
	stdin.Close() // the client goes: the server must end
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sandbox mcp at the end of stdin: %v, want exit status 0; stderr:\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("sandbox mcp still runs 30 s after its stdin ended; stderr:\n%s", stderr)
	}
	cs.Close()
	lines := strings.Split(strings.TrimSuffix(raw.String(), "\n"), "\n")
	if len(lines) < 4 {
		t.Errorf("stdout had %d lines, want the answers to initialize, two calls and more:\n%s", len(lines), raw.String())
	}
	for _, line := range lines {
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Errorf("stdout line %q is not a JSON-RPC message", line)
		}
	}
	if !strings.Contains(stderr.String(), "serving on stdio") {
		t.Errorf("stderr %q, want the server's log", stderr)
	}
}

// TestMCPLive checks the tools of a live session: a background process
// started by one call runs on, appears in the process list, and dies when
// signalled; and that closing the session, over stdio and over HTTP,
// leaves none of the session's processes behind.
func TestMCPLive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)

	t.Run("stdio", func(t *testing.T) {
		cs, stderr, cmd := connectStdio(t, bin, "--live")
		exerciseLive(t, cs, "3607")
		made := descendants(cmd.Process.Pid)
		if len(made) < 3 {
			t.Errorf("the server has %d processes beneath it during a live session, want its spawner, keeper, the sandbox's init and more: %v", len(made), made)
		}
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if left := waitGone(made); len(left) > 0 {
			t.Errorf("processes of the closed session still run: %v", left)
		}
		if t.Failed() {
			t.Logf("server's stderr:\n%s", stderr)
		}
	})

	t.Run("http", func(t *testing.T) {
		url, stderr, cmd := startHTTP(t, bin, "--live")
		before := descendants(cmd.Process.Pid) // the spawner, started by the self-test
		cs, err := connectHTTP(t, url)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
		}
		exerciseLive(t, cs, "3608")
		during := descendants(cmd.Process.Pid)
		if err := cs.Close(); err != nil { // DELETE: the session ends
			t.Errorf("close: %v", err)
		}
		for pid := range before {
			delete(during, pid)
		}
		if len(during) < 2 {
			t.Errorf("the session made %d processes beneath the server, want its keeper, the sandbox's init and more: %v", len(during), during)
		}
		if left := waitGone(during); len(left) > 0 {
			t.Errorf("processes of the deleted session still run: %v", left)
		}
		if t.Failed() {
			t.Logf("server's stderr:\n%s", stderr)
		}
	})
}

// exerciseLive calls the tools of a live session; marker is a number of
// seconds to sleep that no other process on the host has in its argv.
func exerciseLive(t *testing.T, cs *mcp.ClientSession, marker string) {
	t.Helper()
	if got, want := toolNames(t, cs), slices.Sorted(slices.Values(append(slices.Clone(mcpTools), mcpLiveTools...))); !slices.Equal(got, want) {
		t.Errorf("live tools %q, want %q", got, want)
	}
	var start startOutput
	callOK(t, cs, "start_process", map[string]any{"shell": "echo started; exec sleep " + marker}, &start)
	if start.Pid <= 1 {
		t.Fatalf("start_process: pid %d", start.Pid)
	}
	// A process a run leaves in the background lives on too.
	var run runOutput
	callOK(t, cs, "run", map[string]any{"shell": "sleep " + marker + ".5 >/dev/null 2>&1 & echo $!"}, &run)
	bgPid, _ := strconv.Atoi(strings.TrimSpace(string(run.Stdout)))
	if run.ChangesTracked {
		t.Errorf("run on a live session says changes are tracked")
	}

	var ps processesOutput
	waitList := func(cond func(processesOutput) bool) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			callOK(t, cs, "list_processes", nil, &ps)
			if cond(ps) {
				return true
			}
		}
		return false
	}
	hasPid := func(ps processesOutput, pid int, arg string) bool {
		return slices.ContainsFunc(ps.Processes, func(p processInfo) bool { return p.Pid == pid && slices.Contains(p.Args, arg) })
	}
	if !waitList(func(ps processesOutput) bool {
		return hasPid(ps, start.Pid, marker) && hasPid(ps, bgPid, marker+".5") &&
			len(ps.Background) == 1 && ps.Background[0].Stdout == "started\n" && ps.Background[0].Running
	}) {
		t.Errorf("list_processes: %+v, want pid %d (sleep %s) with its output and pid %d (sleep %s.5)", ps, start.Pid, marker, bgPid, marker)
	}
	if n := len(hostProcessesWith("sleep\x00" + marker + "\x00")); n != 1 {
		t.Errorf("%d processes on the host run sleep %s, want 1", n, marker)
	}

	var sig signalOutput
	callOK(t, cs, "signal_process", map[string]any{"pid": start.Pid}, &sig)
	if sig.Signal != "SIGTERM" {
		t.Errorf("signal_process: %+v, want SIGTERM", sig)
	}
	if !waitList(func(ps processesOutput) bool {
		return !hasPid(ps, start.Pid, marker) && len(ps.Background) == 1 && !ps.Background[0].Running &&
			ps.Background[0].Result != nil && ps.Background[0].Result.Result != nil && ps.Background[0].Result.Signal == syscall.SIGTERM
	}) {
		t.Errorf("list_processes after SIGTERM: %+v, want pid %d gone, ended by SIGTERM", ps, start.Pid)
	}
	callErr(t, cs, "signal_process", map[string]any{"pid": start.Pid, "signal": "KILL"}, "no process")
	callErr(t, cs, "signal_process", map[string]any{"pid": bgPid, "signal": "BOGUS"}, "unknown signal")
}

// hostProcessesWith lists the host's processes whose NUL-separated
// command line contains s.
func hostProcessesWith(s string) []int {
	var pids []int
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", de.Name(), "cmdline")); err == nil && bytes.Contains(append(b, 0), []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStart is a process's start time in clock ticks after boot, which
// tells it from a later process given the same pid.
func procStart(pid int) (string, int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", 0, false
	}
	ppid, _ := strconv.Atoi(fields[1])
	return fields[19], ppid, true
}

// descendants returns the processes beneath pid, with their start times.
func descendants(root int) map[int]string {
	children := map[int][]int{}
	starts := map[int]string{}
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if start, ppid, ok := procStart(pid); ok {
			children[ppid] = append(children[ppid], pid)
			starts[pid] = start
		}
	}
	out := map[int]string{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out[c] = starts[c]
			queue = append(queue, c)
		}
	}
	return out
}

// waitGone waits up to 10 s for the processes to end and returns those
// still alive (the same pid with the same start time).
func waitGone(procs map[int]string) map[int]string {
	left := map[int]string{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		clear(left)
		for pid, start := range procs {
			if s, _, ok := procStart(pid); ok && s == start {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left[pid] = strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " ")
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// TestMCPHTTPSessions checks that the HTTP server bounds its sessions with
// a clear refusal, and that a session idle past --session-timeout is ended
// with its sandbox.
func TestMCPHTTPSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	url, stderr, cmd := startHTTP(t, bin, "--max-sessions", "1", "--session-timeout", "2s", "--live")
	before := descendants(cmd.Process.Pid)

	first, err := connectHTTP(t, url)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	callOK(t, first, "start_process", map[string]any{"argv": []string{"sleep", "3609"}}, nil)
	if _, err := connectHTTP(t, url); err == nil {
		t.Errorf("a second session was opened with --max-sessions 1")
	}
	// What a client beyond the bound is told.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "all 1 sessions are in use (--max-sessions 1)") {
		t.Errorf("a session beyond --max-sessions: %s %s, want 429 saying why", resp.Status, body)
	}

	during := descendants(cmd.Process.Pid)
	for pid := range before {
		delete(during, pid)
	}
	if len(hostProcessesWith("sleep\x003609\x00")) != 1 || len(during) < 3 {
		t.Fatalf("the session's processes beneath the server: %v, want its keeper, init and sleep 3609", during)
	}
	// Idle past --session-timeout, the session ends with everything in it.
	if left := waitGone(during); len(left) > 0 {
		t.Errorf("processes of a session idle past --session-timeout still run: %v", left)
	}
	second, err := connectHTTP(t, url)
	if err != nil {
		t.Fatalf("a new session after the first timed out: %v", err)
	}
	var run runOutput
	callOK(t, second, "run", map[string]any{"argv": []string{"echo", "ok"}}, &run)
	if string(run.Stdout) != "ok\n" {
		t.Errorf("run in the new session: %+v", run)
	}
}

// TestMCPBadFlags checks that a wrong command line is refused at once with
// a message that names the flag, and leaves no process behind.
func TestMCPBadFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:8765"}, "--http 0.0.0.0:8765 listens beyond this machine without authentication"},
		{[]string{"--http", ":8765"}, "-api-keys FILE, -oidc-issuer URL or -client-ca FILE, or, on a network you trust, add -insecure-no-auth"},
		{[]string{"--http", "localhost"}, "want HOST:PORT"},
		{[]string{"--http-allow-remote"}, "flag provided but not defined: -http-allow-remote"},
		{[]string{"--api-keys", "/nonexistent"}, "-insecure-no-auth need --http ADDR"},
		{[]string{"--audit-exec"}, "--audit-exec needs --audit FILE"},
		{[]string{"--audit", "/nonexistent/dir/audit.jsonl"}, "flag --audit: open /nonexistent/dir/audit.jsonl: no such file or directory"},
		{[]string{"--max-sessions", "0"}, "-max-sessions: must be at least 1"},
		{[]string{"--timeout", "5m", "--max-timeout", "1m"}, "must be at least --timeout"},
		{[]string{"--workspace", "/tmp"}, "flag provided but not defined: -workspace"},
		{[]string{"--memory", "12X"}, "-memory"},
		{[]string{"--memory", "1M"}, `--memory "1M": is below the 16777216 bytes`},
		{[]string{"--net", "allow:pypi.org:99999"}, `--net "pypi.org:99999": port 99999 out of range`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		cmd := exec.Command(bin, append([]string{"mcp"}, tc.args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		var made map[int]string
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.After(30 * time.Second)
		for waiting := true; waiting; {
			select {
			case <-done:
				waiting = false
			case <-deadline:
				cmd.Process.Kill()
				t.Errorf("sandbox mcp %q still runs after 30 s, want it refused at once", tc.args)
			case <-time.After(5 * time.Millisecond):
				// What it started, if anything, while it ran.
				maps := descendants(pid)
				if made == nil {
					made = map[int]string{}
				}
				for p, s := range maps {
					made[p] = s
				}
			}
		}
		if code := cmd.ProcessState.ExitCode(); code != exitFailure {
			t.Errorf("sandbox mcp %q: exit status %d, want %d", tc.args, code, exitFailure)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("sandbox mcp %q: stderr %q, want it to say %q", tc.args, stderr.String(), tc.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("sandbox mcp %q wrote %q on stdout, the protocol's", tc.args, stdout.String())
		}
		if left := waitGone(made); len(left) > 0 {
			t.Errorf("sandbox mcp %q left processes behind: %v", tc.args, left)
		}
	}
}

// requireNode skips where the sandbox cannot run node (run_code's node).
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and node is missing: make test installs nodejs and npm as root")
		}
		t.Skip("node is not installed: run_code's node needs it in the sandbox (apt-get install nodejs)")
	}
}

// TestMCPTypeScriptClient drives "sandbox mcp --live" with a client nobody
// here wrote: the TypeScript SDK's (@modelcontextprotocol/sdk, pinned in
// testdata/mcpclient/package-lock.json), installed from the npm registry
// with npm ci, and run by Node over stdio and over streamable HTTP. The
// script (testdata/mcpclient/client.mjs) lists the tools and calls each;
// the SDK checks each structured result against the tool's output schema.
func TestMCPTypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs an npm package and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	dir := installTSClient(t)
	bin := cliBinary(t)
	nodeRun := func(bearer string, args ...string) (stdout, stderr bytes.Buffer, err error) {
		cmd := exec.Command("node", append([]string{filepath.Join(dir, "client.mjs")}, args...)...)
		cmd.Env = append(os.Environ(), "MCP_BEARER="+bearer)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		return stdout, stderr, err
	}
	nodeWith := func(t *testing.T, bearer string, args ...string) tsOutput {
		t.Helper()
		stdout, stderr, err := nodeRun(bearer, args...)
		if err != nil {
			t.Fatalf("node client.mjs %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
		}
		var out tsOutput
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("node client.mjs %q printed %q: %v\nstderr:\n%s", args, stdout.String(), err, stderr.String())
		}
		return out
	}
	node := func(t *testing.T, args ...string) tsOutput {
		t.Helper()
		return nodeWith(t, "", args...)
	}
	t.Run("stdio", func(t *testing.T) {
		checkTSOutput(t, node(t, append([]string{"stdio", bin}, mcpArgs("--live")[1:]...)...))
	})
	t.Run("http", func(t *testing.T) {
		url, stderr, cmd := startHTTP(t, bin, "--live")
		before := descendants(cmd.Process.Pid)
		checkTSOutput(t, node(t, "http", url))
		// The script ended its session: nothing of it is left.
		after := waitGone(func() map[int]string {
			d := descendants(cmd.Process.Pid)
			for pid := range before {
				delete(d, pid)
			}
			return d
		}())
		if len(after) > 0 {
			t.Errorf("processes of the session the TypeScript client ended still run: %v\nstderr:\n%s", after, stderr)
		}
	})
	t.Run("http with an API key", func(t *testing.T) {
		keyFile, keys := apiKeys(t, "alice")
		url, _, _ := startHTTP(t, bin, "--live", "--api-keys", keyFile)
		checkTSOutput(t, nodeWith(t, keys["alice"], "http", url))
		for name, bearer := range map[string]string{"no key": "", "a wrong key": "not-" + keys["alice"]} {
			stdout, stderr, err := nodeRun(bearer, "http", url)
			if err == nil || !strings.Contains(stderr.String(), "401") {
				t.Errorf("the TypeScript client with %s: %v, want it refused with 401\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), stderr.String())
			}
		}
	})
}

// tsOutput is what client.mjs prints.
type tsOutput struct {
	Tools []string `json:"tools"`
	Calls []struct {
		Tool       string          `json:"tool"`
		IsError    bool            `json:"isError"`
		Text       string          `json:"text"`
		Structured json.RawMessage `json:"structured"`
	} `json:"calls"`
}

func checkTSOutput(t *testing.T, out tsOutput) {
	t.Helper()
	if want := slices.Sorted(slices.Values(append(slices.Clone(mcpTools), mcpLiveTools...))); !slices.Equal(out.Tools, want) {
		t.Errorf("tools listed %q, want %q", out.Tools, want)
	}
	called := map[string]bool{}
	for _, c := range out.Calls {
		called[c.Tool] = true
	}
	for _, name := range out.Tools {
		if !called[name] {
			t.Errorf("tool %s was not called", name)
		}
	}
	if len(out.Calls) != 16 {
		t.Fatalf("%d calls, want 16: %+v", len(out.Calls), out.Calls)
	}
	for i, want := range []struct {
		isError bool
		text    string // in the text content
		field   string // in the structured content
	}{
		{false, "wrote notes/a.txt (16 bytes)", `"size":16`},
		{false, "from typescript\n", `"content":"from typescript\n"`},
		{false, "file 0644 16 a.txt", `"name":"a.txt"`},
		{false, "exited with code 0", `"stdout":"from typescript\n"`},
		{true, "exited with code 7", `"stderr":"bad\n"`},
		{false, "45", `"stdout":"45\n"`},
		{false, "snapshot ts taken", `"snapshot":"ts"`},
		{false, "deleted notes/a.txt", `"done"`},
		{false, "restored to snapshot ts", `"done"`},
		{false, "from typescript\n", `"encoding":"utf-8"`},
		{false, "workspace emptied", `"done"`},
		{false, ". is empty", `"entries":[]`},
		{false, "started pid", `"argv":["sleep","3611"]`},
		{false, "sleep 3611", `"running":true`},
		{false, "sent SIGKILL", `"signal":"SIGKILL"`},
		{false, "", `"running":false`},
	} {
		c := out.Calls[i]
		if c.IsError != want.isError || !strings.Contains(c.Text, want.text) || !strings.Contains(string(c.Structured), want.field) {
			t.Errorf("call %d, %s: isError %v, text %q, structured %s; want isError %v, text with %q, structured with %s",
				i, c.Tool, c.IsError, c.Text, c.Structured, want.isError, want.text, want.field)
		}
	}
}

// installTSClient copies testdata/mcpclient to a temporary directory and
// installs its locked dependencies there with npm ci. Without node and npm,
// or without the registry, it skips, but under CI=true, where make test
// installs them, it fails.
func installTSClient(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	for _, prog := range []string{"node", "npm"} {
		if _, err := exec.LookPath(prog); err != nil {
			skip("%s is not installed, and the TypeScript client needs it (make test installs nodejs and npm as root): %v", prog, err)
		}
	}
	if out, err := exec.Command("node", "-e", "process.exit(Number(process.versions.node.split('.')[0]) >= 18 ? 0 : 1)").CombinedOutput(); err != nil {
		skip("node older than 18, which @modelcontextprotocol/sdk needs: %v %s", err, out)
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mcpclient", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		skip("npm ci of the TypeScript MCP SDK failed (is the npm registry reachable?): %v\n%s", err, out)
	}
	return dir
}

// TestMCPHelp checks that "sandbox help mcp" lists every tool the server
// offers, with --live and without, and the flags it shares with run.
func TestMCPHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"help", "mcp"}, streams{stdout: &stdout, stderr: &stderr}); code != 0 {
		t.Fatalf("sandbox help mcp: exit status %d, stderr %q", code, stderr.String())
	}
	help := stdout.String()
	for _, live := range []bool{false, true} {
		args := []string{}
		if live {
			args = append(args, "--live")
		}
		mc, err := parseMCP(args)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := newMCPServer(mc, discardLog, discardLog)
		if err != nil {
			t.Fatal(err)
		}
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.server.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "help-test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := toolNames(t, cs)
		cs.Close()
		ss.Close()
		want := mcpTools
		if live {
			want = slices.Sorted(slices.Values(append(slices.Clone(mcpTools), mcpLiveTools...)))
		}
		if !slices.Equal(names, want) {
			t.Errorf("tools with --live=%v: %q, want %q", live, names, want)
		}
		for _, name := range names {
			if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(help) {
				t.Errorf("sandbox help mcp does not list tool %s:\n%s", name, help)
			}
		}
	}
	for _, name := range append(slices.Clone(mcpRunFlags), "http", "api-keys", "oidc-issuer", "client-ca", "tls-cert", "allow-origin", "allow-host", "insecure-no-auth", "live", "max-sessions", "session-timeout", "timeout", "max-timeout", "output-limit") {
		if !strings.Contains(help, "  --"+name+" ") && !strings.Contains(help, "  --"+name+"\n") {
			t.Errorf("sandbox help mcp does not list --%s", name)
		}
	}
	stdout.Reset()
	cli([]string{"help"}, streams{stdout: &stdout, stderr: &stderr})
	if !strings.Contains(stdout.String(), "sandbox mcp [flags]") || !strings.Contains(stdout.String(), "signal_process") {
		t.Errorf("sandbox help does not tell of sandbox mcp and its tools:\n%s", stdout.String())
	}
}

var discardLog = slog.New(slog.DiscardHandler)

// TestMCPSessionFlags checks what the flags give every session: --env's
// variables, --output-limit's cap, and a run_code whose interpreter the
// sandbox lacks (PATH points nowhere) is an error naming it.
func TestMCPSessionFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	cs, stderr, _ := connectStdio(t, bin, "--env", "GREETING=hello", "--env", "PATH=/nowhere", "--output-limit", "1K")
	var run runOutput
	callOK(t, cs, "run", map[string]any{"argv": []string{"/bin/sh", "-c", "echo $GREETING from $PATH"}}, &run)
	if string(run.Stdout) != "hello from /nowhere\n" {
		t.Errorf("--env: stdout %q, want hello from /nowhere", run.Stdout)
	}
	callErr(t, cs, "run_code", map[string]any{"language": "python", "code": "print(1)"},
		"language python needs python3, which is not installed in the sandbox's root")
	callErr(t, cs, "run_code", map[string]any{"language": "node", "code": "1"}, "language node needs node")

	callOK(t, cs, "run", map[string]any{"argv": []string{"/bin/sh", "-c", "/usr/bin/head -c 5000 /dev/zero | /usr/bin/tr '\\0' x; /usr/bin/head -c 5000 /dev/zero > big"}}, &run)
	if !run.StdoutTruncated || run.StdoutBytes != 5000 || len(run.Stdout) > 1100 || !strings.HasPrefix(string(run.Stdout), "xxx") || !strings.HasSuffix(string(run.Stdout), "xxx") {
		t.Errorf("5000 bytes of output with --output-limit 1K: truncated %v, %d bytes written, %d kept; want 1K kept of 5000",
			run.StdoutTruncated, run.StdoutBytes, len(run.Stdout))
	}
	callErr(t, cs, "read_file", map[string]any{"path": "big"}, "big is 5000 bytes, more than the 1024 this tool returns (--output-limit)")
	if t.Failed() {
		t.Logf("server's stderr:\n%s", stderr)
	}
}

// TestMCPNetwork checks that --net allow reaches a run, and that its result
// lists the connections allowed and refused, in structured content and text.
func TestMCPNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	// On 127.0.0.2: the sandbox's programs reach 127.0.0.1 and localhost
	// directly (NO_PROXY), on the sandbox's own loopback.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	web := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from the host") }))
	web.Listener.Close()
	web.Listener = ln
	web.Start()
	defer web.Close()
	hostPort := strings.TrimPrefix(web.URL, "http://")
	port, _ := strconv.Atoi(hostPort[strings.LastIndexByte(hostPort, ':')+1:])
	cs, stderr, _ := connectStdio(t, bin, "--net", "allow:"+hostPort)
	code := fmt.Sprintf(`import urllib.request as u
print(u.urlopen("%s/x").read().decode())
try: u.urlopen("http://evil.example.net/")
except Exception as e: print(e)`, web.URL)
	var run runOutput
	res := callOK(t, cs, "run_code", map[string]any{"language": "python", "code": code}, &run)
	if string(run.Stdout) != "hello from the host\nHTTP Error 403: Forbidden\n" {
		t.Errorf("stdout %q, stderr %q; want the page and a refusal", run.Stdout, run.Stderr)
	}
	if len(run.Connections) != 2 ||
		!(run.Connections[0].Allowed && run.Connections[0].Host == "127.0.0.2" && run.Connections[0].Port == port && run.Connections[0].Status == 200) ||
		!(!run.Connections[1].Allowed && run.Connections[1].Host == "evil.example.net") {
		t.Errorf("connections %+v, want 127.0.0.2:%d allowed (200) and evil.example.net refused", run.Connections, port)
	}
	if text := textOf(res); !strings.Contains(text, "network: refused GET evil.example.net:80") || !strings.Contains(text, fmt.Sprintf("network: GET 127.0.0.2:%d allowed", port)) {
		t.Errorf("text %q, want both connections", text)
	}
	if t.Failed() {
		t.Logf("server's stderr:\n%s", stderr)
	}
}

// TestMCPRunEndings checks that a run the seccomp policy or the OOM killer
// ended is a tool error that says so.
func TestMCPRunEndings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	cs, stderr, _ := connectStdio(t, bin, "--seccomp-kill", "--memory", "48M")
	var run runOutput
	res := callErr(t, cs, "run_code", map[string]any{"language": "python",
		"code": "import ctypes; ctypes.CDLL(None).unshare(0x10000000); print('not reached')"},
		"killed at syscall unshare, which the sandbox's seccomp policy refuses")
	decode(t, res, &run)
	if run.Outcome != sandbox.SeccompKilled || run.Violation != "unshare" || string(run.Stdout) != "" {
		t.Errorf("seccomp kill: %+v, want outcome seccomp kill at unshare", run)
	}
	if canCreateCgroups() {
		res = callErr(t, cs, "run_code", map[string]any{"language": "python", "code": "b = bytearray(256 << 20); print('not reached')"},
			"killed: out of memory at the sandbox's 48M limit")
		decode(t, res, &run)
		if run.Outcome != sandbox.OutOfMemory {
			t.Errorf("a run past --memory: %+v, want outcome out of memory", run)
		}
	}
	if t.Failed() {
		t.Logf("server's stderr:\n%s", stderr)
	}
}

// decode decodes a result's structured content into out.
func decode(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// TestMCPAudit checks that --audit appends the trail of a session's sandbox
// to the file, one JSON event a line and every one with the session's
// sandbox id, that --audit-exec adds the programs run, and that the
// server's end flushes it (the run end is there once the server is gone).
func TestMCPAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(trail, []byte(`{"msg":"before"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, stderr, _ := connectStdio(t, bin, "--audit", trail, "--audit-exec")
	var run runOutput
	callOK(t, cs, "run", map[string]any{"shell": "/bin/cat /etc/hostname >/dev/null; echo hi > made.txt"}, &run)
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	b, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	ids := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d of the trail is not JSON: %v: %q", i+1, err, line)
		}
		msg, _ := ev["msg"].(string)
		switch msg {
		case "exec":
			// sh is wherever the sandbox's PATH finds it first.
			p := fmt.Sprint(ev["path"])
			if strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/sh") {
				p = "sh"
			}
			msg += " " + p
		case "change":
			msg += " " + fmt.Sprint(ev["change"], " ", ev["path"])
		}
		msgs = append(msgs, msg)
		if i > 0 {
			ids[fmt.Sprint(ev["sandbox"])] = true
		}
	}
	want := []string{"before", "run start", "exec sh", "exec /bin/cat", "change added made.txt", "run end"}
	if !slices.Equal(msgs, want) {
		t.Errorf("the trail's events: %q; want %q", msgs, want)
	}
	if len(ids) != 1 || ids["<nil>"] || ids[""] {
		t.Errorf("the events' sandbox ids: %v; want the session's one", ids)
	}
	if t.Failed() {
		t.Logf("trail:\n%s\nserver's stderr:\n%s", b, stderr)
	}
}
