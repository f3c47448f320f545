// Package service is the HTTP service of "sandbox serve", run in that
// command's process: it runs an agent's tool calls in sandboxes. POST a
// command (or code with a language), with limits and a
// network policy within the server's maxima, and get the Result back as
// JSON, or the output as it comes followed by the Result, as JSON lines.
//
//	sandbox serve -addr 127.0.0.1:8080
//	curl -s localhost:8080/v1/runs -H 'Content-Type: application/json' \
//		-d '{"command":["sh","-c","echo hello"],"limits":{"timeout":"5s","memory":"64M"}}'
//	curl -sN localhost:8080/v1/runs -H 'Content-Type: application/json' \
//		-d '{"language":"python","code":"print(6*7)","stream":true}'
//
// openapi.yaml describes the whole HTTP API (clients in other languages can
// be generated from it), and the tests in apitest/ hold the server to it.
//
// The request (see runRequest in request.go):
//
//	command       argv, e.g. ["sh","-c","ls"]; or:
//	code          a program's text, with
//	language      "sh", "bash" or "python" (python3); a language whose
//	              interpreter this host lacks gets 501, naming it
//	stdin, env    the program's standard input; {"NAME":"value"}
//	limits        timeout ("5s" or seconds; default -default-timeout),
//	              memory and output ("64M" or bytes), cpus, pids; an
//	              omitted limit is the server's maximum, and a value above
//	              it is refused (400) with the field and the maximum
//	network       "none" (default) or "allow" with egress, a list of
//	              entries from the server's -egress list
//	seccomp_kill  end the run at the first refused syscall
//	stream        true: NDJSON events as the program writes (as does
//	              Accept: application/x-ndjson)
//
// The answer carries the run's id (also in the X-Run-Id header), its cause
// (the outcome as a metric label: exited, signaled, timeout, canceled,
// out_of_memory, seccomp_kill; or error) and the Result's fields with the
// names cmd/sandbox --json uses. A refused request gets a JSON error that
// names the field at fault; 429 with Retry-After when every slot is busy
// and the queue is full; 503 while shutting down.
//
// What a request costs the server is bounded, whatever the client or the
// program sends:
//
//	body          at most maxBody (1 MiB), read within 30 s; at most
//	              -max-concurrent plus -max-queue bodies are read at once,
//	              and a request beyond them gets 429 before its body is read
//	command line  the library's sandbox.MaxCommandLine (256 KiB) of argv
//	              and environment, sandbox.MaxArgString a string; beyond
//	              them 400, naming "command", "code" or "env"
//	runs          -max-concurrent at once, -max-queue waiting (else 429)
//	output        the run's output limit a stream (at most -max-output),
//	              kept by the library; the JSON answer escapes it
//	              answerChunk (32 KiB) at a time as it writes, and a stream
//	              sends each piece the library reads (32 KiB at most) as
//	              it comes, never more than the limit a stream
//	slow client   the answer's writes end at the run's timeout plus
//	              writeGrace (10 s); the run then ends, its output drained
//	connections   -max-connections open at once, by default the descriptor
//	              limit (RLIMIT_NOFILE) less a reserve for the runs and
//	              sessions the flags allow (conns.go), so that a flood of
//	              connections never leaves a run without descriptors; one
//	              beyond them is answered 503 with Retry-After and closed
//	              before its request is read; a request's headers must
//	              come within 10 s, an idle connection is closed after 2 min
//
// Each run gets its own sandbox with an empty /workspace: requests share
// nothing. GET /metrics serves Prometheus text metrics, GET /healthz and
// GET /readyz serve probes, and SIGTERM or SIGINT kills the runs in flight,
// answers them, ends every session, closes every sandbox and exits 0.
//
// # Sessions
//
// A session is a live sandbox kept across requests: its processes, /tmp
// and /workspace last until it is deleted, has had no request for its
// idle_timeout, reaches its max_lifetime, or the server shuts down.
//
//	POST   /v1/sessions                         create: limits, network, env, image (one of -images), idle_timeout, max_lifetime
//	GET    /v1/sessions/{id}                    describe; DELETE ends it, everything in it dead when it answers
//	POST   /v1/sessions/{id}/runs               run and wait, as POST /v1/runs (streaming too)
//	POST   /v1/sessions/{id}/processes          start in the background; its pid, its output's tail kept
//	GET    /v1/sessions/{id}/processes[/{pid}]  list what is alive; one background process, its output, result
//	POST   /v1/sessions/{id}/processes/{pid}/signal
//	PUT    /v1/sessions/{id}/files?path=P       a file in; GET: out; GET dir?path=D: a listing
//	GET    /v1/sessions/{id}/tar?path=D         a tar of a directory; PUT: a tar extracted
//	POST   /v1/sessions/{id}/snapshots          snapshot; POST restore, POST reset; DELETE snapshots/{name}
//	ANY    /v1/sessions/{id}/ports/{port}/{path...}  HTTP to a server on the session's loopback
//
// At most -max-sessions live at once (429 beyond, as for runs); a session's
// idle_timeout and max_lifetime are at most -max-idle-timeout and
// -max-lifetime. A session's id is "<replica>.<130 random bits>": it names
// the replica (-replica, by default the pod's name) that holds it, and a
// replica that gets a request for another's session forwards it there,
// through -peer-url with {replica} replaced, so that any replica takes any
// request. A session whose replica was drained or restarted has ended:
// requests for it get 404 saying so.
//
// # Authentication and tenants
//
// Every request but the probes (/healthz, /readyz) passes internal/access:
// a Host the server answers to, no foreign Origin (403), then a credential
// (-api-keys, -oidc-issuer, -client-ca; 401 with WWW-Authenticate). A
// listen address beyond loopback needs one of them, or -insecure-no-auth.
// The credential names a tenant, which owns the sessions it creates: any
// other tenant gets 404 for them and all in them, as for a missing one.
// With -tenants FILE, JSON {"tenants": {"NAME": POLICY, "*": POLICY}},
// each tenant's POLICY narrows the flags' maxima (max_memory, max_output,
// max_cpus, max_pids, max_timeout, egress, images), lists the secrets its
// requests may name in "secrets" (each {"name", "hosts", "env" | "file"},
// read at start), and sets its quotas: max_sessions live, max_runs at once
// (background processes count), runs_per_minute. Past a quota: 429 with
// Retry-After and "quota" naming it ("sessions", "runs", "rate", or
// "queue" for the tenant's share of the request bodies read at once).
// SIGHUP reloads the file. Audit events and log lines of runs and sessions
// name the tenant.
//
// # Audit trail
//
// With -audit FILE, every sandbox the server makes (a request's, a
// session's, the pooled one) writes its audit trail (sandbox.Options.Audit)
// to FILE, appended to as JSON lines: each run's start with its command and
// limits, its end with its outcome, each connection its proxy allowed or
// refused, each syscall its filter refused. The program in the sandbox
// cannot reach the file, and what it chooses (a host, a path) is escaped
// in the lines it appears in.
//
// At start it runs "true" in a sandbox with the default limits, and fails if
// that fails: on a host without a writable cgroup (an unprivileged user on a
// cgroup v1 host, or without a delegated v2 subtree) unless given
// -best-effort, which lets rlimits stand in for the limits.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/access"
)

// config is the server's settings, from its flags.
type config struct {
	addr                       string
	maxConcurrent, maxQueue    int
	maxConnections             int // 0: RLIMIT_NOFILE less the reserve (conns.go)
	defaultTimeout, maxTimeout time.Duration
	maxMemory, maxPids         int64
	maxOutput                  int64
	maxCPUs                    float64
	egress                     []string
	bestEffort                 bool
	pool                       int
	logFormat                  string
	shutdownTimeout            time.Duration
	// Sessions (session.go) and replicas (peer.go).
	maxSessions          int
	maxIdle, maxLifetime time.Duration
	replica, peerURL     string
	// audit is the file of the audit trail (audit.go); empty: none.
	audit string
	// images are the container images a session may ask for as its root
	// (its "image" field), and imageStore the store they are pulled
	// into (empty: the library's default). An allowlist, because a
	// reference may also name a file or directory of this host
	// (oci:DIR, docker-archive:FILE) or a registry of the client's
	// choosing, which only the operator should pick.
	images     []string
	imageStore string
	// access is who may talk to the server (internal/access): keys,
	// OIDC, client certificates, TLS, the Hosts and Origins allowed.
	access access.Config
	// tenants is the file of the tenants' policies (policy.go); empty:
	// every tenant gets the flags' maxima.
	tenants string
	// secrets are the tenant's, by name (cfgFor); none for the server's.
	secrets map[string]sandbox.Secret
	// tenant is the tenant whose policy narrowed these maxima (cfgFor);
	// empty for the server's own, the flags'.
	tenant string
}

// whose names whose maxima c holds, for messages: "the server's" or
// "tenant NAME's".
func (c *config) whose() string {
	if c.tenant == "" {
		return "the server's"
	}
	return fmt.Sprintf("tenant %q's", c.tenant)
}

// listName names the list of c that field draws from: the server's flag
// (-egress) or the tenant policy's field (egress).
func (c *config) listName(field string) string {
	if c.tenant == "" {
		return "-" + field
	}
	return field
}

// Main runs "sandbox serve" with args, its flags, until SIGTERM or SIGINT,
// and returns the exit status: 0 after a clean shutdown, 2 for wrong
// flags, 1 when the server failed.
func Main(args []string) int {
	cfg, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox serve:", err)
		return 2
	}
	log := newLogger(cfg.logFormat)
	if err := serve(cfg, log); err != nil {
		log.Error("sandbox serve failed", "err", err)
		return 1
	}
	return 0
}

func parseFlags(args []string) (*config, error) {
	c := &config{maxMemory: 512 << 20, maxCPUs: 1, maxPids: 256, maxOutput: 1 << 20}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen on `ADDR`, host:port; an address beyond loopback needs authentication")
	fs.IntVar(&c.maxConcurrent, "max-concurrent", runtime.NumCPU(), "runs at once")
	fs.IntVar(&c.maxQueue, "max-queue", 16, "requests waiting for a slot; beyond them: 429")
	fs.IntVar(&c.maxConnections, "max-connections", 0, "client connections open at once; beyond them a connection is answered 503 and closed (0: the descriptor limit, RLIMIT_NOFILE, less a reserve for the runs and sessions the other flags allow)")
	fs.DurationVar(&c.defaultTimeout, "default-timeout", 10*time.Second, "a run's timeout when the request gives none")
	fs.DurationVar(&c.maxTimeout, "max-timeout", 60*time.Second, "the longest timeout a request may ask for")
	fs.Func("max-memory", "the most memory a run may ask for, `SIZE` in bytes or with K, M, G (default 512M)", sizeFlag(&c.maxMemory))
	fs.Func("max-output", "the most output kept per stream of a run, `SIZE` (default 1M)", sizeFlag(&c.maxOutput))
	fs.Float64Var(&c.maxCPUs, "max-cpus", c.maxCPUs, "the most CPUs' worth of time a run may ask for")
	fs.Int64Var(&c.maxPids, "max-pids", c.maxPids, "the most processes and threads a run may ask for")
	fs.Func("egress", "comma-separated `LIST` of hosts a request may allow (network \"allow\"), as in sandbox.Egress.Allow; empty: only \"none\"",
		func(s string) error {
			c.egress = nil
			for e := range strings.SplitSeq(s, ",") {
				if e = strings.TrimSpace(e); e != "" {
					c.egress = append(c.egress, e)
				}
			}
			return nil
		})
	fs.BoolVar(&c.bestEffort, "best-effort", false, "where no writable cgroup exists, run with rlimits standing in for the limits")
	fs.IntVar(&c.pool, "pool", 0, "keep `N` sandboxes prepared for requests with the default limits")
	fs.StringVar(&c.logFormat, "log-format", "json", "logs to stderr as `json` or text")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM, how long to wait for the runs in flight to be killed and answered")
	fs.IntVar(&c.maxSessions, "max-sessions", 16, "live sessions at once; beyond them POST /v1/sessions gets 429 (0: no sessions)")
	fs.DurationVar(&c.maxIdle, "max-idle-timeout", 10*time.Minute, "the longest idle_timeout a session may ask for, and its default")
	fs.DurationVar(&c.maxLifetime, "max-lifetime", time.Hour, "the longest max_lifetime a session may ask for, and its default")
	fs.StringVar(&c.replica, "replica", "", "this replica's `NAME`, a DNS label that session ids carry (default: $POD_NAME, else $HOSTNAME, else the host name, up to its first dot)")
	fs.StringVar(&c.peerURL, "peer-url", "", "`URL` of another replica, {replica} standing for its name, e.g. http://{replica}.toolserver-peers:8080: requests for its sessions are forwarded there (empty: such requests get 404)")
	fs.Func("images", "container image references, comma-separated, a session may ask for as its root with its \"image\" field (empty: none)", func(v string) error {
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.images = append(c.images, r)
			}
		}
		return nil
	})
	fs.StringVar(&c.imageStore, "image-store", "", "keep the -images in `DIR` (default: the library's, ~/.cache/fumehood-sandbox/images or /var/cache/fumehood-sandbox/images for root)")
	fs.StringVar(&c.audit, "audit", "", "append the audit trail of every sandbox (runs, connections, refused syscalls) to `FILE` as JSON lines")
	fs.StringVar(&c.tenants, "tenants", "", "`FILE` of the tenants' policies and quotas, JSON {\"tenants\": {\"NAME\": POLICY, \"*\": POLICY}} (empty: every tenant gets the flags' maxima, no quotas)")
	c.access.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: sandbox serve takes only flags", fs.Arg(0))
	}
	if c.replica == "" {
		c.replica, _, _ = strings.Cut(strings.ToLower(defaultReplica()), ".")
	}
	return c, c.check()
}

// check refuses flag values the server cannot work with, naming the flag.
func (c *config) check() error {
	switch {
	case c.maxConcurrent < 1:
		return fmt.Errorf("-max-concurrent %d: must be at least 1", c.maxConcurrent)
	case c.maxQueue < 0:
		return fmt.Errorf("-max-queue %d: must not be negative", c.maxQueue)
	case c.maxConnections < 0:
		return fmt.Errorf("-max-connections %d: must not be negative (0: from the descriptor limit)", c.maxConnections)
	case c.defaultTimeout <= 0 || c.maxTimeout <= 0 || c.shutdownTimeout <= 0:
		return errors.New("-default-timeout, -max-timeout and -shutdown-timeout must be positive")
	case c.defaultTimeout > c.maxTimeout:
		return fmt.Errorf("-default-timeout %s: above -max-timeout %s", c.defaultTimeout, c.maxTimeout)
	case c.maxMemory < 1<<20:
		return fmt.Errorf("-max-memory %d: must be at least 1M", c.maxMemory)
	case !(c.maxCPUs >= 0.01 && c.maxCPUs <= 1024):
		return fmt.Errorf("-max-cpus %v: must be from 0.01 to 1024", c.maxCPUs)
	case c.maxPids < 1:
		return fmt.Errorf("-max-pids %d: must be at least 1", c.maxPids)
	case c.pool < 0 || c.pool > 64:
		return fmt.Errorf("-pool %d: must be from 0 to 64", c.pool)
	case c.logFormat != "json" && c.logFormat != "text":
		return fmt.Errorf("-log-format %q: want json or text", c.logFormat)
	case c.maxSessions < 0:
		return fmt.Errorf("-max-sessions %d: must not be negative", c.maxSessions)
	case c.maxIdle < time.Second || c.maxLifetime < time.Second:
		return errors.New("-max-idle-timeout and -max-lifetime must be at least 1s")
	case !validReplica(c.replica):
		return fmt.Errorf("-replica %q: want a DNS label (lower-case letters, digits and '-', at most 63), as a pod's name is; session ids carry it", c.replica)
	}
	if err := checkPeerURL(c.peerURL); err != nil {
		return err
	}
	if len(c.egress) > 0 {
		// The library checks the entries' syntax.
		sb := sandbox.New(sandbox.Options{Workspace: sandbox.FreshWorkspace{}, Network: &sandbox.Egress{Allow: c.egress}})
		defer sb.Close()
		if err := sb.Err(); err != nil {
			return fmt.Errorf("-egress: %w", err)
		}
	}
	return nil
}

func sizeFlag(v *int64) func(string) error {
	return func(s string) error {
		n, err := parseSize(s)
		*v = n
		return err
	}
}

func newLogger(format string) *slog.Logger {
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, nil))
}

// serve runs the server until SIGTERM or SIGINT, then shuts it down: no
// new runs (503, and /readyz says 503), the runs in flight killed and
// answered, every sandbox closed.
func serve(cfg *config, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A cap the descriptor limit cannot hold is an error in the flags:
	// it is said before any sandbox is made.
	maxConns, err := connectionCap(cfg)
	if err != nil {
		return err
	}
	trail, trailFile, err := openAudit(cfg.audit)
	if err != nil {
		return err
	}
	if trailFile != nil {
		defer trailFile.Close() // after s.close, deferred below: the Sandboxes flush into it as they close
	}
	policies, err := loadPolicies(cfg.tenants, cfg)
	if err != nil {
		return err
	}
	acfg := cfg.access
	if h := peerHost(cfg); h != "" {
		// A peer forwards with the Host of -peer-url naming this replica.
		acfg.AllowHosts = append(slices.Clip(acfg.AllowHosts), h)
	}
	g, err := access.New(acfg, cfg.addr, log, trail)
	if err != nil {
		return err
	}
	defer g.Close()
	s := newServer(cfg, log, trail)
	s.policies = policies
	if cfg.tenants != "" {
		go s.reloadOnHUP(ctx)
	}
	defer s.close()
	if err := s.selfTest(); err != nil {
		return err
	}
	tcp, err := g.Listen(ctx, cfg.addr)
	if err != nil {
		return err
	}
	ln := &cappedListener{Listener: tcp, max: int64(maxConns)}
	s.metrics.conns = ln
	srv := &http.Server{
		Handler:           s.guarded(g),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // the request; the answer has a deadline per run
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Tests and scripts read the address here (with -addr 127.0.0.1:0).
	log.Info("listening", "addr", ln.Addr().String(), "max_concurrent", cfg.maxConcurrent, "max_queue", cfg.maxQueue,
		"best_effort", cfg.bestEffort, "pool", cfg.pool, "replica", cfg.replica, "max_sessions", cfg.maxSessions,
		"max_connections", maxConns)
	failed := make(chan error, 1)
	go func() { failed <- srv.Serve(ln) }()
	select {
	case err := <-failed:
		return err
	case <-ctx.Done():
	}
	stop() // a second signal kills the process at once
	log.Info("shutting down", "in_flight", s.metrics.inFlight.Load(), "queued", s.metrics.queued.Load())

	// Refuse new runs and cancel the ones in flight, end every session
	// (its requests in flight end with it, and later ones get 404 saying
	// the session ended with its replica); Shutdown then waits for the
	// handlers, which answer once their sandboxes are closed. The pooled
	// Sandbox is closed last.
	s.drain()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s.closeSessions(drained)
	}()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: runs still in flight after -shutdown-timeout %s: %w", cfg.shutdownTimeout, err)
	}
	select {
	case <-ended:
	case <-sctx.Done():
		return fmt.Errorf("shutdown: sessions still ending after -shutdown-timeout %s", cfg.shutdownTimeout)
	}
	s.close()
	log.Info("stopped", "runs", s.metrics.total())
	return nil
}
