//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
)

// upstreamPy serves on 127.0.0.1, in a process of its own so that its CPU
// is not the caller's: a connection whose first byte is 'S' is sent zeros
// until it closes; any other is read to the end of a request header and
// answered with a short 200.
const upstreamPy = `
import socket, threading
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(512)
print(ls.getsockname()[1], flush=True)
zeros = bytes(256 << 10)
def serve(c):
    try:
        first = c.recv(65536)
        if first.startswith(b"S"):
            while True:
                c.sendall(zeros)
        if first.startswith(b"D"):
            while c.recv(1 << 20):
                pass
            return
        tail = first
        while b"\r\n\r\n" not in tail:
            chunk = c.recv(65536)
            if not chunk:
                break
            tail = tail[-3:] + chunk
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// attackPy runs in the sandbox for argv[3] seconds and prints how many
// times it did its attack: "header" sends complete requests for
// http://argv[2]/ with a header of about 250 KiB in tiny fields, one per
// connection, and "small" the same with 30 KiB headers; "flood" opens and
// closes connections to the proxy; "tunnel" CONNECTs to argv[2] and reads
// what the server streams as fast as it can, and "dribble" sends it one
// byte a write; "idle" only sleeps.
const attackPy = `
import socket, sys, time
mode, target, secs = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3])
size = 30 << 10 if mode == "small" else 250 << 10
proxy = ("127.0.0.1", 3128)
end = time.monotonic() + secs
n = 0
if mode in ("header", "small"):
    parts = [b"GET http://%s/ HTTP/1.1\r\nHost: %s\r\n" % (target, target)]
    got, i = 0, 0
    while got < size:
        f = b"X%x: y\r\n" % i
        parts.append(f)
        got, i = got + len(f), i + 1
    req = b"".join(parts) + b"\r\n"
    while time.monotonic() < end:
        s = socket.create_connection(proxy)
        try:
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except OSError:
            pass
        s.close()
        n += 1
elif mode == "dribble":
    s = socket.create_connection(proxy)
    s.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target)
    f = s.makefile("rb")
    while f.readline() not in (b"\r\n", b""):
        pass
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"D")
    while time.monotonic() < end:
        s.send(b"x")
        n += 1
elif mode == "idle":
    time.sleep(secs)
elif mode == "flood":
    while time.monotonic() < end:
        try:
            socket.create_connection(proxy, timeout=1).close()
        except OSError:
            pass
        n += 1
elif mode == "tunnel":
    s = socket.create_connection(proxy)
    s.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target)
    f = s.makefile("rb")
    while f.readline() not in (b"\r\n", b""):
        pass
    s.sendall(b"S")
    buf = bytearray(1 << 20)
    while time.monotonic() < end:
        k = f.readinto(buf)
        if not k:
            break
        n += k
print(n)
`

// raceEnabled is set by race_test.go when the race detector is built in.
var raceEnabled bool

// attackCPUs is the runs' CPU limit, attackTime how long each attacks.
const (
	attackCPUs = 0.25
	attackTime = 6 * time.Second
)

// TestAmplifyCPU has Egress runs limited to attackCPUs make the
// egress proxy work as hard as they can, and checks the caller's CPU time
// across each run (the proxy's, which runs in the caller, plus the run's
// own bookkeeping) against the bound in the egress package's
// documentation: CPUBurst plus CPUShare of the run's CPU limit over its
// duration. The costs behind the budget are estimates, so the test allows
// twice that, and 150 ms for starting and ending the run.
func TestAmplifyCPU(t *testing.T) {
	requireSandbox(t)
	requirePrograms(t, "python3")
	if err := cgroupErr(); err != nil {
		t.Skipf("the runs' CPU limit needs cgroups: %v", err)
	}
	if raceEnabled {
		t.Skip("the race detector multiplies the proxy's CPU per operation; the budget's costs are measured without it (the other passes of make test run this)")
	}
	port := startUpstream(t)
	resolver := &fakeResolver{addrs: map[string][]string{"up.allowed.test": {"127.0.0.1"}}}
	s := newTest(t, Options{Network: &Egress{Allow: []string{"up.allowed.test:" + port, "127.0.0.1:" + port}, Resolver: resolver}, Limits: Limits{CPUs: attackCPUs}})
	for _, tc := range []struct{ name, mode, target string }{
		{"idle", "idle", "-"},
		{"header allowed", "header", "up.allowed.test:" + port},
		{"header refused", "header", "down.refused.test:" + port},
		{"30 KiB headers", "small", "up.allowed.test:" + port},
		{"connection flood", "flood", "-"},
		{"tunnel", "tunnel", "up.allowed.test:" + port},
		{"tunnel a byte at a time", "dribble", "up.allowed.test:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secs := strconv.FormatFloat(attackTime.Seconds(), 'f', -1, 64)
			cpu0 := callerCPU(t)
			res, err := s.Run(context.Background(), Command("/usr/bin/python3", "-c", attackPy, tc.mode, tc.target, secs))
			caller := callerCPU(t) - cpu0
			if err != nil {
				t.Fatal(err)
			}
			if !res.Success() {
				t.Fatalf("the attack failed: %+v\n%s", res.Outcome, res.Stderr)
			}
			bound := egress.CPUBurst + time.Duration(egress.CPUShare*attackCPUs*float64(res.WallTime))
			t.Logf("%s: %s times in %v; caller CPU %v, the run's %v (limit %v CPUs): %.2fx the run's; documented bound %v",
				tc.name, strings.TrimSpace(string(res.Stdout)), res.WallTime.Round(time.Millisecond), caller.Round(time.Millisecond),
				res.CPUTime.Round(time.Millisecond), attackCPUs, float64(caller)/float64(max(res.CPUTime, 1)), bound.Round(time.Millisecond))
			if limit := 2*bound + 150*time.Millisecond; caller > limit {
				t.Errorf("the caller spent %v of CPU on a %v run limited to %v CPUs (the run used %v), want at most %v",
					caller, res.WallTime, attackCPUs, res.CPUTime, limit)
			}
		})
	}
}

// startUpstream runs upstreamPy on the host and returns its port.
func startUpstream(t *testing.T) string {
	cmd := exec.Command("/usr/bin/python3", "-c", upstreamPy)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the upstream server did not start: %v", err)
	}
	return strings.TrimSpace(line)
}

// callerCPU is this process's CPU time so far, user and system.
func callerCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
