package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The live sandbox's escapes run with the host's /usr only, not in the
// escape suite's image root (escape_roots_linux_test.go): their hostile
// calls are Python programs (the watcher, the pid squatter), which an
// image would have to carry with their standard library, and what they
// attack, a new process entering a live sandbox, is the same whichever
// files the root holds.

// entrantWatcher is the hostile first call of a live sandbox: it waits in
// the background for new processes and, for the first half second of
// each one's life, tries as fast as it can every way into it: ptrace
// attach, /proc/PID/mem, environ, exe, cwd and root, and each fd it holds.
// Every way that works is written to /tmp/watch.log, one JSON line each,
// with what the target's status said at that moment. It writes
// /tmp/watch.ready once it watches, and stops after its time.
const entrantWatcher = `
import ctypes, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
log = open("/tmp/watch.log", "w", buffering=1)
me = os.getpid()
known = {d: 0.0 for d in os.listdir("/proc") if d.isdigit()}
def status(pid):
    out = {}
    try:
        for line in open("/proc/%d/status" % pid):
            k, _, v = line.partition(":")
            if k in ("Uid", "CapEff", "CapPrm", "Seccomp", "NoNewPrivs", "Name"):
                out[k] = v.split()[0] if v.split() else ""
    except OSError:
        pass
    return out
def hit(pid, what, target=""):
    log.write(json.dumps({"pid": pid, "what": what, "target": target, "status": status(pid)}) + "\n")
open("/tmp/watch.ready", "w").close()
end = time.time() + WATCH_SECONDS
while time.time() < end:
    now = time.time()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        first = known.setdefault(d, now)
        if first == 0.0 or now - first > 0.5:
            continue
        pid = int(d)
        if pid == me:
            continue
        hit(pid, "seen")
        for f, mode in (("mem", os.O_RDONLY), ("environ", os.O_RDONLY), ("exe", os.O_RDONLY)):
            try:
                fd = os.open("/proc/%d/%s" % (pid, f), mode)
                os.close(fd)
                hit(pid, "open " + f)
            except OSError:
                pass
        for f in ("cwd", "root"):
            try:
                hit(pid, "readlink " + f, os.readlink("/proc/%d/%s" % (pid, f)))
            except OSError:
                pass
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    hit(pid, "fd " + fd, os.readlink("/proc/%d/fd/%s" % (pid, fd)))
                except OSError:
                    pass
        except OSError:
            pass
        if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
            hit(pid, "ptrace")
            libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
`

// watchHit is one line of the watcher's log.
type watchHit struct {
	Pid    int
	What   string
	Target string
	Status map[string]string
}

// TestEscapeLiveEntrant: a hostile call prepares for the next one to enter
// its live sandbox, and the next one enters. The watcher (entrantWatcher)
// sees the entrant, since it has a pid in the sandbox from its fork on,
// but everything it reaches of it, it reaches only once the entrant has
// the sandbox's uid, no capability and the filter; and no fd it finds is
// one of the host's. The traps the hostile call left where the entrant's
// working directory and program are looked up lead only inside the
// sandbox: the entrant sees the sandbox's root and /proc, not the host's.
func TestEscapeLiveEntrant(t *testing.T) {
	requirePrograms(t, "python3")
	s, m := liveTest(t, Options{Env: []string{"PATH=/tmp/trap:/usr/bin:/bin"}})
	ctx := context.Background()
	watch := strings.Replace(entrantWatcher, "WATCH_SECONDS", "20", 1)
	runOK(t, s, `mkdir -p /tmp/trap /workspace/up &&
		ln -s /proc/self/exe /tmp/trap/selfexe &&
		printf '#!/proc/1/exe\n' > /tmp/trap/viainit && chmod +x /tmp/trap/viainit &&
		ln -s /proc/self/cwd/../../../.. /workspace/up/dir &&
		ln -sf /proc/1/root/etc/passwd /tmp/out &&
		(python3 -c '`+strings.ReplaceAll(watch, "'", `'"'"'`)+`' >/dev/null 2>&1 &) &&
		while [ ! -e /tmp/watch.ready ]; do sleep 0.01; done`)

	// The entrants: a plain one in the trapped directory, and two whose
	// program is a trap.
	cmd := Command("/bin/sh", "-c", "pwd -P; ls /; cat /proc/1/cmdline | tr '\\0' ' '; echo; cat /tmp/out | head -1")
	cmd.Dir = "/workspace/up/dir"
	res, err := s.Run(ctx, cmd)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the entrant in the trapped directory: %v, %+v, stderr %q", err, res, res.Stderr)
	}
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "/\n") || !strings.Contains(out, "\nworkspace\n") || strings.Contains(out, "\nwork\n") || !strings.Contains(out, "sandbox-live-init") {
		t.Errorf("the entrant saw %q: want the sandbox's root (with workspace, not the host's /work) and its init as pid 1", out)
	}
	if !strings.Contains(out, "\nroot:") {
		t.Errorf("the entrant read %q through /tmp/out, want the sandbox's own /etc/passwd", out)
	}
	for _, prog := range []string{"selfexe", "viainit"} {
		res, err := s.Run(ctx, Command(prog))
		if err == nil && res.ExitCode == 0 {
			t.Errorf("%s (a trap to the exec shim) ran: stdout %q", prog, res.Stdout)
		}
	}
	// Let the watcher see the last entrant through its first half second.
	time.Sleep(600 * time.Millisecond)
	log, err := s.Run(ctx, Command("cat", "/tmp/watch.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(string(log.Stdout)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var h watchHit
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("watch log line %q: %v", sc.Text(), err)
		}
		if h.What == "seen" {
			seen++
			continue
		}
		st := h.Status
		if len(st) == 0 {
			continue // gone before its status could be read
		}
		if st["Uid"] != fmt.Sprint(SandboxUID) || st["CapEff"] != "0000000000000000" || st["Seccomp"] != "2" {
			t.Errorf("the watcher reached pid %d (%s) before it was the sandbox's: %s %q with status %v", h.Pid, st["Name"], h.What, h.Target, st)
		}
		if strings.HasPrefix(h.What, "fd ") && !insideFdTarget(h.Target) {
			t.Errorf("the watcher found fd %q of pid %d (%s) pointing at %q", h.What, h.Pid, st["Name"], h.Target)
		}
		if strings.HasPrefix(h.What, "readlink ") && (h.Target == "/work" || strings.HasPrefix(h.Target, "/work/") || strings.Contains(h.Target, "unreachable")) {
			t.Errorf("the watcher found pid %d's %s at %q, outside the sandbox", h.Pid, h.What, h.Target)
		}
	}
	if seen < 3 {
		t.Errorf("the watcher saw %d new processes, want at least the three entrants: it did not watch, and the test shows nothing", seen)
	}
	s.Close()
	requireNothingLeft(t, m)
}

// insideFdTarget says whether an fd the watcher found is one a process in
// the sandbox may hold: its stdio pipes, sockets, a pty, /dev/null, the
// exec shim, or anything under the sandbox's own directories.
func insideFdTarget(target string) bool {
	for _, p := range []string{"pipe:", "socket:", "anon_inode:", "/dev/null", "/dev/pts/", "/memfd:", "/proc/", "/tmp/", "/workspace", "/usr/", "/etc/"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// TestEscapeLivePidsFull: a hostile call fills the live sandbox's pids
// limit, so that the next entrant's start fails half-way (its fork into
// the sandbox). The entrant's failure is an error naming the limit, and
// nothing of it is left, on the host or in the sandbox; once the hostile
// processes end, calls enter again.
func TestEscapeLivePidsFull(t *testing.T) {
	if cgroupErr() != nil {
		t.Skipf("needs cgroup limits: %v", cgroupErr())
	}
	s, m := liveTest(t, Options{Limits: Limits{Pids: 16}})
	fillPids(t, s)
	before := len(ownProcesses(m))
	for range 5 {
		_, err := s.Run(context.Background(), Command("true"))
		if err == nil || !errors.Is(err, syscall.EAGAIN) || !strings.Contains(err.Error(), "Options.Limits.Pids") {
			t.Fatalf("an entrant at the full pids limit: %v, want EAGAIN naming Options.Limits.Pids", err)
		}
	}
	if after := len(ownProcesses(m)); after != before {
		t.Errorf("%d processes with the marker after the failed entries, %d before", after, before)
	}
	procs, err := s.Processes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		s.Signal(p.Pid, syscall.SIGKILL)
	}
	if !waitFor(func() bool { _, err := s.Run(context.Background(), Command("true")); return err == nil }) {
		t.Errorf("calls do not enter again once the hostile processes ended")
	}
	s.Close()
	requireNothingLeft(t, m)
}

// fillPids has a call leave a squatter behind in the live sandbox: a
// process that takes every pid of the limit there is, and takes each
// one back as soon as it is free.
func fillPids(t *testing.T, s *Sandbox) {
	t.Helper()
	requirePrograms(t, "python3")
	runOK(t, s, `python3 -c '
import os, time
while True:
    try:
        pid = os.fork()
    except OSError:
        time.sleep(0.001)
        continue
    if pid == 0:
        os.execv("/bin/sleep", ["sleep", "1000"])
' </dev/null >/dev/null 2>&1 &`)
	// Until it has taken the pids its call just freed.
	time.Sleep(300 * time.Millisecond)
}
