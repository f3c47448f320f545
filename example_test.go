//go:build linux

package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
)

// The examples ask for best-effort limits so that they run on any host:
// where the process may make a cgroup, the limits are the cgroup's as
// always; where it may not (an unprivileged user without a delegated
// cgroup), rlimits stand in instead of Run refusing. A service should leave
// Options.Limits.Policy at its default, EnforceLimits.
var anywhere = sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}}

func ExampleCommand() {
	// The name is looked up in the sandbox's PATH, not the host's.
	cmd := sandbox.Command("sh", "-c", "echo hello")
	sb := sandbox.New(anywhere)
	defer sb.Close() // ends the session: its workspace goes
	res, err := sb.Run(context.Background(), cmd)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%s", res.Stdout)
	fmt.Println(res.Outcome)
	// Output:
	// hello
	// exited
}

func ExampleSandbox_Run() {
	opts := anywhere
	opts.Env = []string{"GREETING=hi"}
	sb := sandbox.New(opts)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A non-zero exit is not an error: the Result says how the run ended.
	cmd := sandbox.Command("sh", "-c", `echo "$GREETING from $(pwd) as $(id -un)"; echo oops >&2; exit 3`)
	res, err := sb.Run(ctx, cmd)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("outcome %s, exit code %d\n", res.Outcome, res.ExitCode)
	fmt.Printf("stdout: %s", res.Stdout)
	fmt.Printf("stderr: %s", res.Stderr)
	// Output:
	// outcome exited, exit code 3
	// stdout: hi from /workspace as sandbox
	// stderr: oops
}

func ExampleSandbox_Run_timeout() {
	sb := sandbox.New(anywhere)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	// When ctx ends the run, every process of the sandbox is killed. That
	// is how the program ended, not a failure of Run: the error is nil,
	// the Result's Outcome is Timeout and it holds the output so far;
	// res.Err() matches ctx.Err().
	res, err := sb.Run(ctx, sandbox.Command("sh", "-c", "echo started; exec sleep 10"))
	if err != nil {
		fmt.Println("could not run:", err)
		return
	}
	fmt.Printf("outcome %s, stdout %q\n", res.Outcome, res.Stdout)
	fmt.Println(errors.Is(res.Err(), context.DeadlineExceeded))
	// Output:
	// outcome timeout, stdout "started\n"
	// true
}

func ExampleSandbox_Start() {
	sb := sandbox.New(anywhere)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A program that answers its input as it comes, then waits.
	cmd := sandbox.Command("sh", "-c", `read name; echo "hello, $name"; exec sleep 100`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	out, w := io.Pipe()
	cmd.Stdout = w
	p, err := sb.Start(ctx, cmd)
	if err != nil {
		fmt.Println("could not start:", err)
		return
	}
	fmt.Fprintln(stdin, "agent")
	stdin.Close()
	line, _ := bufio.NewReader(out).ReadString('\n')
	fmt.Print(line)

	// sleep has no handler for SIGTERM; it ends it, as on the host.
	p.Signal(syscall.SIGTERM)
	res, err := p.Wait()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Outcome, res.Signal)
	fmt.Println(errors.Is(p.Kill(), os.ErrProcessDone))
	// Output:
	// hello, agent
	// signaled terminated
	// true
}

func ExampleNew() {
	// The zero Options are the safe default; set only what differs.
	sb := sandbox.New(sandbox.Options{Hostname: "box", Limits: sandbox.Limits{TmpSize: 16 << 20}})
	fmt.Println(sb.Err())

	// New checks the Options at once. A wrong one is an error naming the
	// field, returned by Err and by every Run.
	sb = sandbox.New(sandbox.Options{Binds: []sandbox.Bind{{Source: "relative/dir"}}})
	err := sb.Err()
	fmt.Println(errors.Is(err, sandbox.ErrInvalidOption))
	if oe, ok := errors.AsType[*sandbox.OptionError](err); ok {
		fmt.Println(oe.Option)
	}
	// Output:
	// <nil>
	// true
	// Options.Binds[0].Source
}

func ExampleResult_Err() {
	sb := sandbox.New(anywhere)
	defer sb.Close() // ends the session: its workspace goes
	res, err := sb.Run(context.Background(), sandbox.Command("sh", "-c", "exit 3"))
	if err != nil {
		fmt.Println("sandbox failed:", err)
		return
	}
	// For callers who prefer os/exec's style: Err is nil only on exit 0.
	if err := res.Err(); err != nil {
		if ee, ok := errors.AsType[*sandbox.ExitError](err); ok {
			fmt.Println(err, "/ code", ee.ExitCode())
		}
	}
	// Output:
	// exit status 3 / code 3
}

func ExampleResult_limits() {
	opts := anywhere
	opts.Limits.Memory, opts.Limits.CPUs, opts.Limits.Pids = 256<<20, 0.5, 64
	sb := sandbox.New(opts)
	defer sb.Close() // ends the session: its workspace goes
	res, err := sb.Run(context.Background(), sandbox.Command("true"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	// Each limit says whether it was enforced, and by what.
	for _, l := range res.Limits {
		fmt.Println(l.Name, l.Value != "none")
	}
	// Output:
	// memory true
	// cpu true
	// pids true
	// io false
}

func ExampleResult_denials() {
	// unshare is refused by the default policy: it fails with EPERM and
	// the Result names it.
	cmd := sandbox.Command("sh", "-c", "unshare -U true 2>/dev/null || echo unshare refused")
	sb := sandbox.New(anywhere)
	defer sb.Close() // ends the session: its workspace goes
	res, err := sb.Run(context.Background(), cmd)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%s", res.Stdout)
	for _, d := range res.Denials {
		fmt.Println("refused:", d.Syscall, d.Errno == syscall.EPERM, d.Count)
	}
	// Output:
	// unshare refused
	// refused: unshare true 1
}

func ExampleSeccompPolicy() {
	// Start from the default policy and amend it: here, end the run at the
	// first refused syscall, and make chmod fail with EROFS, silently. A
	// rule put in front of a syscall's unconditional rule overrides it.
	policy := sandbox.DefaultSeccompPolicy()
	policy.Rules = append([]sandbox.SyscallRule{
		{Names: []string{"chmod", "fchmodat", "fchmodat2"}, Action: sandbox.ActErrno(syscall.EROFS)},
	}, policy.Rules...)
	opts := anywhere
	policy.KillOnRefusal = true
	opts.Seccomp = policy
	sb := sandbox.New(opts)
	defer sb.Close()

	res, err := sb.Run(context.Background(), sandbox.Command("sh", "-c", "touch f; chmod 600 f || echo chmod refused"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%s%s\n", res.Stdout, res.Outcome)

	res, err = sb.Run(context.Background(), sandbox.Command("sh", "-c", "chroot / true; echo not reached"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%s %s%s\n", res.Outcome, res.Violation, res.Stdout)
	// Output:
	// chmod refused
	// exited
	// seccomp kill chroot
}

func ExampleNetwork() {
	// The run reaches pypi.org through a proxy, and nothing else. Off the
	// list, the proxy refuses without resolving the name.
	opts := anywhere
	opts.Network = &sandbox.Egress{Allow: []string{"pypi.org", "files.pythonhosted.org"}}
	cmd := sandbox.Command("sh", "-c", "wget -q -O /dev/null http://example.org/ || echo fetch failed")
	sb := sandbox.New(opts)
	defer sb.Close() // ends the session: its workspace goes
	res, err := sb.Run(context.Background(), cmd)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%s", res.Stdout)
	for _, c := range res.Connections {
		fmt.Printf("%s %s:%d allowed=%v status=%d: %s\n", c.Method, c.Host, c.Port, c.Allowed, c.Status, c.Reason)
	}
	// Output:
	// fetch failed
	// GET example.org:80 allowed=false status=403: example.org is not on the allowlist
}

func ExampleSandbox_Snapshot() {
	// A Sandbox is a session: its Runs share /workspace and nothing else.
	sb := sandbox.New(anywhere)
	defer sb.Close()
	ctx := context.Background()
	turn := func(script string) {
		res, err := sb.Run(ctx, sandbox.Command("sh", "-c", script))
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("%s", res.Stdout)
	}
	// The host writes a file; the program changes it.
	if err := sb.WriteFile("notes.txt", []byte("one\n"), 0o644); err != nil {
		fmt.Println("error:", err)
		return
	}
	turn("echo two >> notes.txt; echo gone > /tmp/scratch")
	snap, err := sb.Snapshot()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	turn("rm notes.txt; ls /tmp | wc -l")
	if err := sb.Restore(snap); err != nil {
		fmt.Println("error:", err)
		return
	}
	data, err := sb.ReadFile("notes.txt")
	fmt.Printf("%s%v\n", data, err)
	// Output:
	// 0
	// one
	// two
	// <nil>
}

// With SessionWorkspace.TrackChanges each Result lists what the run changed in the
// workspace; Sandbox.Changes lists what differs from a snapshot.
func ExampleResult_changes() {
	opts := anywhere
	opts.Workspace = sandbox.SessionWorkspace{TrackChanges: true}
	sb := sandbox.New(opts)
	defer sb.Close()
	if err := sb.WriteFile("old.txt", []byte("old\n"), 0o644); err != nil {
		fmt.Println("error:", err)
		return
	}
	snap, err := sb.Snapshot()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	res, err := sb.Run(context.Background(), sandbox.Command("sh", "-c",
		"echo hello > new.txt; mkdir out; echo 42 > out/answer; rm old.txt"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, c := range res.Changes {
		fmt.Println(c.Kind, c.Path, c.Mode)
	}
	// Since the snapshot, which here is the same list.
	changes, dropped, err := sb.Changes(snap)
	fmt.Println(len(changes), dropped, err)
	// Output:
	// added new.txt -rw-r--r--
	// deleted old.txt -rw-r--r--
	// added out drwxr-xr-x
	// added out/answer -rw-r--r--
	// 4 0 <nil>
}

// Options.Logger hears of each run's start and end (at Debug) and of what
// went wrong off a run's path, such as a spawner that died (at Warn).
// Without one the library writes nothing.
func ExampleOptions_logger() {
	// Here a text log with only the stable attributes, of which the
	// example prints the runs' events.
	var buf bytes.Buffer
	keep := map[string]bool{slog.LevelKey: true, slog.MessageKey: true, "program": true, "outcome": true, "exit_code": true}
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if !keep[a.Key] {
				return slog.Attr{}
			}
			return a
		},
	}))
	opts := anywhere
	opts.Logger = log
	sb := sandbox.New(opts)
	defer sb.Close()
	sb.Run(context.Background(), sandbox.Command("sh", "-c", "exit 2"))
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "sandbox: run") {
			fmt.Println(line)
		}
	}
	// Output:
	// level=DEBUG msg="sandbox: run started" program=sh
	// level=DEBUG msg="sandbox: run ended" program=sh outcome=exited exit_code=2
}

func ExampleOptions_live() {
	opts := anywhere
	opts.Live = &sandbox.Live{} // one running sandbox for every call, until Close
	sb := sandbox.New(opts)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A call leaves a file in /tmp and a process running; the next call
	// sees both.
	if _, err := sb.Run(ctx, sandbox.Command("sh", "-c", "echo 42 > /tmp/answer; sleep 1000 >/dev/null 2>&1 &")); err != nil {
		fmt.Println("error:", err)
		return
	}
	res, err := sb.Run(ctx, sandbox.Command("cat", "/tmp/answer"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%s", res.Stdout)
	procs, err := sb.Processes(ctx)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, p := range procs {
		fmt.Println(p.Args, p.State)
		sb.Signal(p.Pid, syscall.SIGTERM)
	}
	// Output:
	// 42
	// [sleep 1000] sleeping
}

func ExampleSandbox_DialContext() {
	opts := anywhere
	opts.Live = &sandbox.Live{}
	sb := sandbox.New(opts)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A server on the sandbox's own loopback, which the host's network
	// never sees; its output goes to a file, since it outlives its call.
	server := `python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 7000)); s.listen()
while True:
    c, _ = s.accept(); c.sendall(b"hello from inside\n"); c.close()
' >/tmp/server.log 2>&1 &`
	if _, err := sb.Run(ctx, sandbox.Command("sh", "-c", server)); err != nil {
		fmt.Println("error:", err)
		return
	}
	for {
		conn, err := sb.DialContext(ctx, "tcp", "127.0.0.1:7000")
		if errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond) // not listening yet
			continue
		}
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		fmt.Print(line) // hello from inside
		return
	}
	// Not run by go test: it needs python3 in the sandbox, which a host
	// may lack. TestLiveDialContext runs the same.
}

// loopbackResolver resolves every name to 127.0.0.1, where ExampleSecret's
// server listens; a real program leaves Egress.Resolver nil.
type loopbackResolver struct{}

func (loopbackResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}}, nil
}

func ExampleSecret() {
	// A stand-in for an API on the host's loopback: it says what it was
	// sent, and answers with it.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("the API got:", r.Header.Get("Authorization"))
		fmt.Fprintln(w, r.Header.Get("Authorization"))
	}))
	defer api.Close()
	_, port, _ := net.SplitHostPort(api.Listener.Addr().String())

	opts := anywhere
	opts.Network = &sandbox.Egress{
		// The name, and the loopback address it resolves to here.
		Allow:    []string{"api.example.test:" + port, "127.0.0.1:" + port},
		Resolver: loopbackResolver{},
		Secrets:  []sandbox.Secret{{Name: "API_KEY", Value: "sk-the-real-key", Hosts: []string{"api.example.test:" + port}}},
	}
	sb := sandbox.New(opts)
	defer sb.Close()
	// The program holds only the placeholder, and sees only it, even in
	// what the API sends back.
	script := `wget -q -O - --header "Authorization: Bearer $API_KEY" http://api.example.test:` + port + `/ |
sed 's/sandbox-secret-API_KEY-[0-9a-f]*/<placeholder>/'`
	res, err := sb.Run(context.Background(), sandbox.Command("sh", "-c", script))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("the program saw: %s", res.Stdout)
	// Output:
	// the API got: Bearer sk-the-real-key
	// the program saw: Bearer <placeholder>
}

// Options.Audit receives every event of the Sandbox's audit trail; a JSON
// handler makes it JSON lines, here on os.Stdout. The example keeps only
// attributes that are the same on every run (not the times, ids, or
// limits as this host enforces them).
func ExampleOptions_audit() {
	keep := map[string]bool{slog.MessageKey: true, "argv": true, "path": true, "change": true,
		"outcome": true, "exit_code": true, "changes": true, "audit_dropped": true}
	opts := anywhere
	opts.Workspace = sandbox.SessionWorkspace{TrackChanges: true}
	opts.Audit = &sandbox.Audit{Handler: slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 || !keep[a.Key] {
				return slog.Attr{}
			}
			return a
		},
	})}
	sb := sandbox.New(opts)
	sb.Run(context.Background(), sandbox.Command("sh", "-c", "echo hello > greeting.txt"))
	sb.Close() // hands the handler every event still queued
	// Output:
	// {"msg":"run start","path":"sh","argv":["sh","-c","echo hello > greeting.txt"]}
	// {"msg":"change","path":"greeting.txt","change":"added"}
	// {"msg":"run end","outcome":"exited","exit_code":0,"changes":1,"audit_dropped":0}
}

// An image's files as the root: Python from the image, not the host. This
// example has no output to check because it pulls from Docker Hub, which
// the tests never reach (they build their images: see TestImageRoot); it
// is compiled with the tests all the same.
func ExampleImage() {
	sb := sandbox.New(sandbox.Options{
		Limits: anywhere.Limits,
		Root: &sandbox.Image{
			Ref: "docker.io/library/python:3.12-slim",
			Progress: func(p sandbox.ImageProgress) {
				fmt.Fprintf(os.Stderr, "layer %d/%d: %d of %d bytes\n", p.Index+1, p.Count, p.Done, p.Total)
			},
		},
	})
	defer sb.Close() // lets go of the image's root, which a prune may then remove
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The first Run pulls the image (or finds it stored); python3 is
	// found on the PATH of the image's config.
	res, err := sb.Run(ctx, sandbox.Command("python3", "-c", "import sys; print(sys.version)"))
	switch {
	case errors.Is(err, sandbox.ErrImageNotFound):
		fmt.Println("no such image:", err)
	case err != nil:
		fmt.Println("error:", err)
	default:
		fmt.Printf("%s", res.Stdout)
	}
}
