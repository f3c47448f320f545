package execshim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holding is a shim started in hold mode.
type holding struct {
	cmd    *exec.Cmd
	report *os.File   // the read end of its report pipe
	exited chan error // cmd.Wait's result, once it has exited
}

// startHolding starts the shim at path (with prefix as shimRunner
// returned it) with argv, in a new PID namespace if cloneflags says so,
// and ends it with SIGKILL when the test ends if it still runs.
func startHolding(t *testing.T, path string, prefix, argv []string, cloneflags uintptr) *holding {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd := shimCommand(path, prefix, argv, w)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	h := &holding{cmd: cmd, report: r, exited: make(chan error, 1)}
	go func() { h.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-h.exited
	})
	return h
}

// runs checks that the shim closed its report fd without writing to it,
// and still runs a while after: that it holds.
func (h *holding) runs(t *testing.T) {
	t.Helper()
	h.report.SetReadDeadline(time.Now().Add(reportWait))
	report, err := io.ReadAll(h.report)
	if err != nil {
		t.Fatalf("the report fd was not closed: %v", err)
	}
	if len(report) != 0 {
		t.Fatalf("it reported %q; want nothing", report)
	}
	select {
	case err := <-h.exited:
		h.exited <- err // for the cleanup
		t.Fatalf("it ended (%v); want it to hold", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// signalled sends sig and checks that it ends the shim.
func (h *holding) signalled(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-h.exited:
		h.exited <- err // for the cleanup
	case <-time.After(reportWait):
		t.Fatalf("after %v: it still runs; want it ended by the signal", sig)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("after %v: %v; want it ended by the signal", sig, err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
		t.Fatalf("after %v: %v; want it ended by the signal", sig, ee)
	}
}

// ignored is the set of signals /proc/pid/status says pid ignores.
func ignored(t *testing.T, pid int) uint64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("SigIgn %q: %v", v, err)
			}
			return set
		}
	}
	t.Fatalf("no SigIgn in /proc/%d/status", pid)
	return 0
}

// With no places, the shim execs nothing: it closes the report fd,
// ignores SIGCHLD, and holds until a signal without a handler ends it.
func TestHold(t *testing.T) {
	const sigchld = uint64(1) << (syscall.SIGCHLD - 1)
	if ignored(t, os.Getpid())&sigchld != 0 {
		t.Fatal("this test ignores SIGCHLD itself, and its children would inherit that")
	}
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			path, prefix := shimRunner(t, goarch)
			cases := []struct {
				name string
				argv []string
				end  syscall.Signal
			}{
				{"HoldArgs, ended by SIGTERM", HoldArgs(5), syscall.SIGTERM},
				{"HoldArgs, ended by SIGKILL", HoldArgs(5), syscall.SIGKILL},
				{"no places, then a program's argv", Args(5, nil, []string{"sh", "-c", "echo ran"}), syscall.SIGTERM},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					h := startHolding(t, path, prefix, c.argv, 0)
					h.runs(t)
					// qemu-user keeps the guest's signal actions itself:
					// the host's /proc shows the emulator's, which follow
					// the guest's only as far as qemu chooses.
					// TestHoldReapsOrphans checks the effect there.
					if prefix == nil {
						if ignored(t, h.cmd.Process.Pid)&sigchld == 0 {
							t.Error("SIGCHLD is not ignored")
						}
					} else {
						t.Logf("SIGCHLD's action not checked under %s: the host's /proc shows the emulator's actions", prefix[0])
					}
					h.signalled(t, c.end)
				})
			}
		})
	}
}

// As its PID namespace's init, the holding shim becomes the parent of
// every orphan there, and none stays a zombie when it exits. Under
// qemu-user the emulator is that init, and keeps the guest's SIG_IGN as
// its own, since only the kernel can reap as the guest asked.
func TestHoldReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a new PID namespace without a user namespace needs root")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skipf("entering the shim's PID namespace needs nsenter (Debian: util-linux): %v", err)
	}
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			path, prefix := shimRunner(t, goarch)
			h := startHolding(t, path, prefix, HoldArgs(5), syscall.CLONE_NEWPID)
			h.runs(t)
			reapsOrphan(t, nsenter, h.cmd.Process.Pid)
			h.signalled(t, syscall.SIGKILL)
		})
	}
}

// reapsOrphan makes an orphan in the PID namespace whose init is pid,
// kills it, and checks that it does not stay a zombie.
func reapsOrphan(t *testing.T, nsenter string, pid int) {
	t.Helper()
	// A shell in the namespace (nsenter forks into it) starts sleep and
	// exits: sleep is then an orphan of the namespace, the init's child.
	out, err := exec.Command(nsenter, "--target", strconv.Itoa(pid), "--pid",
		"sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	children := childrenOf(t, pid)
	if len(children) != 1 {
		t.Fatalf("the init's children: %v; want the orphaned sleep only", children)
	}
	orphan := children[0]
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", orphan)); string(cmdline) != "sleep\x001000\x00" {
		t.Fatalf("the init's child %d runs %q; want the orphaned sleep", orphan, cmdline)
	}

	// Once it dies, it is gone: the kernel reaped it, no zombie waits for
	// the init.
	if err := syscall.Kill(orphan, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(reportWait)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", orphan))
		// A process being released still has its /proc directory for a
		// moment, but reading it then fails with ESRCH.
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command's closing parenthesis.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			t.Fatalf("the killed orphan %d stays a zombie: %s", orphan, stat)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed orphan %d is still there: %s", orphan, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if children := childrenOf(t, pid); len(children) != 0 {
		t.Fatalf("the init's children after its orphan died: %v; want none", children)
	}
}

// childrenOf lists pid's children, as the host sees them.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("children %q: %v", b, err)
		}
		pids = append(pids, n)
	}
	return pids
}
