package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawClient speaks JSON-RPC to "sandbox mcp" over its stdin and stdout
// with bytes the test writes itself, as a faulty client would.
type rawClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the server's stdout, a line each
	stderr *syncBuffer
	exited chan error
}

// rpcReply is a JSON-RPC response as the server wrote it.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// startRaw starts "sandbox mcp" with args and initializes a session at
// protocol version.
func startRaw(t *testing.T, version string, args ...string) *rawClient {
	t.Helper()
	requireSandbox(t)
	cmd := exec.Command(cliBinary(t), mcpArgs(args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
	})
	init := c.call(1, "initialize", map[string]any{"protocolVersion": version, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw-test", "version": "1"}})
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if init.Error != nil || json.Unmarshal(init.Result, &res) != nil || res.ProtocolVersion != version {
		t.Fatalf("initialize at %s: %+v, want that version", version, init)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// send writes line and its newline to the server's stdin.
func (c *rawClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("write to the server's stdin: %v; stderr:\n%s", err, c.stderr)
	}
}

// next returns the server's next line. A server that ended, or that says
// nothing for a minute, fails the test.
func (c *rawClient) next() string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("the server closed its stdout (exit: %v); stderr:\n%s", <-c.exited, c.stderr)
		}
		return line
	case <-time.After(time.Minute):
		c.t.Fatalf("no line from the server for a minute; stderr:\n%s", c.stderr)
	}
	return ""
}

// nextReply returns the server's next line as a response.
func (c *rawClient) nextReply() rpcReply {
	c.t.Helper()
	line := c.next()
	var r rpcReply
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.JSONRPC != "2.0" {
		c.t.Fatalf("server line %.200q is not a JSON-RPC response: %v", line, err)
	}
	return r
}

// call sends a call with id and returns the next response, which must be
// its answer.
func (c *rawClient) call(id int, method string, params any) rpcReply {
	c.t.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	c.send(string(msg))
	r := c.nextReply()
	if string(r.ID) != fmt.Sprint(id) {
		c.t.Fatalf("after call %d (%s), the server answered id %s: error %+v, result %.300s", id, method, r.ID, r.Error, r.Result)
	}
	return r
}

// tool calls a tool and returns the text of its result, failing the test
// on a protocol or tool error.
func (c *rawClient) tool(id int, name string, args map[string]any) string {
	c.t.Helper()
	r := c.call(id, "tools/call", map[string]any{"name": name, "arguments": args})
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.IsError || len(res.Content) == 0 {
		c.t.Fatalf("%s %v: %+v %s", name, args, r.Error, r.Result)
	}
	return res.Content[0].Text
}

// TestMCPStdioBadInput checks that a line which is not a JSON-RPC message
// the session can take is answered with the JSON-RPC error, and that the
// session, its sandbox and its workspace, goes on: a file written before
// the bad lines is read after them.
func TestMCPStdioBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	c := startRaw(t, "2025-06-18")
	c.tool(2, "write_file", map[string]any{"path": "kept.txt", "content": "written before the bad lines"})

	huge := `{"jsonrpc":"2.0","id":99,"method":"ping","params":{"pad":"` + strings.Repeat("A", maxMCPLine) + `"}}`
	for _, tc := range []struct {
		name, line string
		code       int64
		id         string
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run"`, -32700, "null"},
		{"binary junk", "\x00\x01\xff\xfe\x7fELF\x02\x01", -32700, "null"},
		{"two values on a line", `{"jsonrpc":"2.0","id":4,"method":"ping"} {}`, -32700, "null"},
		{"no jsonrpc member", `{"id":5,"method":"ping"}`, -32600, "5"},
		{"a number for the method", `{"jsonrpc":"2.0","id":"six","method":6}`, -32600, `"six"`},
		{"an object for the id", `{"jsonrpc":"2.0","id":{"n":7},"method":"ping"}`, -32600, "null"},
		{"not an object", `42`, -32600, "null"},
		{"a batch at 2025-06-18", `[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, "null"},
		{"a line beyond the limit", huge, -32600, "null"},
	} {
		c.send(tc.line)
		r := c.nextReply()
		if r.Error == nil || r.Error.Code != tc.code || string(r.ID) != tc.id {
			t.Errorf("%s: answered %s %+v, want error %d with id %s", tc.name, r.ID, r.Error, tc.code, tc.id)
		} else {
			t.Logf("%s: %d %s", tc.name, r.Error.Code, r.Error.Message)
		}
	}
	// A blank line is no message: nothing answers it, and the call after
	// it gets the next answer.
	c.send("")
	c.send("  \r")
	if r := c.call(10, "ping", nil); r.Error != nil {
		t.Errorf("ping after blank lines: %+v", r.Error)
	}
	if got := c.tool(11, "read_file", map[string]any{"path": "kept.txt"}); !strings.Contains(got, "written before the bad lines") {
		t.Errorf("read_file after the bad lines: %q, want the content write_file gave before them", got)
	}
	select {
	case err := <-c.exited:
		t.Fatalf("the server exited (%v); stderr:\n%s", err, c.stderr)
	default:
	}
	if n := strings.Count(c.stderr.String(), "session started"); n != 1 {
		t.Errorf("the server started %d sessions, want 1; stderr:\n%s", n, c.stderr)
	}
}

// TestMCPStdioBatch checks that a session at 2025-03-26, the revision
// that has JSON-RPC batches, gets a batch's answers in one array, and
// that a batch with a message that is none is refused whole, the session
// going on.
func TestMCPStdioBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	c := startRaw(t, "2025-03-26")
	c.send(`[{"jsonrpc":"2.0","id":2,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":{"shell":"echo from-the-batch"}}}]`)
	line := c.next()
	var replies []rpcReply
	if err := json.Unmarshal([]byte(line), &replies); err != nil || len(replies) != 2 {
		t.Fatalf("the batch's answer: %.300q, want an array of two responses", line)
	}
	for _, r := range replies {
		if r.Error != nil || (string(r.ID) != "2" && string(r.ID) != "3") {
			t.Errorf("in the batch's answer: %s %+v", r.ID, r.Error)
		}
		if string(r.ID) == "3" && !bytes.Contains(r.Result, []byte("from-the-batch")) {
			t.Errorf("the batch's run: %s, want its output", r.Result)
		}
	}
	// A notification in a batch gets no answer, and holds up none.
	c.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":8,"method":"ping"}]`)
	if line := c.next(); !strings.HasPrefix(line, `[`) || !strings.Contains(line, `"id":8`) || strings.Count(line, `"jsonrpc"`) != 1 {
		t.Errorf("the answer to a batch of a notification and a ping: %q, want an array of the ping's answer", line)
	}
	c.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
	for _, bad := range []string{
		`[]`,
		`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"id":5}]`,
		`[{"jsonrpc":"2.0","id":6,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`,
	} {
		c.send(bad)
		if r := c.nextReply(); r.Error == nil || r.Error.Code != -32600 || string(r.ID) != "null" {
			t.Errorf("batch %s: answered %s %+v, want error -32600 with id null", bad, r.ID, r.Error)
		}
	}
	if got := c.tool(7, "run", map[string]any{"shell": "echo after"}); !strings.Contains(got, "after") {
		t.Errorf("run after the refused batches: %q", got)
	}
}

// TestMCPStdioCancel checks that a call the client cancels is killed,
// its process gone, and that it gets no answer: the next call's answer is
// the next line.
func TestMCPStdioCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	c := startRaw(t, "2025-06-18")
	const marker = "3617"
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"argv":["sleep","` + marker + `"]}}}`)
	var sleeping map[int]string
	for deadline := time.Now().Add(time.Minute); len(sleeping) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no sleep %s beneath the server a minute after the call; stderr:\n%s", marker, c.stderr)
		}
		for pid, start := range descendants(c.cmd.Process.Pid) {
			for _, p := range hostProcessesWith("sleep\x00" + marker + "\x00") {
				if p == pid {
					sleeping = map[int]string{pid: start}
				}
			}
		}
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the test cancels it"}}`)
	if left := waitGone(sleeping); len(left) > 0 {
		t.Errorf("the cancelled call's process is alive 10 s after the cancellation: %v", left)
	}
	// Answers come in the order the calls end: an answer to the
	// cancelled call would come before these.
	if r := c.call(3, "ping", nil); r.Error != nil {
		t.Errorf("ping after the cancellation: %+v", r.Error)
	}
	if got := c.tool(4, "run", map[string]any{"shell": "echo next"}); !strings.Contains(got, "next") {
		t.Errorf("run after the cancellation: %q", got)
	}
	// The id of a call answered may be used again, and that call is
	// answered: only the cancelled one is not.
	if r := c.call(2, "ping", nil); r.Error != nil {
		t.Errorf("ping with the cancelled call's id: %+v", r.Error)
	}
}

// TestMCPHTTPBadInput checks that over HTTP a body which is not a
// JSON-RPC message the session can take gets 400 with the JSON-RPC error,
// and that the session goes on.
func TestMCPHTTPBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	url, stderr, _ := startHTTP(t, cliBinary(t))
	cs, err := connectHTTP(t, url)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
	}
	callOK(t, cs, "write_file", map[string]any{"path": "kept.txt", "content": "kept over http"}, nil)
	for _, tc := range []struct {
		name, body string
		status     int
		code       int64
		id         string
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":3,"method":"tools/call"`, http.StatusBadRequest, -32700, "null"},
		{"binary junk", "\x00\xff\xfe", http.StatusBadRequest, -32700, "null"},
		{"an empty body", "", http.StatusBadRequest, -32700, "null"},
		{"no jsonrpc member", `{"id":5,"method":"ping"}`, http.StatusBadRequest, -32600, "5"},
		{"a batch", `[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, http.StatusBadRequest, -32600, "null"},
		{"a body beyond the limit", `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("A", maxMCPBody) + `"}}`,
			http.StatusRequestEntityTooLarge, -32600, "null"},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r rpcReply
		if resp.StatusCode != tc.status || json.Unmarshal(body, &r) != nil || r.Error == nil || r.Error.Code != tc.code || string(r.ID) != tc.id {
			t.Errorf("%s: %d %s %.300q, want %d with JSON-RPC error %d and id %s", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, tc.code, tc.id)
		}
	}
	var got struct {
		Content string `json:"content"`
	}
	callOK(t, cs, "read_file", map[string]any{"path": "kept.txt"}, &got)
	if got.Content != "kept over http" {
		t.Errorf("read_file after the bad bodies: %q", got.Content)
	}
}

// FuzzStdioTransport: whatever lines a client sends, the session goes on:
// a ping sent after them is answered.
func FuzzStdioTransport(f *testing.F) {
	initialize := func(version string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
			`","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	}
	for _, s := range []string{
		"", "\n\n", "{", "\x00\xff", `{"id":5,"method":"ping"}`, `[]`, `[1,2]`, `42`, `"x"`, `null`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"} {"jsonrpc":"2.0","id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}`,
		initialize("2025-06-18") + `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		initialize("2025-03-26") + `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		initialize("2025-03-26") + `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}]`,
		initialize("2025-03-26") + `[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]` + "\n" + `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		initialize("2024-11-05") + initialize("2024-11-05"),
	} {
		f.Add([]byte(s))
	}
	const final = `"fuzz-final-ping"`
	f.Fuzz(func(t *testing.T, input []byte) {
		if bytes.Contains(input, []byte(final)) {
			return // an answer to it would not tell of the last ping
		}
		server := mcp.NewServer(&mcp.Implementation{Name: "fuzz", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: statefulVersions})
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- server.Run(ctx, &stdioTransport{in: inR, out: outW})
			outW.Close()
		}()
		defer func() {
			cancel()
			inR.Close()
			outR.Close()
		}()
		go func() {
			inW.Write(input)
			inW.Write([]byte("\n" + `{"jsonrpc":"2.0","id":` + final + `,"method":"ping"}` + "\n"))
		}()
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				t.Fatalf("the server wrote %q, not JSON", sc.Bytes())
			}
			if bytes.Contains(sc.Bytes(), []byte(`"id":`+final)) {
				return
			}
		}
		t.Fatalf("the session ended before it answered a ping after %q: %v", input, <-done)
	})
}
