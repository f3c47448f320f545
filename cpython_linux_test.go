//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CPython's own regression tests for the modules that talk to the OS run
// once on the host as an unprivileged user and once in a default sandbox;
// every test that passes on the host must pass in the sandbox, or be a
// known difference below with the reason it cannot.

// cpythonModules are the regression test modules run, in the order given
// to the test runner (the slowest first, so the parallel workers finish
// together). test_asyncio is run as its submodules, found at run time, so
// that they spread over the workers.
//
// Left out, to keep the test to a few minutes: test_multiprocessing's
// forkserver and spawn variants (a minute or more each, the same system
// calls as its fork variant, which is run) and test_concurrent_futures
// (over two minutes of process and thread pools), test_largefile (copies
// 2.5 GB of real data), and test_socketserver, test_timeout and the
// other modules that need the "network" resource (the Internet, which
// neither side has), and test_curses, which needs a terminal. Neither run
// has a terminal, so test_ioctl skips on both sides.
var cpythonModules = []string{
	"test_multiprocessing_fork", "test_signal", "test_ssl", "test_io",
	"test_subprocess", "test_socket", "test_asyncio", "test_logging", "test_faulthandler", "test_selectors",
	"test_threading", "test_poll", "test_os", "test_pty", "test_readline",
	"test_eintr", "test_wait3", "test_wait4", "test_time", "test_httpservers",
	"test_urllib2_localnet", "test_select", "test_fcntl", "test_tempfile",
	"test_shutil", "test_posix", "test_epoll", "test_mmap", "test_resource",
	"test_pwd", "test_grp", "test_ioctl", "test_file_eintr", "test_fileio",
	"test_getpass", "test_uuid", "test_platform", "test_stat", "test_pathlib",
	"test_glob", "test_posixpath", "test_genericpath", "test_syslog",
	"test_sysconfig", "test_popen", "test_pipes",
}

// cpythonKnownDifferences are the tests (path.Match patterns over test
// ids) that pass on the host and cannot in a default sandbox, by design.
// Each holds only while the test's result in the sandbox shows its
// symptom, so a test that fails there for another reason is reported.
var cpythonKnownDifferences = []struct{ pattern, symptom, reason string }{
	{"test.test_os.ChownFileTests.test_chown_without_permission", "[Errno 22] Invalid argument",
		"the sandbox's user namespace maps only its own uid and gid, so chown to another listed user's uid fails with EINVAL (no such id) where the host says EPERM"},
	{"test.test_subprocess.POSIXProcessTestCase.test_user", "[Errno 22] Invalid argument",
		"setreuid to uid 65534, which the sandbox's user namespace does not map, fails with EINVAL where the host says EPERM"},
	{"test.test_subprocess.POSIXProcessTestCase.test_group", "[Errno 22] Invalid argument",
		"setregid to gid 65534, which the sandbox's user namespace does not map, fails with EINVAL where the host says EPERM"},
	{"test.test_uuid.*.test_ip_getnode", "requires ip",
		"the sandbox's only network interface is loopback, whose MAC address is zero: `ip link` shows no MAC for uuid to use"},
	{"test.test_uuid.*.test_ifconfig_getnode", "requires ifconfig",
		"the sandbox's only network interface is loopback, whose MAC address is zero: `ifconfig` shows no MAC for uuid to use"},
	{"test.test_resource.ResourceTest.test_fsize_ismax", "AssertionError: -1 != ",
		"the sandbox sets a hard RLIMIT_FSIZE (Options.Limits.FileSize) and the test expects it unlimited"},
}

// cpythonJobs is the test runner's worker count on each side: most of
// these tests wait (on timers, children, sockets) rather than compute.
const cpythonJobs = 4

func TestCPythonRegressionTests(t *testing.T) {
	requireSandbox(t)
	const python = "/usr/bin/python3"
	out, err := exec.Command(python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Skipf("no %s on this host: %v", python, err)
	}
	version := strings.TrimSpace(string(out))
	testDir := "/usr/lib/python" + version + "/test"
	if _, err := os.Stat(filepath.Join(testDir, "test_os.py")); err != nil {
		t.Skipf("CPython's regression tests are not installed (%v): apt-get install libpython%s-testsuite", err, version)
	}
	modules := cpythonPresentModules(t, testDir)

	deadline := time.Now().Add(12 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-time.Minute).Before(deadline) {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	args := []string{python, "-m", "test", "-j", fmt.Sprint(cpythonJobs), "--timeout", "300", "-o"}

	// Both sides at once: the tests mostly wait, and CI's time is short.
	type side struct {
		results map[string]cpythonResult
		log     string
		took    time.Duration
		err     error
	}
	var host, sbx side
	s := newTest(t, cpythonOptions())
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		host.results, host.log, host.err = cpythonOnHost(ctx, slices.Concat(args, modules))
		host.took = time.Since(start)
	}()
	start := time.Now()
	var res *Result
	sbx.results, res, sbx.err = cpythonInSandbox(ctx, s, slices.Concat(args, modules), "cpython.xml")
	sbx.took = time.Since(start)
	if sbx.err != nil {
		cancel() // the host's run is of no use now
	}
	<-done
	if host.err != nil {
		t.Fatalf("on the host: %v\n%s", host.err, cpythonTail(host.log, 40))
	}
	if res != nil {
		sbx.log = string(res.Stdout) + string(res.Stderr)
	}
	if sbx.err != nil {
		t.Fatalf("in the sandbox: %v\n%s", sbx.err, cpythonTail(sbx.log, 40))
	}
	usage := "no cgroup measured its memory and CPU"
	if res.MemoryPeak > 0 {
		usage = fmt.Sprintf("its memory peaked at %d MiB, CPU %v", res.MemoryPeak>>20, res.CgroupCPU.Round(time.Second))
	}
	t.Logf("%d modules, -j%d: %v on the host, %v in the sandbox (side by side); %s",
		len(modules), cpythonJobs, host.took.Round(time.Second), sbx.took.Round(time.Second), usage)
	t.Logf("host:\n%s\nsandbox:\n%s", cpythonTail(host.log, 24), cpythonTail(sbx.log, 24))

	passed := 0
	var differ []string
	for _, id := range slices.Sorted(maps.Keys(host.results)) {
		if host.results[id].state != cpythonPassed {
			continue
		}
		passed++
		switch {
		case sbx.results[id].state != cpythonPassed:
			differ = append(differ, id)
		case cpythonKnown(id):
			t.Logf("known difference no longer differs, drop it from cpythonKnownDifferences: %s", id)
		}
	}
	if passed < 1000 {
		t.Fatalf("only %d tests passed on the host; the runner's log:\n%s", passed, cpythonTail(host.log, 60))
	}
	t.Logf("%d tests passed on the host; %d of them did not in the sandbox", passed, len(differ))
	if len(differ) == 0 {
		return
	}

	// Once more, alone and verbose: a test that failed only under the
	// load of the parallel run is told apart, and the verbose log has the
	// failures of subtests, which the runner's XML leaves out.
	again, res, err := cpythonRerun(ctx, s, args[:3], modules, differ)
	if err != nil {
		var log string
		if res != nil {
			log = string(res.Stdout) + string(res.Stderr)
		}
		t.Fatalf("rerunning %d tests in the sandbox: %v\n%s", len(differ), err, cpythonTail(log, 60))
	}
	var report strings.Builder
	failed := 0
	for _, id := range differ {
		got := again[id]
		if got.state == cpythonPassed {
			t.Logf("passed in the sandbox only when run again alone: %s (first: %s)", id, sbx.results[id].describe())
			continue
		}
		if reason := cpythonKnownReason(id, got.detail); reason != "" {
			t.Logf("known difference: %s: %s", id, reason)
			continue
		}
		failed++
		fmt.Fprintf(&report, "\n%s: %s\n", id, got.describe())
	}
	if failed > 0 {
		t.Errorf("%d tests that pass on the host as an unprivileged user did not pass in the sandbox (run alone, again), and are no known difference:%s", failed, report.String())
	}
}

// cpythonOptions are the sandbox's: the defaults, with room for the
// runner's workers and the files they make.
func cpythonOptions() Options {
	return Options{
		Limits: Limits{
			// The parallel run peaked at about 400 MiB here.
			Memory: 1 << 30,
			// The runner's workers, and the threads and children of their
			// tests.
			Pids: 1024,
			CPUs: cpythonJobs,
			// test_mmap's LargeMmapTests write sparse files of up to 6 GiB
			// (a few bytes of data each) in /tmp; Memory still bounds what
			// the files really hold.
			TmpSize: 8 << 30,
		},
	}
}

// cpythonPresentModules lists the modules of cpythonModules this testsuite
// has, with test_asyncio split into its submodules.
func cpythonPresentModules(t *testing.T, testDir string) []string {
	var mods, missing []string
	for _, m := range cpythonModules {
		if m == "test_asyncio" {
			subs, _ := filepath.Glob(filepath.Join(testDir, m, "test_*.py"))
			for _, sub := range subs {
				mods = append(mods, m+"."+strings.TrimSuffix(filepath.Base(sub), ".py"))
			}
			if len(subs) == 0 {
				missing = append(missing, m)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(testDir, m+".py")); err != nil {
			if _, err := os.Stat(filepath.Join(testDir, m, "__init__.py")); err != nil {
				missing = append(missing, m)
				continue
			}
		}
		mods = append(mods, m)
	}
	if len(missing) > 0 {
		t.Logf("not in this testsuite, so not run: %s", strings.Join(missing, " "))
	}
	return mods
}

// cpythonOnHost runs the test runner on the host as an unprivileged user
// (nobody when the test runs as root), in its own session without a
// terminal as in the sandbox, with the sandbox's environment.
func cpythonOnHost(ctx context.Context, args []string) (map[string]cpythonResult, string, error) {
	dir, err := os.MkdirTemp("", "sbxtest-cpython-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	attr := &syscall.SysProcAttr{Setsid: true}
	if os.Getuid() == 0 {
		if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
			return nil, "", err
		}
		attr.Credential = &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
	}
	xmlPath := filepath.Join(dir, "cpython.xml")
	cmd := exec.CommandContext(ctx, args[0], append(args[1:], "--junit-xml", xmlPath)...)
	cmd.Dir = dir
	cmd.Env = []string{defaultEnv[0], "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8"}
	cmd.SysProcAttr = attr
	// The runner's workers and their children are in its session.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 {
		err = nil // some tests failed: data
	}
	if err != nil {
		return nil, log.String(), err
	}
	results, err := cpythonParse(os.ReadFile(xmlPath))
	return results, log.String(), err
}

// cpythonInSandbox runs the test runner in s, writing its results to the
// workspace file xmlName, and returns them.
func cpythonInSandbox(ctx context.Context, s *Sandbox, args []string, xmlName string) (map[string]cpythonResult, *Result, error) {
	c := Command(args[0], append(args[1:], "--junit-xml", DefaultDir+"/"+xmlName)...)
	res, err := s.Run(ctx, c)
	switch {
	case err != nil:
		return nil, res, err
	case res.Outcome != Exited || (res.ExitCode != 0 && res.ExitCode != 2):
		return nil, res, fmt.Errorf("the test runner ended: %v (outcome %v, exit code %d)", res.Err(), res.Outcome, res.ExitCode)
	}
	results, err := cpythonParse(s.ReadFile(xmlName))
	return results, res, err
}

// cpythonRerun runs the tests ids of modules again in s, one at a time.
func cpythonRerun(ctx context.Context, s *Sandbox, runner, modules, ids []string) (map[string]cpythonResult, *Result, error) {
	if err := s.WriteFile("rerun.txt", []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
		return nil, nil, err
	}
	var mods []string
	for _, id := range ids {
		if m := cpythonModuleOf(id, modules); m != "" && !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	args := append(slices.Clone(runner), "-v", "--matchfile", DefaultDir+"/rerun.txt")
	results, res, err := cpythonInSandbox(ctx, s, append(args, mods...), "rerun.xml")
	if err != nil {
		return nil, res, err
	}
	for id, detail := range cpythonSubtestFailures(string(res.Stdout)) {
		if results[id].state == cpythonMissing {
			results[id] = cpythonResult{cpythonFailed, detail}
		}
	}
	return results, res, nil
}

// cpythonSubtestFailures reads the failures unittest lists at the end of
// a verbose run, each under a line of '=' as "ERROR: name (id) (subtest
// parameters)" and then its traceback, and returns each test's
// tracebacks by id.
func cpythonSubtestFailures(log string) map[string]string {
	failures := map[string]string{}
	for _, block := range strings.Split(log, "\n"+strings.Repeat("=", 70)+"\n")[1:] {
		head, tb, _ := strings.Cut(block, "\n"+strings.Repeat("-", 70)+"\n")
		kind, rest, _ := strings.Cut(head, ": ")
		_, rest, _ = strings.Cut(rest, " (")
		id, _, ok := strings.Cut(rest, ")")
		if (kind != "ERROR" && kind != "FAIL") || !ok {
			continue
		}
		tb, _, _ = strings.Cut(tb, "\n"+strings.Repeat("-", 70)+"\n")
		failures[id] += head + "\n" + tb
	}
	return failures
}

// cpythonModuleOf returns the module of modules a test id belongs to.
func cpythonModuleOf(id string, modules []string) string {
	best := ""
	for _, m := range modules {
		if strings.HasPrefix(id, "test."+m+".") && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// cpythonKnown says whether id is a known difference, whatever its
// symptom.
func cpythonKnown(id string) bool {
	for _, k := range cpythonKnownDifferences {
		if ok, _ := path.Match(k.pattern, id); ok {
			return true
		}
	}
	return false
}

// cpythonKnownReason is the reason of the known difference id is, if
// detail (its result in the sandbox) shows the symptom; else "".
func cpythonKnownReason(id, detail string) string {
	for _, k := range cpythonKnownDifferences {
		if ok, _ := path.Match(k.pattern, id); ok && strings.Contains(detail, k.symptom) {
			return k.reason
		}
	}
	return ""
}

type cpythonState int

const (
	cpythonMissing cpythonState = iota // no result: the test did not run
	cpythonPassed
	cpythonSkipped
	cpythonFailed
)

// cpythonResult is one test's outcome in a run; detail is the skip reason
// or the failure's traceback.
type cpythonResult struct {
	state  cpythonState
	detail string
}

func (r cpythonResult) describe() string {
	switch r.state {
	case cpythonPassed:
		return "passed"
	case cpythonSkipped:
		return "skipped: " + r.detail
	case cpythonFailed:
		return "failed:\n" + cpythonTail(r.detail, 8)
	}
	return "no result: its module did not run to the end (see the runner's log), or it failed in a subtest, which the runner's XML does not name"
}

// cpythonParse reads the runner's --junit-xml file: a testcase element per
// test (per failing subtest too, its id followed by the subtest's
// parameters), with a skipped, error or failure child unless it passed.
func cpythonParse(data []byte, err error) (map[string]cpythonResult, error) {
	if err != nil {
		return nil, fmt.Errorf("read the results: %w", err)
	}
	type fault struct {
		Text string `xml:",chardata"`
	}
	results := map[string]cpythonResult{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return results, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parse the results: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "testcase" {
			continue
		}
		var tc struct {
			Name    string `xml:"name,attr"`
			Skipped *fault `xml:"skipped"`
			Error   *fault `xml:"error"`
			Failure *fault `xml:"failure"`
		}
		if err := dec.DecodeElement(&tc, &se); err != nil {
			return nil, fmt.Errorf("parse the results: %w", err)
		}
		id, _, _ := strings.Cut(tc.Name, " ")
		if id == "" {
			continue
		}
		r := cpythonResult{state: cpythonPassed}
		switch {
		case tc.Error != nil:
			r = cpythonResult{cpythonFailed, tc.Error.Text}
		case tc.Failure != nil:
			r = cpythonResult{cpythonFailed, tc.Failure.Text}
		case tc.Skipped != nil:
			r = cpythonResult{cpythonSkipped, tc.Skipped.Text}
		}
		// A test whose subtests failed has a testcase for each failure;
		// the worst outcome stands.
		if prev, ok := results[id]; !ok || r.state > prev.state {
			results[id] = r
		}
	}
}

// cpythonTail is the last n lines of s.
func cpythonTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// TestCPythonResultsParse checks the readers of the runner's output on
// what CPython 3.11 writes, without running it.
func TestCPythonResultsParse(t *testing.T) {
	xmlData := `<testsuites tests="5" errors="1" failures="1"><testsuite tests="5">` +
		`<testcase name="test.test_os.A.test_ok" status="run" result="completed" time="0.1" />` +
		`<testcase name="test.test_os.A.test_skip" status="run" result="completed"><skipped>needs a tty</skipped></testcase>` +
		`<testcase name="test.test_os.A.test_err" status="run" result="completed"><system-out /><error type="OSError" message="OSError: [Errno 13]">Traceback&#10;OSError: [Errno 13] Permission denied</error></testcase>` +
		`<testcase name="test.test_os.A.test_fail" status="run" result="completed"><failure type="AssertionError" message="x">AssertionError: 1 != 2</failure></testcase>` +
		`<testcase />` +
		`</testsuite></testsuites>`
	got, err := cpythonParse([]byte(xmlData), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]cpythonState{
		"test.test_os.A.test_ok": cpythonPassed, "test.test_os.A.test_skip": cpythonSkipped,
		"test.test_os.A.test_err": cpythonFailed, "test.test_os.A.test_fail": cpythonFailed,
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d tests, want %d: %v", len(got), len(want), got)
	}
	for id, st := range want {
		if got[id].state != st {
			t.Errorf("%s: state %d, want %d", id, got[id].state, st)
		}
	}
	if !strings.Contains(got["test.test_os.A.test_err"].detail, "Permission denied") {
		t.Errorf("error detail %q lacks the traceback", got["test.test_os.A.test_err"].detail)
	}

	sep, dash := strings.Repeat("=", 70), strings.Repeat("-", 70)
	log := "test_user (test.test_subprocess.P.test_user) ... ERROR\n\n" +
		sep + "\nERROR: test_user (test.test_subprocess.P.test_user) (user=65534)\n" + dash + "\nTraceback\nOSError: [Errno 22] Invalid argument\n\n" +
		sep + "\nFAIL: test_x (test.test_os.B.test_x) (n=1)\n" + dash + "\nAssertionError\n\n" +
		dash + "\nRan 2 tests in 0.1s\n\nFAILED (errors=1)\n"
	subs := cpythonSubtestFailures(log)
	if len(subs) != 2 || !strings.Contains(subs["test.test_subprocess.P.test_user"], "[Errno 22]") ||
		!strings.Contains(subs["test.test_os.B.test_x"], "AssertionError") || strings.Contains(subs["test.test_os.B.test_x"], "Ran 2") {
		t.Errorf("subtest failures: %q", subs)
	}
	if r := cpythonKnownReason("test.test_subprocess.POSIXProcessTestCase.test_user", subs["test.test_subprocess.P.test_user"]); r == "" {
		t.Error("test_user failing with EINVAL is not the known difference")
	}
	if r := cpythonKnownReason("test.test_subprocess.POSIXProcessTestCase.test_user", "PermissionError: [Errno 13]"); r != "" {
		t.Error("test_user failing with EACCES passed as the known difference, whose symptom is EINVAL")
	}
}
