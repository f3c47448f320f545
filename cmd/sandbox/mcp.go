package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/access"
)

// mcpUsage is the help of "sandbox mcp" before its flags.
const mcpUsage = `Usage: sandbox mcp [flags]

Serves the Model Context Protocol: an agent (Claude Desktop, Claude Code,
Cursor, any MCP client) runs commands and code in a sandbox through it. It
speaks over stdin and stdout by default (the client starts it), or over
streamable HTTP with --http ADDR. Logs go to stderr only.

Over HTTP a client authenticates with a bearer token, an API key of
-api-keys or a JWT of -oidc-issuer, or with a client certificate of
-client-ca; the tenant it authenticates as owns its sessions. Without any
of them --http listens on loopback only (-insecure-no-auth lifts that, on
a network you trust). A request whose Host is not the server's, or whose
Origin is not given with -allow-origin, is refused (403), so that a web
page cannot reach the server through a browser.

One MCP session is one sandbox session: a workspace of its own that its
calls share (files written by one call are there for the next), snapshots
of it, and, with --live, one running sandbox whose background processes
last between calls. When the session ends (stdin closes, the client
deletes the HTTP session, or it is idle for --session-timeout) its sandbox
is closed: every process in it is killed and its workspace removed.

Tools:
  run             run a command (argv, or a shell line with sh -c), with stdin and a timeout
  run_code        run a snippet of python, node or shell
  read_file       read a workspace file
  write_file      write a workspace file
  list_files      list a workspace directory
  delete_file     delete a workspace file or directory
  snapshot        keep the workspace as it is now, under a name
  restore         make the workspace what a snapshot kept
  reset           empty the workspace
 with --live only:
  start_process   start a command in the background
  list_processes  list the processes running in the session's sandbox
  signal_process  send a signal to one of them

A result carries stdout, stderr, exit code, outcome, truncation flags,
refused syscalls, egress connections and the files the call changed, both
as structured content and as text; a run that failed (non-zero exit,
timeout, out of memory, seccomp kill, bad input) is a tool error that says
what happened.

Flags:
`

// mcpRunFlags are the flags of "sandbox run" that "sandbox mcp" takes too,
// with the same meaning: the sandbox's limits, root, binds, environment,
// network and seccomp policy. The others (--json, --tty, --dir,
// --workspace, ...) describe one command line's run, not a session's.
var mcpRunFlags = []string{
	"ro-bind", "bind", "rootfs", "image", "platform", "image-store", "insecure-registry", "registry-mirror", "pull-timeout", "env", "memory", "cpus", "pids", "tmp-size", "workspace-size",
	"max-file-size", "best-effort", "seccomp", "seccomp-kill", "net", "ca-certs", "secret",
}

// Defaults of the flags of "sandbox mcp".
const (
	defaultMCPTimeout     = time.Minute
	defaultMCPMaxTimeout  = 10 * time.Minute
	defaultMaxSessions    = 8
	defaultSessionTimeout = 30 * time.Minute
	// defaultMCPOutput is the output a stream kept for the model: what
	// a model reads goes into its context, where a megabyte of a build
	// log crowds out everything else.
	defaultMCPOutput = 64 << 10
)

// mcpFlags are the flags of "sandbox mcp".
type mcpFlags struct {
	fs  *flag.FlagSet
	run *runFlags // the flags shared with "sandbox run" set its fields

	http           string
	access         access.Config // who may use --http
	live           bool
	maxSessions    int
	sessionTimeout time.Duration
	timeout        time.Duration
	maxTimeout     time.Duration
	outputLimit    int64
	audit          string
	auditExec      bool
}

func newMCPFlags() *mcpFlags {
	f := &mcpFlags{fs: flag.NewFlagSet("mcp", flag.ContinueOnError), run: newRunFlags(), outputLimit: defaultMCPOutput}
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	f.fs.StringVar(&f.http, "http", "", "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:8765) instead of stdio, at\n"+
		"http://ADDR/mcp; port 0 picks a free one, which the log on stderr gives")
	f.access.RegisterFlags(f.fs)
	f.fs.BoolVar(&f.live, "live", false,
		"make each session one live sandbox: processes started in the background last\n"+
			"between calls, and the start_process, list_processes and signal_process tools\n"+
			"are offered; a live session does not list the files a call changed")
	f.fs.IntVar(&f.maxSessions, "max-sessions", defaultMaxSessions,
		"with --http, serve at most `N` sessions at once; a client beyond them is refused")
	f.fs.DurationVar(&f.sessionTimeout, "session-timeout", defaultSessionTimeout,
		"with --http, end a session that had no request for `DUR`, and its sandbox")
	f.fs.DurationVar(&f.timeout, "timeout", defaultMCPTimeout,
		"kill a run after `DUR` when the call gives no timeout")
	f.fs.DurationVar(&f.maxTimeout, "max-timeout", defaultMCPMaxTimeout,
		"the longest timeout a call may ask for, `DUR`")
	f.fs.Var(&sizeFlag{v: &f.outputLimit}, "output-limit",
		"keep at most `SIZE` of each of a run's stdout and stderr (the first and last\n"+
			"halves around a marker), in the units of --memory (default "+formatSize(defaultMCPOutput)+")")
	f.fs.StringVar(&f.audit, "audit", "",
		"append the audit trail of every session's sandbox to `FILE`, one JSON event a\n"+
			"line: runs with their limits and outcomes, connections, refused syscalls and\n"+
			"changed files, each with the session's sandbox id")
	f.fs.BoolVar(&f.auditExec, "audit-exec", false,
		"with --audit, record each program a run executes too (about 0.3 ms an exec)")
	f.run.fs.VisitAll(func(fl *flag.Flag) {
		for _, name := range mcpRunFlags {
			if fl.Name == name {
				f.fs.Var(fl.Value, fl.Name, fl.Usage)
			}
		}
	})
	return f
}

// mcpConfig is a parsed "sandbox mcp" command line.
type mcpConfig struct {
	*mcpFlags
	// cfg holds the session's Options and what explain needs to name the
	// flag behind a wrong one.
	cfg *runConfig
}

// parseMCP parses the arguments of "sandbox mcp". Errors name the flag at
// fault; flag.ErrHelp means -h was given.
func parseMCP(args []string) (*mcpConfig, error) {
	f := newMCPFlags()
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case f.fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q: sandbox mcp takes flags only (the client says what to run)", f.fs.Arg(0))
	case f.timeout <= 0:
		return nil, fmt.Errorf("invalid value %q for flag -timeout: must be more than 0", f.timeout)
	case f.maxTimeout < f.timeout:
		return nil, fmt.Errorf("invalid value %q for flag -max-timeout: must be at least --timeout %s", f.maxTimeout, f.timeout)
	case f.maxSessions < 1:
		return nil, fmt.Errorf("invalid value %d for flag -max-sessions: must be at least 1", f.maxSessions)
	case f.sessionTimeout <= 0:
		return nil, fmt.Errorf("invalid value %q for flag -session-timeout: must be more than 0", f.sessionTimeout)
	case f.http == "" && (f.access.Authenticates() || f.access.NoAuth || f.access.TLSCert != ""):
		return nil, errors.New("flags -api-keys, -oidc-issuer, -client-ca, -tls-cert and -insecure-no-auth need --http ADDR: on stdio the client that starts the server is its only user")
	case f.auditExec && f.audit == "":
		return nil, errors.New("flag --audit-exec needs --audit FILE, where the execs are recorded")
	}
	if f.http != "" {
		if err := checkListenAddr(f.http, &f.access); err != nil {
			return nil, err
		}
	}
	opts, err := f.sessionOptions()
	if err != nil {
		return nil, err
	}
	return &mcpConfig{mcpFlags: f, cfg: &runConfig{
		opts:    opts,
		binds:   f.run.binds.specs,
		given:   givenFlags(f.fs),
		seccomp: f.run.seccomp,
	}}, nil
}

// sessionOptions are the Options of each session's Sandbox: the shared
// flags' (see runFlags.options), made a session's.
func (f *mcpFlags) sessionOptions() (sandbox.Options, error) {
	opts, err := f.run.options()
	opts.Limits.Output = f.outputLimit
	// Every run of every session starts with --env's variables; a
	// sandbox run line's are its one command's.
	opts.Env = f.run.env
	// A server lives long and serves many runs: they start from the
	// spawner, which a live sandbox needs anyway.
	opts.Start = nil
	if f.live {
		// The session's end, not the library's idle timer, ends it:
		// a client may think for longer than DefaultIdleTimeout.
		opts.Live = &sandbox.Live{IdleTimeout: -1}
	} else if ws, ok := opts.Workspace.(sandbox.SessionWorkspace); ok {
		// The library refuses it with Live, whose calls share the
		// workspace with processes that keep running.
		ws.TrackChanges = true
		opts.Workspace = ws
	}
	return opts, err
}

// checkListenAddr refuses an --http address beyond loopback unless the
// server authenticates its clients or is told it need not, at parse time
// so that nothing starts (access.New checks the same again).
func checkListenAddr(addr string, cfg *access.Config) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("invalid value %q for flag -http: want HOST:PORT, e.g. 127.0.0.1:8765: %v", addr, err)
	}
	if cfg.Authenticates() || cfg.NoAuth || access.Loopback(addr) {
		return nil
	}
	return fmt.Errorf("--http %s listens beyond this machine without authentication: whoever reaches it could run programs in sandboxes here "+
		"(and, with --net, through your network); give a loopback address such as 127.0.0.1:8765, "+
		"or authenticate clients with -api-keys FILE, -oidc-issuer URL or -client-ca FILE, "+
		"or, on a network you trust, add -insecure-no-auth: %w", addr, access.ErrConfig)
}

// printMCPUsage prints the help of "sandbox mcp".
func printMCPUsage(w io.Writer, f *mcpFlags) {
	fmt.Fprint(w, mcpUsage)
	printFlags(w, f.fs)
}

func mcpMain(args []string, s streams) int {
	mc, err := parseMCP(args)
	if errors.Is(err, flag.ErrHelp) {
		printMCPUsage(s.stdout, newMCPFlags())
		return 0
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "sandbox: mcp: %v\n%s", err, seeHelp("mcp"))
		return exitFailure
	}
	log := slog.New(slog.NewTextHandler(s.stderr, nil))
	// The SDK tells of every session and request at Info: only its
	// warnings and errors are worth a line.
	sdkLog := slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mc.run.seccomp.warnUnknown(s)
	if mc.audit != "" {
		trail, err := os.OpenFile(mc.audit, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(s.stderr, "sandbox: mcp: flag --audit: %v\n", err)
			return exitFailure
		}
		defer trail.Close()
		mc.cfg.opts.Audit = &sandbox.Audit{Handler: slog.NewJSONHandler(trail, nil), Exec: mc.auditExec}
	}
	if err := mc.selfTest(); err != nil {
		fmt.Fprintln(s.stderr, errorLine(err))
		return exitFailure
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	srv, err := newMCPServer(mc, log, sdkLog)
	if err != nil {
		fmt.Fprintln(s.stderr, errorLine(fmt.Errorf("mcp: %w", err)))
		return exitFailure
	}
	defer srv.closeAll()
	if mc.http == "" {
		log.Info("sandbox mcp: serving on stdio")
		err = srv.serveStdio(ctx, s)
	} else {
		err = srv.serveHTTP(ctx, mc.http)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(s.stderr, errorLine(fmt.Errorf("mcp: %w", err)))
		return exitFailure
	}
	return 0
}

// selfTest checks the flags' Options and runs "true" once with them, so
// that a host or a command line that cannot run sandboxes fails the start,
// where the person who started the server sees it, rather than every call.
// It also starts the library's spawner.
func (mc *mcpConfig) selfTest() error {
	opts := mc.cfg.opts
	opts.Live = nil  // "true" alone; the sessions' sandboxes are live
	opts.Audit = nil // the trail is the sessions'
	sb := sandbox.New(opts)
	defer sb.Close()
	if err := sb.Err(); err != nil {
		return mc.cfg.explain(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := sb.Run(ctx, sandbox.Command("true"))
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		// The sandbox was built and started; its root just has no
		// "true" on its PATH (a --rootfs, an --env PATH).
		return nil
	case cgroupRefused(err):
		return &cgroupRefusal{err: err}
	case err != nil:
		return fmt.Errorf("mcp: a first run to check the sandbox failed: %w", withImageHint(mc.cfg.explain(err)))
	}
	return nil
}

// serveStdio serves one session on the tool's stdin and stdout until stdin
// ends or ctx is canceled.
func (srv *mcpServer) serveStdio(ctx context.Context, s streams) error {
	in := io.Reader(os.Stdin)
	if s.stdin != nil {
		in = s.stdin
	}
	// Neither is closed when the session ends: the tool's own streams.
	err := srv.server.Run(ctx, &stdioTransport{in: in, out: s.stdout})
	srv.closeAll()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil // the client closed stdin: the session is over
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
