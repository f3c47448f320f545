//go:build linux

package sandbox_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/sandboxtest"
)

// The TestSnippet tests check the library through sandboxtest, as a user's
// tests would. Best-effort limits let them run where no cgroup can hold the
// limits; the limit tests cover those.
var snippetOpts = sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}}

// TestSnippetIdentity: a shell sees itself as uid 1000, as pid 1 of its own
// PID namespace, and cannot write the host's /usr.
func TestSnippetIdentity(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, snippetOpts)
	res := sb.Shell(`id -u; id -g; echo $$; if touch /usr/sandboxtest-probe 2>/dev/null; then echo usr writable; else echo usr read-only; fi`)
	res.ExpectSuccess()
	if got, want := string(res.Stdout), "1000\n1000\n1\nusr read-only\n"; got != want {
		t.Errorf("stdout %q, want %q\n%v", got, want, res)
	}
}

// TestSnippetSeccompRefuses: a Go program's unshare(CLONE_NEWUSER) fails
// with EPERM, the run goes on, and the Result names the refusal.
func TestSnippetSeccompRefuses(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, snippetOpts)
	res := sb.Go(`package main

import (
	"fmt"
	"syscall"
)

func main() {
	_, _, errno := syscall.RawSyscall(syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER, 0, 0)
	fmt.Println("unshare:", errno == syscall.EPERM, errno)
}
`)
	res.ExpectSuccess().ExpectStdoutContains("unshare: true operation not permitted").ExpectDenied("unshare")
	for _, d := range res.Denials {
		if d.Syscall == "unshare" && (d.Errno != syscall.EPERM || d.Count != 1) {
			t.Errorf("denial %+v, want unshare refused once with EPERM", d)
		}
	}
}

// TestSnippetPythonWorkspace: what a Python program writes to /workspace
// is on the host, owned by the sandbox's host uid.
func TestSnippetPythonWorkspace(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, snippetOpts)
	sb.Python(`import json, os
json.dump({"uid": os.getuid(), "cwd": os.getcwd(), "squares": [i * i for i in range(4)]}, open("out.json", "w"))`).ExpectSuccess()
	file := filepath.Join(sb.Dir(), "out.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the snippet's file on the host: %v", err)
	}
	var got struct {
		UID     int
		Cwd     string
		Squares []int
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("out.json %q: %v", data, err)
	}
	if got.UID != sandbox.SandboxUID || got.Cwd != "/workspace" || len(got.Squares) != 4 || got.Squares[3] != 9 {
		t.Errorf("out.json = %s, want uid %d in /workspace and the squares 0..9", data, sandbox.SandboxUID)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	wantUID, _ := snippetOpts.HostIDs()
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != wantUID {
		t.Errorf("out.json is owned by host uid %d, want the sandbox's host uid %d", st.Uid, wantUID)
	}
}

// TestSnippetNoNetwork: a program can use loopback but reaches nothing
// beyond it.
func TestSnippetNoNetwork(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, snippetOpts)
	sb.Python(`import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname()); print("loopback ok")
try:
    socket.create_connection(("192.0.2.1", 80), timeout=5)
    print("reached the outside")
except OSError as e:
    print("outside:", e.errno)
`).ExpectSuccess().ExpectStdoutContains("loopback ok\noutside: 101\n") // ENETUNREACH
}
