package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/access"
)

// writeGrace is how long past its timeout a run's answer may take to
// write: a client that stops reading its stream holds its slot no longer.
const writeGrace = 10 * time.Second

// interpreters are the request's languages and how code in each is run.
var interpreters = map[string][]string{"sh": {"sh", "-c"}, "bash": {"bash", "-c"}, "python": {"python3", "-c"}}

// sandboxPath is the sandbox's default PATH. The sandbox sees the host's
// /usr, /bin and /sbin read-only, so a program is in it when the host has
// it there.
var sandboxPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// hostLanguages says which interpreters a sandbox on this host can run.
func hostLanguages() map[string]language {
	langs := map[string]language{}
	for name, argv := range interpreters {
		l := language{argv: argv, missing: fmt.Sprintf("no %s in the sandbox's PATH (%s) on this host", argv[0], strings.Join(sandboxPath, ":"))}
		for _, dir := range sandboxPath {
			if fi, err := os.Stat(filepath.Join(dir, argv[0])); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				l.missing = ""
				break
			}
		}
		langs[name] = l
	}
	return langs
}

// selfTest runs "true" with the default limits, so that a host that cannot
// run sandboxes as configured fails the start rather than every request.
// It also starts the library's spawner before the first request.
func (s *server) selfTest() error {
	sb := sandbox.New(s.options(s.defaultLimits(), nil, nil, s.log, ""))
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Run(ctx, sandbox.Command("true"))
	switch {
	case errors.Is(err, sandbox.ErrNoCgroup):
		return fmt.Errorf("self-test: %w; start with -best-effort to let rlimits stand in", err)
	case err != nil:
		return fmt.Errorf("self-test: %w", err)
	case !res.Success():
		return fmt.Errorf("self-test: true in a sandbox: %v; stderr: %s", res.Err(), res.Stderr)
	}
	for _, l := range res.Limits {
		if !l.Enforced && l.Value != "none" {
			s.log.Warn("limit not enforced", "limit", l.Name, "value", l.Value, "why", l.By)
		}
	}
	return nil
}

// defaultLimits are the limits of a request that gives none.
func (s *server) defaultLimits() limitSet {
	c := s.cfg
	return limitSet{memory: c.maxMemory, cpus: c.maxCPUs, pids: c.maxPids, output: c.maxOutput}
}

// options are the sandbox.Options of a run with limits l and, if egress or
// secrets are not nil, network "allow" to those hosts with those secrets.
//
// tenant, if not empty, is the tenant the Sandbox runs for: each of its
// audit events names it.
func (s *server) options(l limitSet, egress []string, secrets []sandbox.Secret, log *slog.Logger, tenant string) sandbox.Options {
	o := sandbox.Options{
		Workspace: sandbox.FreshWorkspace{}, // requests are unrelated: each run starts with an empty /workspace
		Limits:    sandbox.Limits{Memory: l.memory, CPUs: l.cpus, Pids: l.pids, Output: l.output},
		Logger:    log,
	}
	if l.seccompKill {
		p := sandbox.DefaultSeccompPolicy()
		p.KillOnRefusal = true
		o.Seccomp = p
	}
	if s.audit != nil {
		o.Audit = &sandbox.Audit{Handler: s.audit}
		if tenant != "" {
			o.Audit.Handler = s.audit.WithAttrs([]slog.Attr{slog.String("tenant", tenant)})
		}
	}
	if s.cfg.bestEffort {
		o.Limits.Policy = sandbox.BestEffortLimits
	}
	if egress != nil || secrets != nil {
		o.Network = &sandbox.Egress{Allow: egress, Secrets: secrets}
	}
	return o
}

// run runs a request that holds a slot, in sess or, when sess is nil, in a
// sandbox of its own; releases the slot, and answers:
// with the Result as JSON, or, when streaming, with the output as it comes
// and the Result as the last line.
func (s *server) run(w http.ResponseWriter, r *http.Request, id string, spec *runSpec, sess *session) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(spec.timeout + writeGrace))

	cmd := sandbox.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Env = spec.env
	if spec.stdin != "" {
		cmd.Stdin = strings.NewReader(spec.stdin)
	}
	var events *eventStream
	var stdout, stderr *streamWriter
	if spec.stream {
		events = startStream(w, rc)
		stdout, stderr = events.writer("stdout", spec.limits.output), events.writer("stderr", spec.limits.output)
		cmd.Stdout, cmd.Stderr = stdout, stderr
	}

	// The deadline is the request's timeout; the client going away
	// (r.Context) and shutdown (s.stopping) cancel the run too.
	ctx, cancel := context.WithTimeout(r.Context(), spec.timeout)
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	start := time.Now()
	var res *sandbox.Result
	var err error
	if sess != nil {
		res, err = sess.run(ctx, cmd)
	} else {
		res, err = s.execute(ctx, id, tenantOf(r), spec, cmd)
	}
	elapsed := time.Since(start)
	s.release()

	if res != nil && events != nil {
		// Output went to the stream, where each stream is capped.
		res.StdoutTruncated, res.StderrTruncated = stdout.truncated(), stderr.truncated()
	}
	resp := newRunResponse(id, res, elapsed)
	// A run its context ended is a Result with no error: the answer says
	// which end it was.
	switch {
	case res != nil && res.Outcome == sandbox.Canceled && s.stopping.Err() != nil:
		resp.Error = "the server is shutting down: the run was killed"
	case res != nil && res.Outcome == sandbox.Canceled:
		resp.Error = "the client went away: the run was killed"
	case res != nil && res.Outcome == sandbox.Timeout:
		resp.Error = fmt.Sprintf("the run was killed at its timeout of %s", spec.timeout)
	case err == nil:
	case sess != nil && sess.endedWhy() != "":
		// The session ended while the run entered it (deleted, expired
		// or shut down): that, not how the entry broke, is the answer.
		resp.Error = fmt.Sprintf("session %s ended: %s; create a new session", sess.id, sess.endedWhy())
	default:
		resp.Error = err.Error()
		if errors.Is(err, sandbox.ErrNoCgroup) {
			resp.Error += "; start the server with -best-effort to let rlimits stand in"
		}
	}
	s.metrics.observe(s.tenantLabel(r), resp.Cause, elapsed)
	s.logRun(tenantOf(r), spec, resp, res)

	switch {
	case events != nil:
		events.finish(resp)
	case res != nil:
		writeAnswer(w, http.StatusOK, resp, res.Stdout, res.Stderr)
	case errors.Is(err, sandbox.ErrInvalidOption):
		resp.Field = requestField(err, spec)
		writeAnswer(w, http.StatusBadRequest, resp, nil, nil)
	case sess != nil && sess.endedWhy() != "":
		writeJSON(w, http.StatusNotFound, errorBody{ID: id, Error: resp.Error, Field: "id"})
	default:
		writeAnswer(w, http.StatusInternalServerError, resp, nil, nil)
	}
}

// requestField is the request field that the library's *OptionError
// comes from, or "" when it names none of the request's own.
func requestField(err error, spec *runSpec) string {
	var oe *sandbox.OptionError
	switch {
	case !errors.As(err, &oe):
		return ""
	case strings.HasPrefix(oe.Option, "Cmd.Args") && spec.language != "":
		return "code"
	case strings.HasPrefix(oe.Option, "Cmd.Args"):
		return "command"
	case strings.HasPrefix(oe.Option, "Cmd.Env"):
		return "env"
	}
	return ""
}

// execute runs cmd in a sandbox and closes it before it returns, so that
// when the client has its answer, nothing of the run is left on the host.
//
// Why a Sandbox per request: its Options are fixed at New, and each request
// chooses its limits and network; New only checks the Options (the default
// seccomp filter is compiled once per process), FreshWorkspace means runs
// share nothing anyway, and Close waits until the run's cgroup is gone.
// The exception is -pool: prepared sandboxes belong to one Sandbox, so the
// server keeps one for the default limits for its whole life.
func (s *server) execute(ctx context.Context, id, tenant string, spec *runSpec, cmd *sandbox.Cmd) (*sandbox.Result, error) {
	// The pooled Sandbox is shared, so its audit trail names no tenant:
	// it serves only the tenant of a server without authentication.
	if s.pooled != nil && spec.limits == s.defaultLimits() && spec.egress == nil && spec.secrets == nil && tenant == access.DefaultTenant {
		return s.pooled.Run(ctx, cmd)
	}
	opts := s.options(spec.limits, spec.egress, spec.secrets, s.log.With("id", id, "tenant", tenant), tenant)
	sb := sandbox.New(opts)
	defer sb.Close()
	return sb.Run(ctx, cmd)
}

// logRun writes the one log event of a run.
func (s *server) logRun(tenant string, spec *runSpec, resp *runResponse, res *sandbox.Result) {
	attrs := []slog.Attr{slog.String("id", resp.ID), slog.String("tenant", tenant)}
	if spec.session != "" {
		attrs = append(attrs, slog.String("session", spec.session))
	}
	if spec.language != "" {
		attrs = append(attrs, slog.String("language", spec.language), slog.Int("code_bytes", len(spec.argv[len(spec.argv)-1])))
	} else {
		attrs = append(attrs, slog.Any("command", clip(spec.argv)))
	}
	attrs = append(attrs, slog.String("cause", resp.Cause), slog.Duration("duration", time.Duration(resp.DurationNS)))
	if res != nil {
		denials := []string{}
		for _, d := range res.Denials {
			denials = append(denials, fmt.Sprintf("%s x%d", d.Syscall, d.Count))
		}
		attrs = append(attrs, slog.Int("exit_code", res.ExitCode),
			slog.Group("usage", slog.Duration("cpu", res.CPUTime), slog.Int64("memory_peak", res.MemoryPeak),
				slog.Int64("max_rss", res.MaxRSS)),
			slog.Int64("stdout_bytes", res.StdoutBytes), slog.Int64("stderr_bytes", res.StderrBytes),
			slog.Any("denials", denials), slog.String("violation", res.Violation), slog.Bool("pooled", res.Pooled))
	}
	if resp.Error != "" {
		attrs = append(attrs, slog.String("err", resp.Error))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "run", attrs...)
}

// clip shortens a command for the log: at most 16 arguments of at most
// 100 bytes each.
func clip(argv []string) []string {
	var out []string
	for i, a := range argv {
		if i == 16 {
			out = append(out, fmt.Sprintf("...(%d more)", len(argv)-i))
			break
		}
		if len(a) > 100 {
			a = a[:100] + "..."
		}
		out = append(out, a)
	}
	return out
}
