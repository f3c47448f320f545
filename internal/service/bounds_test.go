package service

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

// peakRSS reads the server's peak resident set since resetPeak, in bytes.
func (ts *testServer) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ts.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// resetPeak starts the server's peak resident set again from its current
// one (clear_refs 5), so that peakRSS measures what comes after.
func (ts *testServer) resetPeak(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", ts.cmd.Process.Pid), []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the server's peak RSS (/proc/pid/clear_refs): %v", err)
	}
}

// TestAnswerMemoryBounded: an answer whose output JSON escapes six bytes
// for one (control bytes) costs the server no more than one whose output
// needs no escaping: the output it keeps (OutputLimit a stream), not the
// escaped text of it. Each kind is measured twice, interleaved, and the
// least growth of each is compared: on a host busy with other work the
// collector falls behind by tens of MiB either way, which the comparison
// cancels; escaping the answer whole cost about 150 MiB more.
func TestAnswerMemoryBounded(t *testing.T) {
	const limit = 4 << 20
	ts := startServer(t, "-max-concurrent", "1", "-max-output", fmt.Sprint(limit))
	ts.run(t, `{"command":["true"]}`) // the server's own start-up heap
	growth := func(out, errOut byte) int64 {
		body := fmt.Sprintf(`{"command":["sh","-c","head -c %d /dev/zero | tr '\\0' '\\%o'; head -c %d /dev/zero | tr '\\0' '\\%o' >&2"],"limits":{"output":%d}}`, limit, out, limit, errOut, limit)
		ts.resetPeak(t)
		base := ts.peakRSS(t)
		a := ts.run(t, body)
		if !a.success() || a.Stdout != strings.Repeat(string(rune(out)), limit) || a.Stderr != strings.Repeat(string(rune(errOut)), limit) {
			t.Fatalf("the answer: %d bytes of stdout, %d of stderr, %+v; want %d of each", len(a.Stdout), len(a.Stderr), a.short(), limit)
		}
		return ts.peakRSS(t) - base
	}
	plain, escaped := int64(math.MaxInt64), int64(math.MaxInt64)
	for range 2 {
		plain = min(plain, growth('a', 'b'))
		escaped = min(escaped, growth(1, 2))
	}
	t.Logf("the server's peak RSS grew by %d KiB answering %d KiB of letters in each stream, %d KiB answering control bytes",
		plain>>10, limit>>10, escaped>>10)
	if bound := plain + 4*limit; escaped > bound {
		t.Errorf("answering control bytes grew the server's peak RSS by %d KiB, letters by %d KiB: escaping costs more than %d KiB of its own", escaped>>10, plain>>10, 4*limit>>10)
	}
}

// TestAnswerTextAsJSON: writing the output a chunk at a time gives the
// bytes encoding/json gives for the whole, characters and bytes that are
// not UTF-8 across the chunks' edges included.
func TestAnswerTextAsJSON(t *testing.T) {
	pieces := []string{"a", "é", "€", "😀", "\x01", "\"", "\\", "<", "\xff", "\xe2\x82", "\u2028", "\n"}
	for seed := range 50 {
		var b strings.Builder
		for i := 0; b.Len() < 3*answerChunk+seed; i++ {
			b.WriteString(pieces[(i*7+seed*13+i/5)%len(pieces)])
		}
		text := b.String()
		var got strings.Builder
		if err := writeJSONText(&got, []byte(text)); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(text)
		if w := want.String(); got.String() != w[1:len(w)-2] {
			t.Fatalf("seed %d: writeJSONText differs from encoding/json", seed)
		}
	}
}

// TestCommandLineTooLong: a command line longer than the library takes
// is the client's mistake, 400 naming the request field and the bound,
// and so is a variable longer than execve takes.
func TestCommandLineTooLong(t *testing.T) {
	ts := startServer(t)
	arg := strings.Repeat("a", 100<<10)
	cases := []struct{ body, field, says string }{
		{`{"command":["sh","-c","true","` + arg + `","` + arg + `","` + arg + `"]}`, "command", fmt.Sprint(sandbox.MaxCommandLine)},
		{`{"command":["true"],"env":{"A":"` + arg + `","B":"` + arg + `","C":"` + arg + `"}}`, "env", fmt.Sprint(sandbox.MaxCommandLine)},
		{`{"command":["true"],"env":{"A":"` + arg + arg + `"}}`, "env", fmt.Sprint(sandbox.MaxArgString)},
	}
	for _, c := range cases {
		resp, a := ts.post(t, c.body)
		if resp.StatusCode != http.StatusBadRequest || a.Field != c.field || !strings.Contains(a.Error, c.says) {
			t.Errorf("POST %.80s...: %s field %q error %q, want 400 naming %s and saying %s", c.body, resp.Status, a.Field, a.Error, c.field, c.says)
		}
	}
	// Just within the bound runs.
	if a := ts.run(t, `{"command":["sh","-c","echo $(($#+${#1}+${#2}))","sh","`+arg+`","`+arg+`"]}`); !a.success() || a.Stdout != fmt.Sprintln(2+2*len(arg)) {
		t.Errorf("a command line of 200 KiB: %+v, want it run whole", a.short())
	}
}

// TestBodiesReadBounded: the server reads the bodies of at most as many
// requests at once as could run and wait; one beyond them is refused with
// 429 before its body is read, and a slow body holds nothing else.
func TestBodiesReadBounded(t *testing.T) {
	ts := startServer(t, "-max-concurrent", "1", "-max-queue", "0")
	body := `{"command":["echo","slow"]}`
	// slow starts a request whose body stops after 5 bytes.
	slow := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:5])
		return conn, bufio.NewReader(conn)
	}
	conn, br := slow()
	defer func() { conn.Close() }()

	// The slow body holds the one place; another request is turned away
	// once the server has begun to read it. (One that comes first takes
	// the place itself, and the slow one is refused: then it starts again.)
	refused := false
	for deadline := time.Now().Add(10 * time.Second); !refused && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, a := ts.post(t, `{"command":["echo","fast"]}`)
		refused = resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" && a.Error != ""
		if !refused && resp.StatusCode != http.StatusOK {
			t.Fatalf("while a body is read: %s %+v, want 429 or 200", resp.Status, a)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := br.Peek(1); err == nil {
			conn.Close()
			conn, br = slow()
		}
		conn.SetReadDeadline(time.Time{})
	}
	if !refused {
		t.Fatal("while another request's body was being read, a request beyond -max-concurrent 1 -max-queue 0 was read and run, not refused with 429")
	}
	// The slow request, finished, runs.
	io.WriteString(conn, body[5:])
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"stdout":"slow\n"`) {
		t.Errorf("the slow request: %s %s, want it run", resp.Status, b)
	}
	if a := ts.run(t, `{"command":["echo","after"]}`); a.Stdout != "after\n" {
		t.Errorf("after the slow request: %+v", a.short())
	}
}

// TestSlowStreamClient: a client that asks for a stream and never reads
// it holds its slot until the run's timeout plus writeGrace, no longer,
// and the server buffers none of the output it could not send: its peak
// RSS grows by a small part of what the program wrote.
func TestSlowStreamClient(t *testing.T) {
	const flood = 64 << 20
	ts := startServer(t, "-max-concurrent", "1", "-max-output", "64M")
	ts.run(t, `{"command":["true"]}`)
	ts.resetPeak(t)
	base := ts.peakRSS(t)

	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"command":["sh","-c","head -c %d /dev/zero | tr '\\0' a"],"stream":true,"limits":{"timeout":"1s","output":"64M"}}`, flood)
	fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	ts.waitMetric(t, "sandbox_serve_runs_in_flight", 1)
	// The slot comes back once the answer's writes have timed out
	// (waitMetric fails the test if it never does).
	start := time.Now()
	ts.waitMetric(t, "sandbox_serve_runs_in_flight", 0)
	t.Logf("the slot was released %v after the run began; its timeout is 1s, writeGrace %v", time.Since(start).Round(100*time.Millisecond), writeGrace)
	if a := ts.run(t, `{"command":["echo","next"]}`); a.Stdout != "next\n" {
		t.Errorf("the next request: %+v", a.short())
	}
	grew := ts.peakRSS(t) - base
	t.Logf("the server's peak RSS grew by %d KiB while a client did not read a stream of %d KiB", grew>>10, flood>>10)
	if bound := int64(16 << 20); grew > bound {
		t.Errorf("the server's peak RSS grew by %d KiB while a client did not read its stream, more than %d KiB", grew>>10, bound>>10)
	}
}

// TestTarUploadDeclaredSize: a tar of a few KiB holding one sparse file
// of 100 GiB of holes, in the format the server's own GET .../tar
// writes, is refused with 413 naming the file, and leaves nothing of it
// in the workspace; the session goes on working.
func TestTarUploadDeclaredSize(t *testing.T) {
	const huge = 100 << 30
	dir := t.TempDir()
	// A host Workspace the sandbox's uid can reach, to tar it.
	for d, mode := range map[string]os.FileMode{filepath.Dir(dir): 0o711, dir: 0o777} {
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte{1}, huge-1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Skipf("cannot make a sparse file of 100 GiB in %s to tar: %v", dir, err)
	}
	src := sandbox.New(sandbox.Options{Workspace: sandbox.HostWorkspace{Dir: dir}})
	var tarball bytes.Buffer
	err = src.WriteTar(&tarball, ".")
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t)
	id := ts.newSession(t, `{}`)
	base := "/v1/sessions/" + id
	r := ts.call(t, "PUT", base+"/tar?path=up", tarball.Bytes())
	var refused struct{ Error, Field string }
	r.json(t, &refused)
	t.Logf("PUT %d bytes of tar declaring a file of %d bytes: %v", tarball.Len(), int64(huge), r)
	if r.status != http.StatusRequestEntityTooLarge || refused.Field != "body" ||
		!strings.Contains(refused.Error, "huge") || !strings.Contains(refused.Error, strconv.FormatInt(huge, 10)) {
		t.Errorf("PUT a tar declaring a file of 100 GiB: %v, want 413 naming the file and its size", r)
	}
	if a := ts.runIn(t, id, `{"command":["sh","-c","ls -A; du -sk ."]}`); !a.success() || strings.Contains(a.Stdout, "up") || !strings.HasPrefix(a.Stdout, "0\t") {
		t.Errorf("the workspace after the refused tar, from inside: %+v", a.short())
	}
}
