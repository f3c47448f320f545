//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// auditSink is an audit handler that keeps every record in memory, each
// after delay.
type auditSink struct {
	delay time.Duration
	mu    sync.Mutex
	recs  []auditRec
}

// auditRec is one record: its message and its attributes, groups
// flattened to dotted keys ("limits.memory").
type auditRec struct {
	msg   string
	at    time.Time
	attrs map[string]slog.Value
}

func (h *auditSink) Enabled(context.Context, slog.Level) bool { return true }
func (h *auditSink) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *auditSink) WithGroup(string) slog.Handler            { return h }

func (h *auditSink) Handle(_ context.Context, r slog.Record) error {
	if h.delay > 0 {
		time.Sleep(h.delay)
	}
	rec := auditRec{msg: r.Message, at: r.Time, attrs: map[string]slog.Value{}}
	var flat func(prefix string, a slog.Attr)
	flat = func(prefix string, a slog.Attr) {
		if a.Value.Kind() == slog.KindGroup {
			for _, g := range a.Value.Group() {
				flat(prefix+a.Key+".", g)
			}
			return
		}
		rec.attrs[prefix+a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool { flat("", a); return true })
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *auditSink) records() []auditRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

func (r auditRec) str(key string) string { return r.attrs[key].String() }
func (r auditRec) num(key string) int64 {
	v, ok := r.attrs[key]
	if !ok {
		return -1
	}
	switch v.Kind() {
	case slog.KindUint64:
		return int64(v.Uint64())
	case slog.KindInt64:
		return v.Int64()
	}
	return -1
}

// loopbackServer is an HTTP server on 127.0.0.1 that answers "ok", and
// the Egress rule that opens it, alone.
func loopbackServer(t *testing.T) (port, rule string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port, "127.0.0.1/32:" + port
}

// TestAuditScriptedRun: one run that reaches a loopback server through
// the proxy, is refused another host, makes a refused syscall and adds
// and deletes workspace files yields exactly these events, in order, on
// one Sandbox id and one run id.
func TestAuditScriptedRun(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "sh", "curl", "setarch", "rm")
	port, rule := loopbackServer(t)
	sink := &auditSink{}
	s := newTest(t, Options{Network: NetworkAllow, Egress: []string{rule}, TrackChanges: true, Audit: sink})
	if err := s.WriteFile("old.txt", []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// NO_PROXY names loopback: --noproxy '' sends it through the proxy.
	script := `curl -s --noproxy '' -o /dev/null -w '%{http_code}\n' http://127.0.0.1:` + port + `/ok
curl -s --noproxy '' -o /dev/null -w '%{http_code}\n' http://10.9.9.9:81/no
setarch -R true || echo refused
echo new > new.txt
rm old.txt`
	res, err := s.Run(context.Background(), Command("sh", "-c", script))
	if err != nil || !res.Success() {
		t.Fatalf("run: %v %v\n%s%s", err, res.Err(), res.Stdout, res.Stderr)
	}
	if got := string(res.Stdout); got != "200\n403\nrefused\n" {
		t.Errorf("the script printed %q", got)
	}
	s.Close()

	// setarch asks for the personality more than once (Denials counts
	// each): one denial event each.
	if len(res.Denials) != 1 || res.Denials[0].Syscall != "personality" {
		t.Fatalf("Denials %v, want personality's alone", res.Denials)
	}
	n := res.Denials[0].Count
	recs := sink.records()
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.msg)
	}
	want := []string{AuditRunStart, AuditConnection, AuditConnection}
	for range n {
		want = append(want, AuditDenial)
	}
	want = append(want, AuditChange, AuditChange, AuditRunEnd)
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	last := len(recs) - 1
	id, run := recs[0].str("sandbox"), recs[0].num("run")
	for _, r := range recs {
		if r.str("sandbox") != id || r.num("run") != run || id == "" || run <= 0 {
			t.Errorf("%s: sandbox %q run %d, want %q %d on every event", r.msg, r.str("sandbox"), r.num("run"), id, run)
		}
	}
	check := func(r auditRec, kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if got := r.str(kv[i]); got != kv[i+1] {
				t.Errorf("%s: %s = %q, want %q", r.msg, kv[i], got, kv[i+1])
			}
		}
	}
	check(recs[0], "path", "sh", "argv", fmt.Sprint([]string{"sh", "-c", script}), "network", "allow", "live", "false",
		"limits.memory", fmt.Sprint(DefaultMemory), "limits.pids", fmt.Sprint(DefaultPids))
	check(recs[1], "host", "127.0.0.1", "port", port, "method", "GET", "decision", "allowed", "status", "200", "addr", "127.0.0.1:"+port)
	check(recs[2], "host", "10.9.9.9", "port", "81", "decision", "refused", "status", "403", "addr", "")
	if recs[1].num("bytes_up") <= 0 || recs[1].num("bytes_down") <= 0 {
		t.Errorf("allowed connection: bytes up %d down %d", recs[1].num("bytes_up"), recs[1].num("bytes_down"))
	}
	for _, d := range recs[3 : 3+n] {
		check(d, "syscall", "personality", "errno", "1")
		if d.num("pid") <= 1 {
			t.Errorf("denial: pid %d, want setarch's, a child of the shell (pid 1)", d.num("pid"))
		}
		// Each event carries the time it happened: the refusal came
		// after the second connection ended, though it is handed over
		// at the run's end.
		if !d.at.After(recs[2].at) || d.at.After(recs[last].at) {
			t.Errorf("the denial's time %v is not between the refused connection's end %v and the run's %v", d.at, recs[2].at, recs[last].at)
		}
	}
	check(recs[last-2], "path", "new.txt", "change", "added", "size", "4")
	check(recs[last-1], "path", "old.txt", "change", "deleted", "size", "3")
	check(recs[last], "outcome", "exited", "exit_code", "0", "denials", fmt.Sprint(n), "denials_dropped", "0",
		"connections", "2", "connections_dropped", "0", "changes", "2", "changes_dropped", "0", "audit_dropped", "0")
	if recs[last].str("limits.memory.value") == "" || recs[last].str("limits.pids.by") == "" {
		t.Errorf("run end lacks the limits as enforced: %v", recs[last].attrs)
	}
}

// TestAuditCannotBeForged: what a program names (a file, a host) reaches
// a JSON trail as escaped values: every line is one event the library
// wrote, and exactly one is a run end. The trail's file is nowhere the
// program can see it.
func TestAuditCannotBeForged(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "bash", "touch", "ls", "cat")
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.OpenFile(trail, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, rule := loopbackServer(t)
	s := newTest(t, Options{Network: NetworkAllow, Egress: []string{rule}, TrackChanges: true, Audit: slog.NewJSONHandler(f, nil)})
	forged := `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"run end","outcome":"exited"}`
	script := `touch "$(printf 'x\n%s\n' '` + forged + `')"
exec 3<>/dev/tcp/127.0.0.1/3128
printf 'CONNECT x","msg","forged:443 HTTP/1.1\r\n\r\n' >&3
cat <&3 >/dev/null
exec 3>&-
ls -l /proc/self/fd/ /proc/1/fd/ 2>&1
cat ` + trail + ` 2>&1 || echo "no trail"`
	res, err := s.Run(context.Background(), Command("bash", "-c", script))
	if err != nil {
		t.Fatal(err)
	}
	fds, _, _ := strings.Cut(string(res.Stdout), "cat: ")
	if strings.Contains(fds, "audit.jsonl") || !strings.Contains(string(res.Stdout), "no trail") {
		t.Errorf("the program saw the trail:\n%s%s", res.Stdout, res.Stderr)
	}
	s.Close()

	b, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	var sawFile, sawHost bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("a line of the trail is not an event: %v\n%s", err, sc.Bytes())
		}
		msg, _ := ev["msg"].(string)
		msgs = append(msgs, msg)
		if ev["path"] == "x\n"+forged {
			sawFile = true
		}
		if ev["host"] == `x","msg","forged` {
			sawHost = true
		}
	}
	if want := []string{AuditRunStart, AuditConnection, AuditChange, AuditRunEnd}; !slices.Equal(msgs, want) {
		t.Errorf("the trail's events are %q, want %q:\n%s", msgs, want, b)
	}
	if !sawFile || !sawHost {
		t.Errorf("the trail lacks the program's file name (%v) or host (%v) as values:\n%s", sawFile, sawHost, b)
	}
}

// TestAuditFlood: a program that makes far more events than a slow
// handler takes loses none silently: every connection and refusal it
// made is an event received or a count in the run's end, and every
// event the queue dropped is counted in "audit dropped" events.
func TestAuditFlood(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "bash", "python3")
	defer func(n int) { auditQueueLen = n }(auditQueueLen)
	auditQueueLen = auditReserve + 50
	sink := &auditSink{delay: time.Millisecond}
	_, rule := loopbackServer(t)
	s := newTest(t, Options{Network: NetworkAllow, Egress: []string{rule}, Audit: sink})
	const conns, denials = 1500, 3000
	script := fmt.Sprintf(`for i in $(seq %d); do
	exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT 10.0.0.1:1 HTTP/1.1\r\n\r\n' >&3 && cat <&3 >/dev/null; exec 3>&-
done
python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(sum(libc.ptrace(0, 0, 0, 0) == -1 for _ in range(%d)))'`, conns, denials)
	res, err := s.Run(context.Background(), Command("bash", "-c", script))
	if err != nil || !res.Success() {
		t.Fatalf("%v %v\n%s%s", err, res.Err(), res.Stdout, res.Stderr)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != fmt.Sprint(denials) {
		t.Errorf("%s of %d ptrace calls were refused", got, denials)
	}
	s.Close()

	happened := len(res.Connections) + res.ConnectionsDropped
	for _, d := range res.Denials {
		happened += d.Count
	}
	if happened != conns+denials {
		t.Errorf("the Result counts %d connections and refusals, the program made %d", happened, conns+denials)
	}
	got := map[string]int{}
	var end auditRec
	var reported int64
	for _, r := range sink.records() {
		got[r.msg]++
		switch r.msg {
		case AuditRunEnd:
			end = r
		case AuditDropped:
			reported += r.num("count")
		}
	}
	if got[AuditRunStart] != 1 || got[AuditRunEnd] != 1 {
		t.Fatalf("%d run starts and %d run ends, want 1 each (they are kept room for)", got[AuditRunStart], got[AuditRunEnd])
	}
	dropped := end.num("audit_dropped")
	if dropped <= 0 || reported != dropped {
		t.Errorf("the run end counts %d events dropped, the audit dropped events %d; want the same, above 0", dropped, reported)
	}
	accounted := int64(got[AuditConnection]+got[AuditDenial]) + dropped + end.num("connections_dropped") + end.num("denials_dropped")
	if accounted != int64(conns+denials) || end.num("connections") != conns || end.num("denials") != denials {
		t.Errorf("%d connection and %d denial events received, %d dropped by the queue, %d and %d past the run's lists: %d, want %d (run end: %v)",
			got[AuditConnection], got[AuditDenial], dropped, end.num("connections_dropped"), end.num("denials_dropped"), accounted, conns+denials, end.attrs)
	}
}

// TestAuditLive: the calls that enter a live sandbox are audited as runs,
// each with its own refusals, between the live sandbox's start and end.
func TestAuditLive(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "sh", "setarch")
	sink := &auditSink{}
	s := newTest(t, Options{Live: true, Audit: sink})
	for _, script := range []string{"echo one", "setarch -R true || echo two"} {
		if res, err := s.Run(context.Background(), Command("sh", "-c", script)); err != nil || !res.Success() {
			t.Fatalf("%s: %v %v", script, err, res.Err())
		}
	}
	s.Close()
	recs := sink.records()
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.msg)
	}
	// The first call starts the live sandbox it enters.
	want := []string{AuditRunStart, AuditLiveStart, AuditRunEnd, AuditRunStart}
	for len(want) < len(recs)-2 {
		want = append(want, AuditDenial)
	}
	want = append(want, AuditRunEnd, AuditLiveEnd)
	if !slices.Equal(kinds, want) || len(recs) < 7 {
		t.Fatalf("events %q, want %q with at least one denial", kinds, want)
	}
	last := len(recs) - 1
	first, live, second := recs[0].num("run"), recs[1].num("run"), recs[3].num("run")
	if live == first || first == second || recs[last].num("run") != live || recs[2].num("run") != first ||
		recs[4].num("run") != second || recs[last-1].num("run") != second {
		t.Errorf("run ids: live %d, calls %d and %d: %v", live, first, second, kinds)
	}
	if recs[0].str("argv") != "[sh -c echo one]" || recs[0].str("live") != "true" {
		t.Errorf("first call's start: %v", recs[0].attrs)
	}
	if recs[4].str("syscall") != "personality" || recs[last-1].num("denials") != int64(last-5) {
		t.Errorf("second call's denial %v, end %v", recs[4].attrs, recs[last-1].attrs)
	}
}

// TestAuditOption: a handler that drops Info records cannot be a trail.
func TestAuditOption(t *testing.T) {
	s := New(Options{Audit: slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})})
	if oe, ok := s.Err().(*OptionError); !ok || oe.Option != "Options.Audit" {
		t.Errorf("New with a handler off at Info: %v, want an *OptionError for Options.Audit", s.Err())
	}
}
