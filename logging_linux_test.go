//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// logRecorder is a slog.Handler that keeps every record, with its
// attributes as strings, for the tests to look through.
type logRecorder struct {
	mu      sync.Mutex
	records []logged
}

type logged struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	l := logged{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.records = append(r.records, l)
	r.mu.Unlock()
	return nil
}

// find returns the records whose message contains msg.
func (r *logRecorder) find(msg string) []logged {
	r.mu.Lock()
	defer r.mu.Unlock()
	var l []logged
	for _, rec := range r.records {
		if strings.Contains(rec.msg, msg) {
			l = append(l, rec)
		}
	}
	return l
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.records {
		b.WriteString(rec.level.String() + " " + rec.msg)
		for k, v := range rec.attrs {
			b.WriteString(" " + k + "=" + v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestLoggerRunEvents: each Run logs its start and its end at Debug under
// one run number, the end with the program, outcome and exit code, and a
// setup error with the error.
func TestLoggerRunEvents(t *testing.T) {
	requireSandbox(t)
	rec := &logRecorder{}
	s := newTest(t, Options{Logger: slog.New(rec)})
	if res, err := s.Run(context.Background(), Command("/bin/sh", "-c", "exit 3")); err != nil || res.ExitCode != 3 {
		t.Fatalf("Run exit 3: err %v, result %+v", err, res)
	}
	if _, err := s.Run(context.Background(), Command("no-such-program")); err == nil {
		t.Fatal("Run of a missing program: no error")
	}
	started, ended := rec.find("run started"), rec.find("run ended")
	if len(started) != 2 || len(ended) != 2 {
		t.Fatalf("want 2 run started and 2 run ended events, got:\n%s", rec)
	}
	for i, want := range []map[string]string{
		{"program": "/bin/sh", "outcome": "exited", "exit_code": "3"},
		{"program": "no-such-program", "exit_code": "127"},
	} {
		if started[i].level != slog.LevelDebug || ended[i].level != slog.LevelDebug {
			t.Errorf("run %d: levels %v and %v, want Debug", i, started[i].level, ended[i].level)
		}
		if started[i].attrs["run"] != ended[i].attrs["run"] || started[i].attrs["program"] != want["program"] {
			t.Errorf("run %d: start %v does not pair with end %v", i, started[i].attrs, ended[i].attrs)
		}
		for k, v := range want {
			if ended[i].attrs[k] != v {
				t.Errorf("run %d ended with %s=%q, want %q (all: %v)", i, k, ended[i].attrs[k], v, ended[i].attrs)
			}
		}
	}
	if !strings.Contains(ended[1].attrs["error"], "not found") {
		t.Errorf("the missing program's end has error %q, want its not-found error", ended[1].attrs["error"])
	}
	if ended[0].attrs["error"] != "" {
		t.Errorf("a run that exited logged error %q", ended[0].attrs["error"])
	}
}

// TestLoggerSpawnerDeath: a Run after the spawner was killed warns that it
// died, naming its pid, and logs the new one's start.
func TestLoggerSpawnerDeath(t *testing.T) {
	requireSandbox(t)
	rec := &logRecorder{}
	s := newTest(t, Options{Logger: slog.New(rec)})
	requireEcho(t, s, "before")
	old := killSpawner(t, spawnerPID())
	if !waitFor(spawnerDead) {
		t.Fatalf("the caller never saw spawner %d died", old.pid)
	}
	requireEcho(t, s, "after")
	died := rec.find("the spawner died")
	if len(died) != 1 || died[0].level != slog.LevelWarn || died[0].attrs["spawner"] != strconv.Itoa(old.pid) {
		t.Fatalf("want one Warn that spawner %d died, got:\n%s", old.pid, rec)
	}
	startedNew := slices.ContainsFunc(rec.find("spawner started"), func(l logged) bool {
		return l.attrs["spawner"] == strconv.Itoa(spawnerPID())
	})
	if !startedNew {
		t.Errorf("no event of the new spawner %d's start:\n%s", spawnerPID(), rec)
	}
	requireSpawnerGone(t, old)
}

// unbuildableBinds cannot be mounted, whoever runs the test: the second
// target lies beneath the first, which is a file.
var unbuildableBinds = []Bind{{Source: "/etc/hostname", Target: "/opt/file"}, {Source: "/etc", Target: "/opt/file/etc"}}

// TestLoggerPoolFailure: a pool whose preparations fail (binds that
// cannot be mounted) warns this Sandbox's Logger, through the spawner, and
// not another Sandbox's.
func TestLoggerPoolFailure(t *testing.T) {
	requireSandbox(t)
	mine, other := &logRecorder{}, &logRecorder{}
	s := newTest(t, Options{Logger: slog.New(mine), Start: Pool{Size: 1}, Binds: unbuildableBinds})
	bystander := newTest(t, Options{Logger: slog.New(other), Start: Pool{Size: 1}})
	if err := s.fillPool(); err == nil {
		t.Fatal("a pool with binds that cannot be mounted was filled")
	}
	if err := bystander.fillPool(); err != nil {
		t.Fatalf("the bystander's pool: %v", err)
	}
	if !waitFor(func() bool { return len(mine.find("preparing a pooled sandbox failed")) > 0 }) {
		t.Fatalf("no warning of the failed preparation reached the Sandbox's Logger:\n%s", mine)
	}
	w := mine.find("preparing a pooled sandbox failed")[0]
	if w.level != slog.LevelWarn || !strings.Contains(w.msg, "/opt/file/etc") {
		t.Errorf("warning %v %q: want Warn naming the bind's target", w.level, w.msg)
	}
	if got := other.find("preparing"); len(got) > 0 {
		t.Errorf("another Sandbox's Logger heard of this one's pool: %v", got)
	}
}

// TestLoggerSilentByDefault: without a Logger the library writes nothing,
// even where a Logger would have heard warnings: a caller (the test binary
// as helper "quietcaller") that runs, kills its spawner, runs again and
// fills a pool that fails, prints nothing on stderr.
func TestLoggerSilentByDefault(t *testing.T) {
	requireSandbox(t)
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"=quietcaller")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("quietcaller: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	if got := strings.TrimSpace(stdout.String()); got != "ran 2 pool failed" {
		t.Fatalf("quietcaller did not go through its steps: stdout %q", got)
	}
	if stderr.Len() > 0 {
		t.Errorf("the library wrote to stderr without a Logger:\n%s", stderr.Bytes())
	}
}

func init() {
	// quietcaller runs, kills the spawner, runs again and fills a pool
	// with unbuildableBinds, with no Logger, and says on stdout what it
	// did.
	helpers["quietcaller"] = func([]string) int {
		opts := testOpts(Options{})
		s := New(opts)
		defer s.Close()
		ran := 0
		for range 2 {
			if res, err := s.Run(context.Background(), Command("true")); err == nil && res.Success() {
				ran++
			}
			if pid := spawnerPID(); pid > 0 {
				unix.Kill(pid, unix.SIGKILL)
				waitFor(spawnerDead)
			}
		}
		opts.Start, opts.Binds = Pool{Size: 1}, unbuildableBinds
		p := New(opts)
		defer p.Close()
		pool := "filled"
		if p.fillPool() != nil {
			pool = "failed"
		}
		os.Stdout.WriteString("ran " + strconv.Itoa(ran) + " pool " + pool + "\n")
		return 0
	}
}
