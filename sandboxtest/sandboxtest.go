package sandboxtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fumehood/sandbox"
)

// DefaultTimeout bounds each run of a Sandbox whose Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Sandbox runs snippets for one test. It is safe for concurrent use by the
// goroutines of that test; make a new one in each subtest, as its failures
// and skips are reported to the test given to New.
type Sandbox struct {
	// Timeout bounds each run; zero means DefaultTimeout. A run is also
	// ended in time for the test to report it before the test binary's
	// -timeout. A run that times out is a Result with Outcome
	// sandbox.Timeout, not a failure by itself. Set it before running.
	Timeout time.Duration

	tb   testing.TB
	opts sandbox.Options // with Workspace set to dir
	sb   *sandbox.Sandbox
	dir  string

	// run starts one program; tests of this package replace it to see how
	// a refusal is handled.
	run func(sb *sandbox.Sandbox, ctx context.Context, cmd *sandbox.Cmd) (*sandbox.Result, error)

	// progs serves Go, GoFile and Binary; the first of them makes it.
	progOnce sync.Once
	progs    *programs
	progErr  error
}

// New returns a Sandbox for the test tb, built from opts with a workspace
// of tb.TempDir() at /workspace (so opts.Workspace must be empty), and
// closed by tb.Cleanup. It skips the test, saying what is missing, when
// sandbox.Probe finds that this host cannot build sandboxes, or that no
// cgroup can hold the runs' limits while opts.LimitPolicy asks for them to
// be enforced (set sandbox.BestEffortLimits to run with rlimits instead).
// Options the sandbox package rejects fail the test.
//
// When the test runs as root, the sandbox's user is host uid 65534 unless
// opts.HostUID says otherwise (see sandbox.Options.HostIDs): New gives the
// workspace to that uid. Files the test puts there stay the test's; make
// them writable by others if a snippet must change them.
func New(tb testing.TB, opts sandbox.Options) *Sandbox {
	tb.Helper()
	return newSandbox(tb, opts, probeOnce)
}

// probeOnce probes the host once per process: the answer does not change
// while the tests run, and each probe starts several processes.
var probeOnce = sync.OnceValues(sandbox.Probe)

// newSandbox is New with the probe given, so that tests can show the skip.
func newSandbox(tb testing.TB, opts sandbox.Options, probe func() (*sandbox.ProbeReport, error)) *Sandbox {
	tb.Helper()
	report, err := probe()
	if err != nil {
		tb.Fatalf("sandboxtest: probe the host: %v", err)
		return nil
	}
	if why := skipReason(report, opts); why != "" {
		tb.Skip(why)
		return nil
	}
	if opts.Workspace != nil {
		tb.Fatalf("sandboxtest: Options.Workspace %#v: New sets it to a directory of the test's own; leave it nil", opts.Workspace)
		return nil
	}
	uid, gid := opts.HostIDs()
	dir, err := workspaceDir(tb, uid, gid)
	if err != nil {
		tb.Fatalf("sandboxtest: %v", err)
		return nil
	}
	opts.Workspace = sandbox.HostWorkspace{Dir: dir}
	sb := sandbox.New(opts)
	if err := sb.Err(); err != nil {
		tb.Fatalf("sandboxtest: %v", err)
		return nil
	}
	tb.Cleanup(func() { closeSandbox(tb, sb) })
	return &Sandbox{tb: tb, opts: opts, sb: sb, dir: dir, run: (*sandbox.Sandbox).Run}
}

func closeSandbox(tb testing.TB, sb *sandbox.Sandbox) {
	if err := sb.Close(); err != nil {
		tb.Errorf("sandboxtest: close the sandbox: %v", err)
	}
}

// Dir returns the host directory that the sandbox sees as /workspace, the
// working directory of every run: put a snippet's input files there and
// read what it wrote.
func (s *Sandbox) Dir() string { return s.dir }

// Run runs cmd and returns its Result. It ends the test with Fatalf when
// the program could not be run (not found, or the sandbox could not be
// built), and skips it when the host cannot provide a protection the
// Options ask for (an error matching sandbox.ErrNotSupported).
func (s *Sandbox) Run(cmd *sandbox.Cmd) *Result {
	s.tb.Helper()
	return s.runIn(s.sb, cmd)
}

// Shell runs script with sh -c.
func (s *Sandbox) Shell(script string) *Result {
	s.tb.Helper()
	return s.Run(sandbox.Command("sh", "-c", script))
}

// Python runs code with python3 -c, and skips the test when the sandbox
// has no python3 (it sees the host's /usr, or Options.Root).
func (s *Sandbox) Python(code string) *Result {
	s.tb.Helper()
	r, err := s.start(s.sb, sandbox.Command("python3", "-c", code))
	if errors.Is(err, sandbox.ErrNotFound) {
		s.tb.Skipf("sandboxtest: no python3 in the sandbox (install it on the host's /usr): %v", err)
		return r
	}
	return s.check(r, err)
}

// runIn runs cmd in sb and checks how that went.
func (s *Sandbox) runIn(sb *sandbox.Sandbox, cmd *sandbox.Cmd) *Result {
	s.tb.Helper()
	return s.check(s.start(sb, cmd))
}

// start runs cmd in sb under the Sandbox's timeout.
func (s *Sandbox) start(sb *sandbox.Sandbox, cmd *sandbox.Cmd) (*Result, error) {
	timeout := runTimeout(s.Timeout, s.tb, time.Now())
	ctx, cancel := context.WithTimeout(s.tb.Context(), timeout)
	defer cancel()
	res, err := s.run(sb, ctx, cmd)
	return &Result{Result: res, tb: s.tb, cmd: cmd, timeout: timeout}, err
}

// check turns a run's error into the test's verdict: a run ended by its
// context (a timeout) is data, a Result with no error; a protection the
// host lacks skips; any error means the snippet never ran as asked, and
// fails the test.
func (s *Sandbox) check(r *Result, err error) *Result {
	s.tb.Helper()
	switch {
	case err == nil:
	case errors.Is(err, sandbox.ErrNotSupported):
		s.tb.Skipf("sandboxtest: this host cannot run the sandbox: %v", err)
	case r.Result != nil:
		s.tb.Fatalf("sandboxtest: run %s: %v\n%s", commandLine(r.cmd), err, r)
	default:
		s.tb.Fatalf("sandboxtest: run %s: %v", commandLine(r.cmd), err)
	}
	return r
}

// deadliner is the part of *testing.T that testing.TB lacks.
type deadliner interface {
	Deadline() (time.Time, bool)
}

// runTimeout is the timeout of a run starting at now: timeout or its
// default, cut to leave a tenth of the time before the test binary's
// deadline (when tb has one) for the test to report the run.
func runTimeout(timeout time.Duration, tb testing.TB, now time.Time) time.Duration {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if d, ok := tb.(deadliner); ok {
		if deadline, ok := d.Deadline(); ok {
			if left := deadline.Sub(now) * 9 / 10; left < timeout {
				timeout = max(left, time.Millisecond)
			}
		}
	}
	return timeout
}
