package service

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/access"
)

// server answers the HTTP API. Its slots bound the runs at once; requests
// beyond them wait in a queue of at most -max-queue, and beyond that are
// refused with 429.
type server struct {
	cfg       *config
	log       *slog.Logger
	metrics   *metrics
	languages map[string]language
	slots     chan struct{}
	// reading bounds the requests whose bodies are read and checked at
	// once, to as many as could run and wait (-max-concurrent plus
	// -max-queue): each holds up to maxBody bytes and their decoding.
	// A request beyond them is refused with 429 before its body is read.
	reading chan struct{}
	// stopping ends when shutdown begins: it cancels the runs in flight
	// and turns away the requests in the queue.
	stopping context.Context
	drain    context.CancelFunc
	// pooled is the Sandbox of the default limits with -pool, else nil.
	pooled *sandbox.Sandbox
	// sessions are the live sandboxes clients keep across requests.
	sessions sessionTable
	// audit receives the audit trail of every Sandbox (-audit); nil: none.
	audit slog.Handler
	// policies are the tenants' quotas (-tenants).
	policies *policies
}

var (
	errFull         = errors.New("too many runs: every slot is busy and the queue is full; retry later")
	errShuttingDown = errors.New("the server is shutting down")
)

func newServer(cfg *config, log *slog.Logger, audit slog.Handler) *server {
	s := &server{cfg: cfg, log: log, audit: audit, metrics: newMetrics(), languages: hostLanguages(),
		slots: make(chan struct{}, cfg.maxConcurrent), reading: make(chan struct{}, cfg.maxConcurrent+cfg.maxQueue)}
	s.policies, _ = loadPolicies("", cfg) // none; serve sets the -tenants file's
	s.stopping, s.drain = context.WithCancel(context.Background())
	s.sessions = sessionTable{byID: map[string]*session{}, ended: map[string]string{}}
	go s.expireSessions(sessionTick)
	for name, l := range s.languages {
		if l.missing != "" {
			log.Warn("language not available", "language", name, "reason", l.missing)
		}
	}
	if cfg.pool > 0 {
		opts := s.options(s.defaultLimits(), nil, nil, log, access.DefaultTenant)
		opts.Start = sandbox.Pool{Size: cfg.pool}
		s.pooled = sandbox.New(opts)
	}
	return s
}

// close ends every session, and closes the pooled Sandbox, if any, once
// no run uses it. A second close does nothing.
func (s *server) close() {
	s.closeSessions(drained)
	if s.pooled != nil {
		s.pooled.Close()
	}
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	// Without a method in the pattern, so that a wrong method gets a
	// JSON error that says which method to use.
	mux.HandleFunc("/v1/runs", s.handleRun)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.stopping.Err() != nil {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("GET /metrics", s.metrics.serve)

	// Sessions: live sandboxes kept across requests (session*.go).
	mux.HandleFunc("POST /v1/sessions", s.createSession)
	mux.HandleFunc("GET /v1/sessions/{id}", s.getSession)
	mux.HandleFunc("DELETE /v1/sessions/{id}", s.deleteSession)
	mux.HandleFunc("/v1/sessions/{id}/runs", s.runInSession)
	mux.HandleFunc("POST /v1/sessions/{id}/processes", s.sessionRoute(s.startBackground))
	mux.HandleFunc("GET /v1/sessions/{id}/processes", s.sessionRoute(s.listProcesses))
	mux.HandleFunc("GET /v1/sessions/{id}/processes/{pid}", s.sessionRoute(s.getBackground))
	mux.HandleFunc("POST /v1/sessions/{id}/processes/{pid}/signal", s.sessionRoute(s.signalProcess))
	mux.HandleFunc("PUT /v1/sessions/{id}/files", s.sessionRoute(s.putFile))
	mux.HandleFunc("GET /v1/sessions/{id}/files", s.sessionRoute(s.getFile))
	mux.HandleFunc("GET /v1/sessions/{id}/dir", s.sessionRoute(s.listDir))
	mux.HandleFunc("GET /v1/sessions/{id}/tar", s.sessionRoute(s.getTar))
	mux.HandleFunc("PUT /v1/sessions/{id}/tar", s.sessionRoute(s.putTar))
	mux.HandleFunc("POST /v1/sessions/{id}/snapshots", s.sessionRoute(s.takeSnapshot))
	mux.HandleFunc("DELETE /v1/sessions/{id}/snapshots/{snapshot}", s.sessionRoute(s.deleteSnapshot))
	mux.HandleFunc("POST /v1/sessions/{id}/restore", s.sessionRoute(s.restoreSnapshot))
	mux.HandleFunc("POST /v1/sessions/{id}/reset", s.sessionRoute(s.resetSession))
	mux.HandleFunc("/v1/sessions/{id}/ports/{port}/{path...}", s.sessionRoute(s.proxyPort))
	return jsonMuxErrors(mux)
}

func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	s.serveRun(w, r, func(req *runRequest) (*runSpec, *apiError) { return s.cfgFor(tenantOf(r)).validate(req, s.languages) }, nil)
}

// serveRun answers a request to run a program: it admits the request with
// check, waits for a slot, and runs the program in sess, or in a sandbox
// of its own when sess is nil.
func (s *server) serveRun(w http.ResponseWriter, r *http.Request, check func(*runRequest) (*runSpec, *apiError), sess *session) {
	id := rand.Text()
	w.Header().Set("X-Run-Id", id)
	spec, aerr := s.admit(w, r, check)
	if aerr != nil && aerr.status == http.StatusTooManyRequests {
		// Refused before its body was read: closing the connection
		// spares reading the body just to reuse it (net/http would
		// otherwise wait for up to 256 KiB of it before answering).
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
	}
	if aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	tenant := tenantOf(r)
	if aerr := s.policies.takeRun(tenant); aerr != nil {
		aerr.label = s.tenantLabel(r)
		s.refuse(w, id, aerr)
		return
	}
	defer s.policies.dropRun(tenant)
	switch err := s.acquire(r.Context()); {
	case errors.Is(err, errFull):
		w.Header().Set("Retry-After", "1")
		s.refuse(w, id, &apiError{status: http.StatusTooManyRequests, msg: err.Error()})
		return
	case errors.Is(err, errShuttingDown):
		s.refuse(w, id, &apiError{status: http.StatusServiceUnavailable, msg: err.Error()})
		return
	case err != nil:
		s.log.Info("request abandoned in the queue", "id", id, "err", err)
		return
	}
	s.run(w, r, id, spec, sess)
}

// admit checks the method, the content type and the body of a request
// (the body with check), and that the server is not shutting down.
func (s *server) admit(w http.ResponseWriter, r *http.Request, check func(*runRequest) (*runSpec, *apiError)) (*runSpec, *apiError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, &apiError{status: http.StatusMethodNotAllowed, msg: r.Method + " " + r.URL.Path + ": only POST"}
	}
	if aerr := s.admitBody(w, r); aerr != nil {
		return nil, aerr
	}
	defer s.doneReading(r)
	req, aerr := decodeRequest(http.MaxBytesReader(w, r.Body, maxBody))
	if aerr != nil {
		return nil, aerr
	}
	spec, aerr := check(req)
	if aerr != nil {
		return nil, aerr
	}
	if strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		spec.stream = true
	}
	return spec, nil
}

// admitBody checks a JSON request's content type and that the server is
// not shutting down, and takes a place among the bodies being read, which
// the caller gives back (s.doneReading) once it has read and checked it.
// A tenant holds at most its share of those places (readersFor), so that
// one tenant sending bodies slowly cannot hold the places others need.
func (s *server) admitBody(w http.ResponseWriter, r *http.Request) *apiError {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &apiError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
			msg: "Content-Type: want application/json, not " + strings.TrimSpace(r.Header.Get("Content-Type"))}
	}
	if s.stopping.Err() != nil {
		return &apiError{status: http.StatusServiceUnavailable, msg: errShuttingDown.Error()}
	}
	tenant := tenantOf(r)
	if aerr := s.policies.takeReader(tenant, s.readersFor(tenant)); aerr != nil {
		aerr.label = s.tenantLabel(r)
		return aerr
	}
	select {
	case s.reading <- struct{}{}:
		return nil
	default:
		s.policies.dropReader(tenant)
		return &apiError{status: http.StatusTooManyRequests, msg: errFull.Error()}
	}
}

// doneReading gives back the place admitBody took for r's body.
func (s *server) doneReading(r *http.Request) {
	<-s.reading
	s.policies.dropReader(tenantOf(r))
}

// acquire takes a slot for a run, waiting in the queue if there is room
// in it. It fails with errFull, errShuttingDown, or the error of ctx when
// the client goes away while waiting.
func (s *server) acquire(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
	default:
		if s.metrics.queued.Add(1) > int64(s.cfg.maxQueue) {
			s.metrics.queued.Add(-1)
			return errFull
		}
		defer s.metrics.queued.Add(-1)
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stopping.Done():
			return errShuttingDown
		}
	}
	if s.stopping.Err() != nil {
		<-s.slots
		return errShuttingDown
	}
	s.metrics.inFlight.Add(1)
	return nil
}

func (s *server) release() {
	s.metrics.inFlight.Add(-1)
	<-s.slots
}

// errorBody is the answer to a refused request.
type errorBody struct {
	ID    string `json:"id"`
	Error string `json:"error"`
	Field string `json:"field,omitempty"` // the request field at fault, e.g. "limits.memory"
	// Quota names the tenant's quota a 429 is for: "sessions", "runs",
	// "rate", or "queue" for the server's own slots and queue.
	Quota string `json:"quota,omitempty"`
}

// refuse answers a request that did not run, counts and logs it.
func (s *server) refuse(w http.ResponseWriter, id string, e *apiError) {
	reason := "invalid"
	switch e.status {
	case http.StatusTooManyRequests:
		reason = "full"
		if e.quota != "" {
			reason = "quota"
			if e.label != "" {
				s.metrics.rejectQuota(e.label, e.quota)
			}
			w.Header().Set("Retry-After", retryAfter(e.retry))
		}
	case http.StatusServiceUnavailable:
		reason = "shutting_down"
	case http.StatusNotFound:
		reason = "not_found"
	}
	s.metrics.reject(reason)
	s.log.Info("rejected", "id", id, "reason", reason, "status", e.status, "field", e.field, "quota", e.quota, "err", e.msg)
	writeJSON(w, e.status, errorBody{ID: id, Error: e.msg, Field: e.field, Quota: e.quota})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // a failed write means the client is gone
}
