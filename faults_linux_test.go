//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// faultRounds is how many times TestCallerKilledAtRandom kills a caller:
// SANDBOX_FAULT_ROUNDS (make soak sets 200), else 12, or 4 with -short.
func faultRounds(t *testing.T) int {
	return testCount(t, "SANDBOX_FAULT_ROUNDS", 12, 4, 1)
}

// childrenOf lists the children of every thread of pid.
func childrenOf(pid int) []int {
	var kids []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(f); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestCallerKilledAtRandom: a caller running sandboxes from 4 goroutines is
// SIGKILLed at a random moment (before its first run, or while runs are
// being set up, running or torn down). Within a few seconds every process
// it started is gone (its spawner, its session keeper, every sandboxed
// process and their children), and so are the run cgroups named after its
// spawner and everything in its temp directory; the mounts it could have
// made on the host (testMounts) are as before. An InProcess caller's run
// cgroups go when the next process on the host starts a sandbox
// (InProcess says so).
func TestCallerKilledAtRandom(t *testing.T) {
	requireSandbox(t)
	mounts := readMountInfo(t, "/proc/self/mountinfo")
	for round := range faultRounds(t) {
		m := marker(t)
		tmp := sharedTempDir(t)
		// Odd rounds build sandboxes in the caller itself (InProcess).
		mode := []string{"spawner", "inprocess"}[round%2]
		cmd := exec.Command("/proc/self/exe", m, mode)
		cmd.Env = append(os.Environ(), helperEnv+"=runloop", "TMPDIR="+tmp)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A quarter of the rounds kill during the first run's setup (the
		// spawner and keeper starting); the rest once runs are flowing.
		var when string
		if round%4 == 0 {
			d := time.Duration(rand.IntN(60)) * time.Millisecond
			time.Sleep(d)
			when = fmt.Sprintf("%v after start", d)
		} else {
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: caller said %q", round, line)
			}
			d := time.Duration(rand.IntN(150)) * time.Millisecond
			time.Sleep(d)
			when = fmt.Sprintf("%v after its first run", d)
		}
		kids := childrenOf(cmd.Process.Pid)
		running := len(hostProcesses(m))
		cmd.Process.Kill()
		cmd.Wait()
		var left []string
		gone := func(withCgroups bool) bool {
			left = left[:0]
			for _, k := range kids {
				if alive(k) {
					b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k))
					left = append(left, fmt.Sprintf("child %d %q", k, b))
				}
			}
			for _, p := range hostProcesses(m) {
				left = append(left, fmt.Sprintf("sandboxed %d", p))
			}
			if n := countDir(tmp); n != 0 {
				left = append(left, fmt.Sprintf("%d entries in its TMPDIR", n))
			}
			if withCgroups {
				for _, c := range cgroupsMadeBy(t, append(kids, cmd.Process.Pid)...) {
					left = append(left, "cgroup "+c)
				}
			}
			return len(left) == 0
		}
		// A caller that made its run cgroups itself (InProcess) cannot
		// remove them once killed: the next sandbox process does.
		if mode == "inprocess" {
			if !waitFor(func() bool { return gone(false) }) {
				t.Errorf("round %d, caller killed %s: left behind %v", round, when, left)
			}
			next := exec.Command("/proc/self/exe")
			next.Env = append(os.Environ(), helperEnv+"=once", "TMPDIR="+tmp)
			if out, err := next.CombinedOutput(); err != nil {
				t.Fatalf("round %d: the next sandbox process: %v\n%s", round, err, out)
			}
		}
		if !waitFor(func() bool { return gone(true) }) {
			t.Errorf("round %d, caller killed %s: left behind %v", round, when, left)
		}
		// The keeper (and the spawner), once the first run is done: else
		// this round checked less than it claims.
		if want := map[string]int{"spawner": 2, "inprocess": 1}[mode]; round%4 != 0 && len(kids) < want {
			t.Errorf("round %d: the caller (%s) had children %v at its death, want its keeper and spawner", round, mode, kids)
		}
		t.Logf("round %d (%s): killed %s, with %d children and %d sandboxed processes", round, mode, when, len(kids), running-1) // the caller carries the marker too
	}
	// Judged with every round's directories, made since the first reading.
	dirs := testDirs(t)
	if before, after := ownMounts(mounts, dirs), ownMounts(readMountInfo(t, "/proc/self/mountinfo"), dirs); !slices.Equal(after, before) {
		t.Errorf("the test's mounts in this process's mount table went from %q to %q", before, after)
	}
}

// TestMappedStartsOneAtATime: while one child with id maps is being
// started through os/exec (a rootless workspace keeper is), no other is
// (mappedStarts says why): startChild waits for the lock.
func TestMappedStartsOneAtATime(t *testing.T) {
	requireSandbox(t)
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	mappedStarts.Lock()
	done := make(chan error, 1)
	go func() { done <- startChild(cmd) }()
	select {
	case err := <-done:
		mappedStarts.Unlock()
		t.Fatalf("startChild returned (%v) while another mapped start held the lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	mappedStarts.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
