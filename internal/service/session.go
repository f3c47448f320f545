package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fumehood/sandbox"
)

// session is a live sandbox a client keeps across requests: its processes,
// /tmp and /workspace last until it is deleted, stays idle for its idle
// timeout, reaches its maximum lifetime, or the server shuts down.
type session struct {
	id      string
	tenant  string // the tenant that created it, the only one that sees it
	label   string // its tenant in metrics (tenantLabel)
	image   string // the image the session's root is from; empty: the host's
	sb      *sandbox.Sandbox
	limits  limitSet
	egress  []string
	idle    time.Duration // ends after this long with no request in it
	life    time.Duration // ends this long after it was created
	created time.Time
	log     *slog.Logger
	// ctx ends when the session does: background processes are started
	// with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	active   int       // requests in the session now
	lastUsed time.Time // when the last request in it ended
	ended    string    // why it ended; "" while it lives
	snaps    map[string]*sandbox.Snapshot
	nextSnap int
	procs    map[int]*background // by pid inside the sandbox

	sessionTransport // for the port proxy
}

// maxSnapshots bounds a session's snapshots: each holds a copy of the
// workspace's changed files in memory (the workspace's tmpfs).
const maxSnapshots = 8

// maxBackground bounds the background processes a session remembers
// (running or ended, with their kept output); -max-pids bounds what runs.
const maxBackground = 64

// drained is why sessions end when their replica shuts down.
const drained = "its replica is shutting down (drained or restarted), and its sessions end with it"

// errSessionEnded is a request for a session that ended meanwhile.
var errSessionEnded = errors.New("the session ended")

// use counts a request in the session; done ends it. use fails when the
// session has ended.
func (ss *session) use() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended != "" {
		return fmt.Errorf("%w: %s", errSessionEnded, ss.ended)
	}
	ss.active++
	return nil
}

func (ss *session) done() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.active--
	ss.lastUsed = time.Now()
}

// endedWhy says why the session ended, or "" while it lives.
func (ss *session) endedWhy() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.ended
}

// run runs cmd in the session and waits for it; processes it leaves in the
// background keep running.
func (ss *session) run(ctx context.Context, cmd *sandbox.Cmd) (*sandbox.Result, error) {
	return ss.sb.Run(ctx, cmd)
}

// expiry says why the session should end now, or "" if it should not.
func (ss *session) expiry(now time.Time) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.ended != "":
		return ""
	case ss.life > 0 && now.Sub(ss.created) >= ss.life:
		return fmt.Sprintf("it reached its max_lifetime of %s", ss.life)
	case ss.active == 0 && now.Sub(ss.lastUsed) >= ss.idle:
		return fmt.Sprintf("it was idle for its idle_timeout of %s", ss.idle)
	}
	return ""
}

// sessionTable holds the server's live sessions, at most -max-sessions.
type sessionTable struct {
	mu   sync.Mutex
	byID map[string]*session
	// closing counts sessions removed from byID whose sandboxes are still
	// being closed: they count against -max-sessions until they are gone.
	closing int
	// ended remembers why recent sessions ended, for a clearer 404; it
	// is bounded and forgets the oldest.
	ended    map[string]string
	endOrder []string
}

// maxEnded bounds how many ended sessions' reasons the server remembers.
const maxEnded = 1024

var errTooManySessions = errors.New("too many sessions: the server holds its -max-sessions; delete one or retry later")

// newSessionID makes an unguessable id that names the replica owning it:
// "<replica>.<130 random bits in base32>".
func newSessionID(replica string) string { return replica + "." + rand.Text() }

// reserve makes room for a session, or fails with errTooManySessions; add
// or unreserve ends the reservation.
func (t *sessionTable) reserve(max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID)+t.closing >= max {
		return errTooManySessions
	}
	t.closing++ // held as if closing until add or unreserve
	return nil
}

func (t *sessionTable) add(ss *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closing--
	t.byID[ss.id] = ss
}

func (t *sessionTable) unreserve() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closing--
}

func (t *sessionTable) get(id string) (*session, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id], t.ended[id]
}

func (t *sessionTable) all() []*session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.byID))
}

// remove takes ss out of the table, for the reason why, and reports
// whether it was there: only one caller ends a session.
func (t *sessionTable) remove(ss *session, why string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[ss.id] != ss {
		return false
	}
	delete(t.byID, ss.id)
	t.closing++
	if len(t.endOrder) >= maxEnded {
		delete(t.ended, t.endOrder[0])
		t.endOrder = t.endOrder[1:]
	}
	t.ended[ss.id] = why
	t.endOrder = append(t.endOrder, ss.id)
	return true
}

func (t *sessionTable) closed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closing--
}

// endSession ends ss for the reason why: new requests for it get 404
// saying why, its processes are killed and its sandbox is removed before
// endSession returns. It returns false if ss had already ended.
func (s *server) endSession(ss *session, why string) bool {
	if !s.sessions.remove(ss, why) {
		return false
	}
	defer s.sessions.closed()
	ss.mu.Lock()
	ss.ended = why
	snaps := ss.snaps
	ss.snaps = nil
	ss.mu.Unlock()
	ss.cancel()
	ss.closeTransport()
	defer s.policies.dropSession(ss.tenant)
	for _, snap := range snaps {
		snap.Release()
	}
	err := ss.sb.Close()
	s.metrics.sessionEnded(ss.label)
	ss.log.Info("session ended", "why", why, "lived", time.Since(ss.created).Round(time.Millisecond).String(), "err", err)
	return true
}

// expireSessions ends the sessions past their idle timeout or lifetime,
// every tick until the server stops.
func (s *server) expireSessions(tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.stopping.Done():
			return
		case now := <-t.C:
			for _, ss := range s.sessions.all() {
				if why := ss.expiry(now); why != "" {
					go s.endSession(ss, why)
				}
			}
		}
	}
}

// closeSessions ends every session, for shutdown.
func (s *server) closeSessions(why string) {
	var wg sync.WaitGroup
	for _, ss := range s.sessions.all() {
		wg.Go(func() { s.endSession(ss, why) })
	}
	wg.Wait()
}

// sessionRequest is the body of POST /v1/sessions.
type sessionRequest struct {
	Env         map[string]string `json:"env"` // every process's, added to PATH, HOME and LANG
	Limits      requestLimits     `json:"limits"`
	Network     string            `json:"network"`
	Egress      []string          `json:"egress"`
	SeccompKill bool              `json:"seccomp_kill"`
	Image       string            `json:"image"`        // one of the server's -images; empty: the host's /usr
	Secrets     []string          `json:"secrets"`      // names of the tenant's secrets, as in a run's request
	IdleTimeout quantity          `json:"idle_timeout"` // a duration or seconds; default and maximum -max-idle-timeout
	MaxLifetime quantity          `json:"max_lifetime"` // a duration or seconds; default and maximum -max-lifetime
}

// sessionInfo describes a session in answers.
type sessionInfo struct {
	ID          string     `json:"id"`
	Replica     string     `json:"replica"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"` // at its max_lifetime
	LastUsedAt  time.Time  `json:"last_used_at"`
	IdleTimeout string     `json:"idle_timeout"`
	MaxLifetime string     `json:"max_lifetime"`
	Limits      limitsInfo `json:"limits"`
	Network     string     `json:"network"`
	Egress      []string   `json:"egress"` // never null
	Active      int        `json:"active_requests"`
	Background  int        `json:"background_processes"` // started through the API and still running
	Snapshots   []string   `json:"snapshots"`            // never null
	Image       string     `json:"image,omitempty"`
}

// limitsInfo are a session's resolved limits.
type limitsInfo struct {
	Memory      int64   `json:"memory"` // bytes
	CPUs        float64 `json:"cpus"`
	Pids        int64   `json:"pids"`
	Output      int64   `json:"output"` // bytes
	SeccompKill bool    `json:"seccomp_kill"`
}

func (ss *session) info(replica string) sessionInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	in := sessionInfo{ID: ss.id, Replica: replica, CreatedAt: ss.created, ExpiresAt: ss.created.Add(ss.life),
		LastUsedAt: ss.lastUsed, IdleTimeout: ss.idle.String(), MaxLifetime: ss.life.String(),
		Limits:  limitsInfo{Memory: ss.limits.memory, CPUs: ss.limits.cpus, Pids: ss.limits.pids, Output: ss.limits.output, SeccompKill: ss.limits.seccompKill},
		Network: "none", Egress: []string{}, Active: ss.active, Snapshots: []string{}, Image: ss.image}
	if ss.egress != nil {
		in.Network, in.Egress = "allow", ss.egress
	}
	for _, p := range ss.procs {
		if p.running() {
			in.Background++
		}
	}
	// Oldest first: the names count up.
	in.Snapshots = append(in.Snapshots, slices.SortedFunc(maps.Keys(ss.snaps), func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})...)
	return in
}

// durationField resolves a session's duration: a Go duration or a number
// of seconds, at least a second and at most max; empty means max.
func durationField(field string, q quantity, max time.Duration) (time.Duration, *apiError) {
	s := string(q)
	if s == "" {
		return max, nil
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if !(f >= 1) || f > max.Seconds() {
			return 0, badField(field, "%s: want at least 1 second and at most the server's maximum %s", s, max)
		}
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, badField(field, "%q: want a duration such as \"10m\" or a number of seconds", s)
	}
	switch {
	case d < time.Second:
		return 0, badField(field, "%q: must be at least 1s", s)
	case d > max:
		return 0, badField(field, "%q is above the server's maximum %s", s, max)
	}
	return d, nil
}

// createSession answers POST /v1/sessions.
func (s *server) createSession(w http.ResponseWriter, r *http.Request) {
	id := newSessionID(s.cfg.replica)
	if aerr := s.admitBody(w, r); aerr != nil {
		if aerr.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
		}
		s.refuse(w, id, aerr)
		return
	}
	var req sessionRequest
	aerr := decodeJSON(http.MaxBytesReader(w, r.Body, maxBody), &req)
	s.doneReading(r)
	if aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	ss := &session{id: id, tenant: tenantOf(r), label: s.tenantLabel(r), created: time.Now(), snaps: map[string]*sandbox.Snapshot{}, procs: map[int]*background{}}
	ss.lastUsed = ss.created
	if ss.limits, ss.egress, aerr = s.cfgFor(ss.tenant).sandboxOf(req.Limits, req.Network, req.Egress, req.SeccompKill); aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	if req.Limits.Timeout != "" {
		s.refuse(w, id, badField("limits.timeout", "a session has no timeout: give one with each run, and idle_timeout or max_lifetime for the session"))
		return
	}
	if ss.idle, aerr = durationField("idle_timeout", req.IdleTimeout, s.cfg.maxIdle); aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	if ss.life, aerr = durationField("max_lifetime", req.MaxLifetime, s.cfg.maxLifetime); aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	env, aerr := envOf(req.Env)
	if aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	secrets, aerr := s.cfgFor(ss.tenant).secretsOf(req.Secrets)
	if aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	if images := s.cfgFor(ss.tenant).images; req.Image != "" && !slices.Contains(images, req.Image) {
		c := s.cfgFor(ss.tenant)
		s.refuse(w, id, badField("image", "%q is not one of the images this server offers (%s %s list): %q", req.Image, c.whose(), c.listName("images"), images))
		return
	}
	ss.image = req.Image
	if s.stopping.Err() != nil {
		s.refuse(w, id, &apiError{status: http.StatusServiceUnavailable, msg: errShuttingDown.Error()})
		return
	}
	if s.cfg.maxSessions == 0 {
		s.refuse(w, id, &apiError{status: http.StatusNotImplemented, msg: "this server offers no sessions (-max-sessions=0): use POST /v1/runs"})
		return
	}
	if aerr := s.policies.takeSession(ss.tenant); aerr != nil {
		aerr.label = ss.label
		s.refuse(w, id, aerr)
		return
	}
	if err := s.sessions.reserve(s.cfg.maxSessions); err != nil {
		s.policies.dropSession(ss.tenant)
		w.Header().Set("Retry-After", "1")
		s.refuse(w, id, &apiError{status: http.StatusTooManyRequests, msg: err.Error()})
		return
	}
	ss.log = s.log.With("session", id, "tenant", ss.tenant)
	opts := s.options(ss.limits, ss.egress, secrets, ss.log, ss.tenant)
	opts.Env = env
	if ss.image != "" {
		// Pulled at the session's first call, and held until it ends.
		opts.Root = &sandbox.Image{Ref: ss.image, Store: s.cfg.imageStore}
	}
	liveOptions(&opts, ss.idle, ss.life)
	ss.sb = sandbox.New(opts)
	if err := ss.sb.Err(); err != nil {
		s.sessions.unreserve()
		s.policies.dropSession(ss.tenant)
		ss.sb.Close()
		status := http.StatusInternalServerError
		if errors.Is(err, sandbox.ErrInvalidOption) {
			status = http.StatusBadRequest
		}
		s.refuse(w, id, &apiError{status: status, msg: err.Error()})
		return
	}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	s.sessions.add(ss)
	s.metrics.sessionCreated(ss.label)
	ss.log.Info("session created", "limits", fmt.Sprintf("%+v", ss.limits), "idle_timeout", ss.idle.String(), "max_lifetime", ss.life.String())
	w.Header().Set("Location", "/v1/sessions/"+id)
	writeJSON(w, http.StatusCreated, ss.info(s.cfg.replica))
}
