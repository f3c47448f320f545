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
	"syscall"
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

// TestAuditScriptedRun: one run that executes programs, reaches a
// loopback server through the proxy, is refused another host, makes a
// refused syscall and adds and deletes workspace files yields exactly
// these events, on one Sandbox id and one run id, each at the time it
// happened: the connections come from the proxy and the rest from the
// spawner, each queued as it arrives, so the test puts them in the order
// of their times. The same holds when the caller is its own launcher
// (InProcess), where the supervisor runs in the caller.
func TestAuditScriptedRun(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "sh", "curl", "setarch", "rm")
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("inprocess=%v", inProcess), func(t *testing.T) { testAuditScriptedRun(t, inProcess) })
	}
}

func testAuditScriptedRun(t *testing.T, inProcess bool) {
	port, rule := loopbackServer(t)
	sink := &auditSink{}
	s := newTest(t, Options{Network: &Egress{Allow: []string{rule}}, Workspace: SessionWorkspace{TrackChanges: true}, Audit: &Audit{Handler: sink, Exec: true}, Start: inProcessIf(inProcess)})
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
	type ev struct {
		msg   string
		attrs []string // key, value, ...
	}
	exec := func(path string, pid int) ev {
		return ev{AuditExec, []string{"path", path, "pid", fmt.Sprint(pid), "syscall", "execve"}}
	}
	want := []ev{
		{AuditRunStart, []string{"path", "sh", "argv", fmt.Sprint([]string{"sh", "-c", script}), "network", "allow", "live", "false",
			"limits.memory", fmt.Sprint(DefaultMemory), "limits.pids", fmt.Sprint(DefaultPids)}},
		exec("/usr/bin/sh", 1),
		exec("/usr/bin/curl", 2),
		{AuditConnection, []string{"host", "127.0.0.1", "port", port, "method", "GET", "decision", "allowed", "status", "200", "addr", "127.0.0.1:" + port}},
		exec("/usr/bin/curl", 3),
		{AuditConnection, []string{"host", "10.9.9.9", "port", "81", "decision", "refused", "status", "403", "addr", ""}},
		exec("/usr/bin/setarch", 4),
	}
	for range n {
		want = append(want, ev{AuditDenial, []string{"syscall", "personality", "errno", "1", "pid", "4"}})
	}
	want = append(want, exec("/usr/bin/rm", 5),
		ev{AuditChange, []string{"path", "new.txt", "change", "added", "size", "4"}},
		ev{AuditChange, []string{"path", "old.txt", "change", "deleted", "size", "3"}},
		ev{AuditRunEnd, []string{"outcome", "exited", "exit_code", "0", "denials", fmt.Sprint(n), "denials_dropped", "0",
			"connections", "2", "connections_dropped", "0", "changes", "2", "changes_dropped", "0",
			"execs", "5", "execs_dropped", "0", "audit_dropped", "0"}})

	recs := sink.records()
	if len(recs) == 0 || recs[0].msg != AuditRunStart || recs[len(recs)-1].msg != AuditRunEnd {
		t.Errorf("the trail does not begin with the run's start and end with its end")
	}
	// A connection's event is made once the proxy has answered, and the
	// client may exit and the script exec the next program before that:
	// its place in the script is when it started.
	happened := func(r auditRec) time.Time {
		if v, ok := r.attrs["started"]; ok && r.msg == AuditConnection && v.Kind() == slog.KindTime {
			return v.Time()
		}
		return r.at
	}
	slices.SortStableFunc(recs, func(a, b auditRec) int { return happened(a).Compare(happened(b)) })
	var kinds, wantKinds []string
	for i, r := range recs {
		kinds = append(kinds, r.msg)
		if i < len(want) {
			wantKinds = append(wantKinds, want[i].msg)
		}
	}
	if len(recs) != len(want) || !slices.Equal(kinds, wantKinds) {
		for _, r := range recs {
			t.Logf("%s %v", r.msg, r.attrs)
		}
		t.Fatalf("events %q, want %d: %q", kinds, len(want), wantKinds)
	}
	id, run := recs[0].str("sandbox"), recs[0].num("run")
	for i, r := range recs {
		if r.str("sandbox") != id || r.num("run") != run || id == "" || run <= 0 {
			t.Errorf("%s: sandbox %q run %d, want %q %d on every event", r.msg, r.str("sandbox"), r.num("run"), id, run)
		}
		for k := 0; k < len(want[i].attrs); k += 2 {
			if got := r.str(want[i].attrs[k]); got != want[i].attrs[k+1] {
				t.Errorf("event %d, %s: %s = %q, want %q", i, r.msg, want[i].attrs[k], got, want[i].attrs[k+1])
			}
		}
	}
	if c := recs[3]; c.num("bytes_up") <= 0 || c.num("bytes_down") <= 0 {
		t.Errorf("allowed connection: bytes up %d down %d", c.num("bytes_up"), c.num("bytes_down"))
	}
	if end := recs[len(recs)-1]; end.str("limits.memory.value") == "" || end.str("limits.pids.by") == "" {
		t.Errorf("run end lacks the limits as enforced: %v", end.attrs)
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
	s := newTest(t, Options{Network: &Egress{Allow: []string{rule}}, Workspace: SessionWorkspace{TrackChanges: true}, Audit: &Audit{Handler: slog.NewJSONHandler(f, nil)}})
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
// handler takes loses none silently: every connection, refusal and exec
// it made is an event received or a count in the run's end, and every
// event the queue dropped is counted in "audit dropped" events.
func TestAuditFlood(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "bash", "python3", "seq", "cat", "true")
	defer func(n int) { auditQueueLen = n }(auditQueueLen)
	auditQueueLen = auditReserve + 50
	sink := &auditSink{delay: time.Millisecond}
	_, rule := loopbackServer(t)
	s := newTest(t, Options{Network: &Egress{Allow: []string{rule}}, Audit: &Audit{Handler: sink, Exec: true}})
	const conns, denials, trues = 1500, 3000, 1200
	script := fmt.Sprintf(`for i in $(seq %d); do
	exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT 10.0.0.1:1 HTTP/1.1\r\n\r\n' >&3 && cat <&3 >/dev/null; exec 3>&-
done
for i in $(seq %d); do true; /bin/true; done
python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(sum(libc.ptrace(0, 0, 0, 0) == -1 for _ in range(%d)))'`, conns, trues, denials)
	// bash, seq twice, cat for each connection, /bin/true (not the
	// builtin), python3.
	const execs = 1 + 2 + conns + trues + 1
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
	if end.num("connections") != conns || end.num("denials") != denials || end.num("execs") != execs {
		t.Errorf("run end counts %d connections, %d denials, %d execs; want %d, %d, %d", end.num("connections"), end.num("denials"), end.num("execs"), conns, denials, execs)
	}
	received := int64(got[AuditConnection] + got[AuditDenial] + got[AuditExec])
	unlisted := end.num("connections_dropped") + end.num("denials_dropped") + end.num("execs_dropped")
	if received+dropped+unlisted != conns+denials+execs || unlisted == 0 {
		t.Errorf("%d connection, %d denial and %d exec events received, %d dropped by the queue, %d past the run's lists: %d, want %d (run end: %v)",
			got[AuditConnection], got[AuditDenial], got[AuditExec], dropped, unlisted, received+dropped+unlisted, conns+denials+execs, end.attrs)
	}
}

// TestAuditLive: the calls that enter a live sandbox are audited as runs,
// each with its own refusals, between the live sandbox's start and end.
func TestAuditLive(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "sh", "setarch")
	sink := &auditSink{}
	s := newTest(t, Options{Live: &Live{}, Audit: &Audit{Handler: sink}})
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

// TestAuditOption: a handler that drops Info records cannot be a trail,
// and AuditExec needs a trail, a filter, and a policy that allows every
// exec, which it then records; no policy may refuse with the errno that
// marks an audited exec, which the supervisor would let run.
func TestAuditOption(t *testing.T) {
	h := &auditSink{}
	execveOnlyAbs := DefaultSeccompPolicy()
	execveOnlyAbs.Rules = append([]SyscallRule{{Names: []string{"execve"}, Action: ActNotify(syscall.EPERM), Args: []ArgCond{{Index: 1, Op: ArgEq, Value: 0}}}}, execveOnlyAbs.Rules...)
	denyAll := &SeccompPolicy{Default: ActNotify(syscall.EPERM), Unknown: ActNotify(syscall.ENOSYS),
		Rules: []SyscallRule{{Names: []string{"sendmsg", "fcntl", "close", "execveat"}, Action: ActAllow}}}
	for _, c := range []struct {
		name   string
		opts   Options
		option string
	}{
		{"off at Info", Options{Audit: &Audit{Handler: slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})}}, "Options.Audit.Handler"},
		{"exec without a trail", Options{Audit: &Audit{Exec: true}}, "Options.Audit.Handler"},
		{"exec without a filter", Options{Audit: &Audit{Handler: h, Exec: true}, Seccomp: Unconfined{}}, "Options.Audit.Exec"},
		{"exec decided by its arguments", Options{Audit: &Audit{Handler: h, Exec: true}, Seccomp: execveOnlyAbs}, "Options.Audit.Exec"},
		{"exec refused by Default", Options{Audit: &Audit{Handler: h, Exec: true}, Seccomp: denyAll}, "Options.Audit.Exec"},
		{"the reserved errno", Options{Seccomp: &SeccompPolicy{Default: ActNotify(4094), Unknown: ActAllow}}, "Options.Seccomp.Default"},
	} {
		s := New(c.opts)
		if oe, ok := s.Err().(*OptionError); !ok || oe.Option != c.option {
			t.Errorf("%s: %v, want an *OptionError for %s", c.name, s.Err(), c.option)
		}
		s.Close()
	}
	s := New(Options{Audit: &Audit{Handler: h, Exec: true}})
	if s.Err() != nil {
		t.Errorf("AuditExec with the default policy: %v", s.Err())
	}
	s.Close()
}

// TestAuditPooled: a run that takes a sandbox prepared ahead reports its
// execs and refusals as a cold one does.
func TestAuditPooled(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "sh", "setarch")
	sink := &auditSink{}
	s := newTest(t, Options{Start: Pool{Size: 1}, Audit: &Audit{Handler: sink, Exec: true}})
	if err := s.fillPool(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), Command("sh", "-c", "setarch -R true || exit 0"))
	if err != nil || !res.Success() || !res.Pooled {
		t.Fatalf("%v %v, pooled %v", err, res.Err(), res.Pooled)
	}
	s.Close()
	var kinds []string
	for _, r := range sink.records() {
		kinds = append(kinds, r.msg)
	}
	want := []string{AuditRunStart, AuditExec, AuditExec}
	for range res.Denials[0].Count {
		want = append(want, AuditDenial)
	}
	want = append(want, AuditRunEnd)
	if !slices.Equal(kinds, want) {
		t.Errorf("events %q, want %q", kinds, want)
	}
}
