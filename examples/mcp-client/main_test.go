package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/examples/internal/exampletest"
	"golang.org/x/sys/unix"
)

// TestMCPClient runs the example and checks that its output tells the
// story: the tools listed, a program written and run, a failing run as a
// tool error with its traceback, a background process seen and ended by
// SIGTERM, a deleted file brought back by a restore, the server's end when
// the session closed, and an audit trail with a start and an end for each
// call that ran a program. Then it checks that nothing the example
// started is left: neither the server nor its spawner, keeper or
// sandboxes' programs.
func TestMCPClient(t *testing.T) {
	exampletest.RequirePython(t)
	// A child subreaper: what the server leaves when it exits is
	// reparented to this process, not to the host's init, so that the
	// check below still finds it among this process's descendants.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	var out bytes.Buffer
	err := run(&out)
	t.Logf("the example printed:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"== started sandbox mcp --live --best-effort --audit ",
		` over stdio: server "sandbox" version `,
		"== tools/list: 12 tools\n",
		"\n   start_process   Start a command in the session's sandbox",
		"== write_file primes.py\n   wrote primes.py (183 bytes)\n",
		"== run python3 primes.py 50\n   exited with code 0 ",
		"== stdout, from the structured result: 2 3 5 7 11 13 17 19 23 29 31 37 41 43 47\n",
		"== stdout, from the structured result: 76127\n",
		"== run python3 primes.py fifty (a tool error)\n   exited with code 1 ",
		"   ValueError: invalid literal for int() with base 10: 'fifty'\n",
		"== start_process python3 ticker.py\n   started pid ",
		"== list_processes\n   pid ",
		// The kernel's state of the process is whatever it was doing at
		// that moment; the background list says whether it still runs.
		"   background pid ",
		" (running): python3 ticker.py\n",
		"== read_file ticks.txt: ",
		"the ticker works between calls\n",
		"== signal_process ",
		"   sent SIGTERM to pid ",
		" ended by SIGTERM; 0 processes left in the sandbox\n",
		"== snapshot before-delete\n   snapshot before-delete taken\n",
		"== delete_file primes.py\n   deleted primes.py\n",
		"== read_file primes.py (a tool error)\n",
		"no such file in the workspace",
		"== restore before-delete\n   workspace restored to snapshot before-delete\n",
		"== read_file primes.py after the restore: the 183 bytes written are back\n",
		"== closed the session: the server ended (exit status 0), and its sandbox with it\n",
		"   live start   1\n   run end      4\n   run start    4\n",
		"== its runs, one for each call that ran a program:\n" +
			"   run           python3 primes.py 50 -> exited 0\n" +
			"   run_code      python3 -c import primes; print(sum(primes.primes(1000))) -> exited 0\n" +
			"   run           python3 primes.py fifty -> exited 1\n" +
			"   start_process python3 ticker.py -> signaled (terminated)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if left := leftovers(10 * time.Second); len(left) > 0 {
		t.Errorf("processes the example started still run after it returned: %v", left)
	}
}

// leftovers waits up to d for this process's descendants to end and
// returns those still alive, by pid, with their command lines. Zombies
// have ended: they are only not yet reaped.
func leftovers(d time.Duration) map[int]string {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		left := map[int]string{}
		for pid, p := range exampletest.Descendants() {
			if p.Alive {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left[pid] = strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " ")
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}
