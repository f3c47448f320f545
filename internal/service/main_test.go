package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

// The tests run the real server: TestMain builds it, each test starts its
// own on a loopback port and talks HTTP to it, and stops it with SIGTERM.

var (
	binary      string // the sandbox binary, built by TestMain; "binary serve" is the server
	raceEnabled bool   // set by race_test.go; the server is then built with -race too
	// noSandbox says why this host cannot run sandboxes, if it cannot.
	noSandbox string
	// noCgroup says why this user has no writable cgroup, if it has not:
	// servers then run with -best-effort, and tests that need a limit
	// enforced by a cgroup skip.
	noCgroup string
)

// wait bounds every wait of the tests, so that a broken server fails a
// test instead of hanging it. It is not a measure of anything.
const wait = 2 * time.Minute

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	report, err := sandbox.Probe()
	switch {
	case err != nil:
		noSandbox = "sandbox.Probe: " + err.Error()
	case !report.CanRun():
		noSandbox = "this host cannot run sandboxes:\n" + report.String()
	default:
		if l, _ := report.Layer("cgroup"); !l.Available {
			noCgroup = l.Detail
		}
	}
	dir, err := os.MkdirTemp("", "service-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary = os.Getenv("SANDBOX_BIN"); binary != "" {
		// Built beforehand, as make test-rootless does for a user
		// that should not need the go command.
		return m.Run()
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "the tests build the server with the go command:", err)
		return 1
	}
	binary = filepath.Join(dir, "sandbox")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command(gotool, append(args, "../../cmd/sandbox")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build the sandbox binary:", err)
		return 1
	}
	return m.Run()
}

// testServer is a "sandbox serve" process started by a test.
type testServer struct {
	cmd *exec.Cmd
	url string
	eof chan struct{} // closed when its stderr ends

	mu   sync.Mutex
	logs []map[string]any // its log events, one per line of stderr

	stopMu  sync.Mutex
	stopped bool
	exit    error

	// key, if not empty, is the API key its helpers' requests carry
	// where they need one (metrics).
	key string
}

// startServer starts a "sandbox serve" with flags, on a loopback port, and stops
// it at the end of the test, failing the test unless it exits 0.
func startServer(t *testing.T, flags ...string) *testServer {
	t.Helper()
	return startServerVia(t, nil, flags...)
}

// startServerVia is startServer with the server's command line given to
// the command via, which execs it (nil: none).
func startServerVia(t *testing.T, via []string, flags ...string) *testServer {
	t.Helper()
	if noSandbox != "" {
		t.Skip(noSandbox)
	}
	args := append([]string{"-addr", "127.0.0.1:0", "-log-format", "json"}, flags...)
	if noCgroup != "" {
		args = append(args, "-best-effort")
	}
	argv := append(append(via[:len(via):len(via)], binary, "serve"), args...)
	ts := &testServer{cmd: exec.Command(argv[0], argv[1:]...), eof: make(chan struct{})}
	stderr, err := ts.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(ts.eof)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				ev = map[string]any{"msg": "not JSON", "line": sc.Text()}
			}
			ts.mu.Lock()
			ts.logs = append(ts.logs, ev)
			ts.mu.Unlock()
			if a, ok := ev["addr"].(string); ok && ev["msg"] == "listening" {
				addr <- a
			}
		}
	}()
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("server: %v; its log:\n%s", err, ts.logText())
		}
	})
	select {
	case a := <-addr:
		ts.url = "http://" + a
	case <-ts.eof:
		t.Fatalf("the server exited before listening; its log:\n%s", ts.logText())
	case <-time.After(wait):
		t.Fatalf("the server did not say where it listens; its log:\n%s", ts.logText())
	}
	return ts
}

// stop sends SIGTERM and waits for the server to exit. It returns an error
// unless it exited 0.
func (ts *testServer) stop() error {
	ts.stopMu.Lock()
	defer ts.stopMu.Unlock()
	if ts.stopped {
		return ts.exit
	}
	ts.stopped = true
	ts.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ts.eof:
	case <-time.After(wait):
		ts.cmd.Process.Kill()
		<-ts.eof
	}
	ts.exit = ts.cmd.Wait()
	if ts.exit != nil {
		ts.exit = fmt.Errorf("after SIGTERM: %w", ts.exit)
	}
	return ts.exit
}

func (ts *testServer) logText() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var b strings.Builder
	for _, ev := range ts.logs {
		j, _ := json.Marshal(ev)
		b.Write(append(j, '\n'))
	}
	return b.String()
}

// events returns the log events with message msg.
func (ts *testServer) events(msg string) []map[string]any {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var evs []map[string]any
	for _, ev := range ts.logs {
		if ev["msg"] == msg {
			evs = append(evs, ev)
		}
	}
	return evs
}

// answer is what the server answers about a run, or its refusal; the test
// reads it with its own type, so that a renamed field fails it.
type answer struct {
	ID              string `json:"id"`
	Error           string `json:"error"`
	Field           string `json:"field"`
	Cause           string `json:"cause"`
	Outcome         string `json:"outcome"`
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	OOMKills        int    `json:"oom_kills"`
	Pooled          bool   `json:"pooled"`
	Limits          []struct {
		Name     string `json:"name"`
		Enforced bool   `json:"enforced"`
		By       string `json:"by"`
	} `json:"limits"`
	Denials []struct {
		Syscall string `json:"syscall"`
		Errno   string `json:"errno"`
		Count   int    `json:"count"`
	} `json:"denials"`
	Violation string `json:"violation"`

	status int // the HTTP status, set by postAsync
}

// post sends body to /v1/runs as JSON and returns the response with its
// body read, decoded into an answer.
func (ts *testServer) post(t *testing.T, body string) (*http.Response, *answer) {
	t.Helper()
	return ts.do(t, http.MethodPost, "application/json", body)
}

func (ts *testServer) do(t *testing.T, method, contentType, body string) (*http.Response, *answer) {
	t.Helper()
	resp, a, err := ts.send(method, contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, a
}

// postAsync posts body from a goroutine of its own; the answer comes on
// the channel, and a failure fails the test when it is read.
func (ts *testServer) postAsync(t *testing.T, body string) <-chan *answer {
	ch := make(chan *answer, 1)
	go func() {
		resp, a, err := ts.send(http.MethodPost, "application/json", body)
		if err != nil {
			t.Error(err)
			a = &answer{}
		} else {
			a.status = resp.StatusCode
		}
		ch <- a
	}()
	return ch
}

// send is do without the test: it returns what went wrong.
func (ts *testServer) send(method, contentType, body string) (*http.Response, *answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.url+"/v1/runs", strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %.200s: %w", method, body, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %.200s: reading the answer: %w", method, body, err)
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, nil, fmt.Errorf("%s %.200s: %s: answer is not JSON: %w\n%s", method, body, resp.Status, err, b)
	}
	if id := resp.Header.Get("X-Run-Id"); id == "" || id != a.ID {
		return nil, nil, fmt.Errorf("%s %.200s: X-Run-Id %q, answer's id %q; want the same, not empty", method, body, id, a.ID)
	}
	return resp, &a, nil
}

// run posts body and wants 200 and a run's answer.
func (ts *testServer) run(t *testing.T, body string) *answer {
	t.Helper()
	resp, a := ts.post(t, body)
	if resp.StatusCode != http.StatusOK || a.Outcome == "" {
		t.Fatalf("POST %.200s: %s %+v, want 200 and a result", body, resp.Status, a)
	}
	return a
}

// streamLine is one line of a streamed answer.
type streamLine struct {
	Stream string  `json:"stream"`
	Data   string  `json:"data"`
	Result *answer `json:"result"`
}

// stream is a streamed answer being read.
type stream struct {
	resp *http.Response
	dec  *json.Decoder
}

// stream posts body asking for a stream with the Accept header, and
// returns it once its header arrived. Canceling ctx ends the request.
func (ts *testServer) stream(t *testing.T, ctx context.Context, body string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/runs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", body, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s, want 200 application/x-ndjson\n%s", body, resp.Status, resp.Header.Get("Content-Type"), b)
	}
	return &stream{resp: resp, dec: json.NewDecoder(resp.Body)}
}

// next reads the stream's next line.
func (s *stream) next(t *testing.T) streamLine {
	t.Helper()
	var l streamLine
	if err := s.dec.Decode(&l); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return l
}

// rest reads the stream to its end: the data of each stream and the result.
func (s *stream) rest(t *testing.T) (stdout, stderr string, res *answer) {
	t.Helper()
	var out, errOut bytes.Buffer
	for res == nil {
		l := s.next(t)
		switch {
		case l.Result != nil:
			res = l.Result
		case l.Stream == "stdout":
			out.WriteString(l.Data)
		case l.Stream == "stderr":
			errOut.WriteString(l.Data)
		default:
			t.Fatalf("stream line %+v: neither output nor result", l)
		}
	}
	if err := s.dec.Decode(new(json.RawMessage)); err != io.EOF {
		t.Errorf("after the result: %v, want the end of the stream", err)
	}
	return out.String(), errOut.String(), res
}

// metrics reads /metrics: each series, as written ("name{labels}"), with
// its value.
func (ts *testServer) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest("GET", ts.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %s %s, want 200 text/plain; version=0.0.4", resp.Status, ct)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics: line %q: want a series and a value", line)
		}
		m[line[:i]] = v
	}
	return m
}

// waitMetric waits until the series has the value.
func (ts *testServer) waitMetric(t *testing.T, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got, ok := ts.metrics(t)[series]
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics: %s is %v (present: %t), want %v", series, got, ok, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
