//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/testsupport/attack"
	"golang.org/x/sys/unix"
)

// Helper programs, the os/exec way: the test binary re-run with
// SBXTEST_HELPER=name runs one of these instead of the tests. Inside a
// sandbox the binary is bound at helperPath.
const helperEnv = "SBXTEST_HELPER"

// helperPath is where sandboxHelper binds the test binary inside a sandbox.
const helperPath = "/opt/sbxtest/helper"

var helpers = map[string]func(args []string) int{
	// attack runs one of the escape suite's attacks (internal/testsupport/attack).
	"attack": attack.Main,
	// netifs prints each network interface and whether it is up.
	"netifs": func([]string) int {
		ifs, err := net.Interfaces()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, i := range ifs {
			fmt.Printf("%s up=%v\n", i.Name, i.Flags&net.FlagUp != 0)
		}
		return 0
	},
	// env prints the environment, one variable a line.
	"env": func([]string) int {
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return 0
	},
	// segv dies of SIGSEGV with the default action, bypassing the Go
	// runtime's handler, as a crashing C program would.
	"segv": func([]string) int {
		var act [4]uint64 // struct sigaction with SIG_DFL
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
		var p *int
		fmt.Println(*p)
		return 0
	},
	// nouserns forbids user namespaces beneath its own (it runs as root of
	// a user namespace of its own), then reports what Run and Probe say.
	"nouserns": func([]string) int {
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
			fmt.Println("setup:", err)
			return 1
		}
		// Best effort: no cgroup is writable here, and the missing user
		// namespace is what this case is about.
		_, err := New(Options{Limits: Limits{Policy: BestEffortLimits}}).Run(context.Background(), Command("true"))
		fmt.Printf("notsupported=%v\n%v\n", errors.Is(err, ErrNotSupported), err)
		r, err := Probe()
		if err != nil {
			fmt.Println("probe:", err)
			return 1
		}
		fmt.Printf("canrun=%v\n", r.CanRun())
		return 0
	},
	// hog allocates and touches memory 1 MiB at a time, up to 4 GiB.
	"hog": func([]string) int {
		var keep [][]byte
		for i := 0; i < 4096; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
		return 0
	},
	// spin burns CPU on one thread for the given wall time.
	"spin": func(args []string) int {
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return 2
		}
		n := 0
		for end := time.Now().Add(d); time.Now().Before(end); {
			n++
		}
		fmt.Println(n > 0)
		return 0
	},
	// shm creates 16 MiB SysV shared memory segments and touches them,
	// up to 4 GiB.
	"shm": func([]string) int {
		for i := 0; i < 256; i++ {
			id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 16<<20, unix.IPC_CREAT|0o600)
			if err != nil {
				fmt.Println("shmget:", err)
				return 1
			}
			b, err := unix.SysvShmAttach(id, 0, 0)
			if err != nil {
				fmt.Println("shmat:", err)
				return 1
			}
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
		}
		fmt.Println("4 GiB of shm")
		return 0
	},
	// fill writes zeros to a file until a write fails, and prints the
	// error's name, then on stderr how many bytes it wrote.
	"fill": func(args []string) int {
		f, err := os.Create(args[0])
		if err != nil {
			fmt.Println(err)
			return 1
		}
		buf := make([]byte, 1<<16)
		written := 0
		for {
			n, err := f.Write(buf)
			written += n
			if err != nil {
				if errors.Is(err, unix.ENOSPC) {
					fmt.Println("ENOSPC")
				} else {
					fmt.Println(err)
				}
				fmt.Fprintln(os.Stderr, written)
				return 0
			}
		}
	},
	// nocgroup reports how Run behaves without a writable cgroup.
	"nocgroup": func([]string) int {
		fmt.Print(noCgroupReport())
		return 0
	},
	// runloop runs sandboxes without end from 4 goroutines of one Sandbox,
	// each a shell with the marker args[0] in its environment that sleeps
	// 0-40 ms, and prints "ready" once the first has finished: a caller to
	// be killed at a random point of a run's setup, run or teardown.
	// With args[1] "inprocess" it builds sandboxes without the spawner.
	"runloop": func(args []string) int {
		s := New(testOpts(Options{Start: inProcessIf(len(args) > 1 && args[1] == "inprocess")}))
		var once sync.Once
		for g := range 4 {
			go func() {
				for i := 0; ; i++ {
					c := Command("/bin/sh", "-c", fmt.Sprintf("sleep 0.0%d", (g+i)%5))
					c.Env = []string{"SBXTEST_MARKER=" + args[0]}
					if _, err := s.Run(context.Background(), c); err != nil {
						fmt.Println("Run:", err)
						os.Exit(1)
					}
					once.Do(func() { fmt.Println("ready") })
				}
			}()
		}
		select {}
	},
	// once runs one sandbox in process and exits: a new process on the
	// host, which removes the run cgroups of killed callers.
	"once": func([]string) int {
		_, err := New(testOpts(Options{Start: InProcess{}, Workspace: FreshWorkspace{}})).Run(context.Background(), Command("true"))
		if err != nil {
			fmt.Println("Run:", err)
			return 1
		}
		return 0
	},
	// caller runs a sandboxed "sleep N.25" from a host process, prints
	// "ready" once it runs and waits to be killed. (The marker N.25 is not
	// in the caller's own command line.)
	// liveoom lowers its own oom_score_adj to -900, so that the spawner it
	// starts inherits it, and prints what a process entering a live
	// sandbox reads as its own.
	"liveoom": func([]string) int {
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-900"), 0); err != nil {
			fmt.Println("skip:", err)
			return 0
		}
		s := New(testOpts(Options{Live: &Live{}}))
		defer s.Close()
		res, err := s.Run(context.Background(), Command("cat", "/proc/self/oom_score_adj"))
		if err != nil {
			fmt.Println("Run:", err)
			return 1
		}
		fmt.Printf("%s", res.Stdout)
		return 0
	},
	// With "live", the sleep is a background process of a live
	// sandbox's call that has returned.
	"caller": func(args []string) int {
		mode := ""
		if len(args) > 1 {
			mode = args[1]
		}
		s := New(testOpts(Options{Start: inProcessIf(mode == "inprocess"), Live: liveIf(mode == "live", Live{})}))
		marker := args[0] + ".25"
		go func() {
			cmd := Command("/bin/sleep", marker)
			if mode == "live" {
				cmd = Command("/bin/sh", "-c", "/bin/sleep "+marker+" >/dev/null 2>&1 &")
			}
			_, err := s.Run(context.Background(), cmd)
			if mode != "live" || err != nil { // a live call returns at once
				fmt.Println("Run returned:", err)
			}
		}()
		if !waitFor(func() bool { return len(hostProcesses(marker)) > 0 }) {
			fmt.Println("sandboxed sleep never appeared")
			return 1
		}
		fmt.Println("ready")
		select {}
	},
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		h := helpers[name]
		if h == nil {
			fmt.Fprintf(os.Stderr, "no helper %q\n", name)
			os.Exit(2)
		}
		os.Exit(h(os.Args[1:]))
	}
	code := m.Run()
	if line := poolSummary(); line != "" {
		fmt.Println(line)
	}
	if helperCopy.path != "" {
		os.RemoveAll(filepath.Dir(helperCopy.path))
	}
	removeEscapeImage()
	os.Exit(code)
}

var probeOnce struct {
	sync.Once
	r   *ProbeReport
	err error
}

// requireSandbox skips the test when this host cannot build sandboxes, and
// says which layer is missing.
func requireSandbox(t testing.TB) {
	t.Helper()
	probeOnce.Do(func() { probeOnce.r, probeOnce.err = Probe() })
	if probeOnce.err != nil {
		t.Fatalf("Probe: %v", probeOnce.err)
	}
	if !probeOnce.r.CanRun() {
		t.Skipf("this host cannot build sandboxes:\n%s", probeOnce.r)
	}
}

var helperCopy struct {
	sync.Once
	path string
	err  error
}

// helperBind returns a Bind that puts a copy of the test binary at
// helperPath, readable by the sandbox's host uid.
func helperBind(t testing.TB) Bind {
	t.Helper()
	helperCopy.Do(func() {
		dir, err := os.MkdirTemp("", "sbxtest-helper-")
		if err != nil {
			helperCopy.err = err
			return
		}
		os.Chmod(dir, 0o755)
		addMadeDir(dir)
		helperCopy.path = filepath.Join(dir, "helper")
		helperCopy.err = copyFile("/proc/self/exe", helperCopy.path, 0o755)
	})
	if helperCopy.err != nil {
		t.Fatalf("copy test binary: %v", helperCopy.err)
	}
	return Bind{Source: helperCopy.path, Target: helperPath}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// helperCmd runs helper name inside the sandbox.
func helperCmd(name string, args ...string) *Cmd {
	c := Command(helperPath, args...)
	c.Env = []string{helperEnv + "=" + name}
	return c
}

// hostProcesses lists host pids whose command line or environment holds
// marker: a sandboxed program's children inherit its environment, so none
// escapes the search by changing its argv.
func hostProcesses(marker string) []int {
	var pids []int
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", de.Name(), f))
			if err == nil && strings.Contains(string(b), marker) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// requirePrograms skips a test that runs programs the host (whose /usr
// and /bin the sandbox shows) does not have, as the VM's busybox userland.
func requirePrograms(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if !installedUnderUsr(name) {
			t.Skipf("%s is not installed under /usr/bin or /bin, and the test runs it in the sandbox", name)
		}
	}
}

// ownProcesses is hostProcesses narrowed to this process's descendants,
// for markers that other programs' sandboxes on the host carry too.
func ownProcesses(marker string) []int {
	var pids []int
	for _, pid := range hostProcesses(marker) {
		for p := pid; p > 1; {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			if err != nil {
				break
			}
			// The parent follows the command's closing parenthesis.
			fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			if len(fields) < 2 {
				break
			}
			if p, err = strconv.Atoi(fields[1]); err != nil {
				break
			}
			if p == os.Getpid() {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitFor polls cond for up to 10 s.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

var cgroupCheck struct {
	sync.Once
	err error
}

// cgroupErr says why this process cannot make cgroups for runs, or nil.
func cgroupErr() error {
	cgroupCheck.Do(func() {
		g, err := cgroup.New("", fmt.Sprintf("sbxtest-check-%d", os.Getpid()), cgroup.Limits{Pids: 16})
		if err == nil {
			err = g.Delete()
		}
		cgroupCheck.err = err
	})
	return cgroupCheck.err
}

// testOpts is o with best-effort limits where this process cannot make
// cgroups (an unprivileged user on a cgroup v1 host), so the tests that are
// not about limits run everywhere.
func testOpts(o Options) Options {
	if cgroupErr() != nil {
		o.Limits.Policy = BestEffortLimits
	}
	return o
}

// testPool, from SANDBOX_TEST_POOL, is the Pool.Size that newTest gives
// every Sandbox that can have one: make test runs the core and escape
// tests so too, to show that a pooled run is as isolated as a cold one.
var testPool, _ = strconv.Atoi(os.Getenv("SANDBOX_TEST_POOL"))

// poolTests are the top-level tests that asked newTest for a Sandbox while
// testPool was set, each true once one of its Sandboxes was pooled, so
// that the pooled pass can say how much of it ran pooled.
var poolTests sync.Map // test name → bool

// notePoolTest records that t asked newTest for a Sandbox, and whether
// that Sandbox's pool was filled.
func notePoolTest(t testing.TB, filled bool) {
	name, _, _ := strings.Cut(t.Name(), "/")
	if v, loaded := poolTests.LoadOrStore(name, filled); loaded && filled && !v.(bool) {
		poolTests.Store(name, true)
	}
}

// poolSummary is the pooled pass's count line, or "" without testPool.
func poolSummary() string {
	if testPool <= 0 {
		return ""
	}
	asked, pooled := 0, 0
	poolTests.Range(func(_, v any) bool {
		asked++
		if v.(bool) {
			pooled++
		}
		return true
	})
	return fmt.Sprintf("SANDBOX_TEST_POOL=%d: %d tests asked newTest for a Sandbox, %d of them got a filled pool", testPool, asked, pooled)
}

// newColdTest is a Sandbox with testOpts, closed when the test ends, that
// testPool never pools: for a test whose Runs cannot take a prepared
// sandbox (a terminal, a program too large for the prepared one) or that
// counts what the spawner holds. The pooled pass leaves out a test that
// builds its Sandboxes only so.
func newColdTest(t testing.TB, o Options) *Sandbox {
	s := New(testOpts(o))
	t.Cleanup(func() { s.Close() })
	return s
}

// newTest is a Sandbox with testOpts, closed when the test ends. With
// testPool its pool is full before it is returned, and the test fails if
// none of its Runs took a prepared sandbox.
func newTest(t testing.TB, o Options) *Sandbox {
	o = testOpts(o)
	r := resolve(o)
	pooled := testPool > 0 && o.Start == nil && r.Network != netAllow && !r.bindsInWorkspace()
	if pooled {
		o.Start = Pool{Size: testPool}
	}
	s := New(o)
	filled := false
	if pooled && s.Err() == nil {
		// A preparation may fail as the test's Runs are meant to.
		err := s.fillPool()
		filled = err == nil
		if err != nil {
			t.Logf("SANDBOX_TEST_POOL: the pool was not filled: %v", err)
		}
	}
	if testPool > 0 {
		notePoolTest(t, filled)
	}
	t.Cleanup(func() {
		if o.Live != nil {
			// A live sandbox's init, a run that took a prepared
			// sandbox, is counted when it ends.
			s.Close()
		}
		runs, pooledRuns := runsOf(s)
		s.Close()
		if filled && runs > 0 && pooledRuns == 0 {
			t.Errorf("SANDBOX_TEST_POOL=%d: none of the %d Runs took a prepared sandbox", testPool, runs)
		}
	})
	return s
}
