package service

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The session routes, each answering for one session named by {id}. A
// request for a session of another replica is forwarded to it (peer.go).

// sessionOf finds the session a request names, forwarding the request to
// the replica that owns it when that is another one. It returns nil when
// it has answered the request itself (404, or the owner's answer);
// otherwise the caller ends its use with ss.done().
func (s *server) sessionOf(w http.ResponseWriter, r *http.Request) *session {
	id := r.PathValue("id")
	replica, _, ok := strings.Cut(id, ".")
	if !ok || !validReplica(replica) {
		s.notFound(w, id, fmt.Sprintf("%q is not a session id: ids look like <replica>.<random>, as POST /v1/sessions answers", id))
		return nil
	}
	if replica != s.cfg.replica {
		s.forward(w, r, replica, id)
		return nil
	}
	ss, why := s.sessions.get(id)
	if ss != nil && ss.tenant != tenantOf(r) {
		// Another tenant's session is answered as one that never was,
		// so that its id's existence is not told.
		ss, why = nil, ""
	}
	if ss == nil {
		switch {
		case s.stopping.Err() != nil:
			why = fmt.Sprintf("session %s ended: its replica %s is shutting down (drained or restarted) and its sessions end with it; create a new session", id, replica)
		case why != "":
			why = fmt.Sprintf("session %s ended: %s; create a new session", id, why)
		default:
			why = fmt.Sprintf("no session %s on replica %s: it ended (deleted, expired, or its replica was drained or restarted since) or never was; create a new session", id, replica)
		}
		s.notFound(w, id, why)
		return nil
	}
	if err := ss.use(); err != nil {
		s.notFound(w, id, fmt.Sprintf("session %s: %v; create a new session", id, err))
		return nil
	}
	return ss
}

// notFound answers 404 for the session id.
func (s *server) notFound(w http.ResponseWriter, id, msg string) {
	s.refuse(w, id, &apiError{status: http.StatusNotFound, field: "id", msg: msg})
}

// getSession answers GET /v1/sessions/{id}.
func (s *server) getSession(w http.ResponseWriter, r *http.Request) {
	ss := s.sessionOf(w, r)
	if ss == nil {
		return
	}
	in := ss.info(s.cfg.replica)
	in.Active-- // not counting this request
	ss.done()
	writeJSON(w, http.StatusOK, in)
}

// deleteSession answers DELETE /v1/sessions/{id}: when it answers 204,
// every process of the session is dead and its sandbox removed.
func (s *server) deleteSession(w http.ResponseWriter, r *http.Request) {
	ss := s.sessionOf(w, r)
	if ss == nil {
		return
	}
	ss.done()
	if !s.endSession(ss, "it was deleted") {
		s.notFound(w, ss.id, fmt.Sprintf("session %s ended meanwhile", ss.id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// runInSession answers POST /v1/sessions/{id}/runs: the body and the
// answer of POST /v1/runs, run in the session.
func (s *server) runInSession(w http.ResponseWriter, r *http.Request) {
	ss := s.sessionOf(w, r)
	if ss == nil {
		return
	}
	defer ss.done()
	s.serveRun(w, r, func(req *runRequest) (*runSpec, *apiError) { return s.sessionSpec(ss, req) }, ss)
}

// sessionSpec checks a run's request in ss: the sandbox's limits and
// network are the session's, set when it was created.
func (s *server) sessionSpec(ss *session, req *runRequest) (*runSpec, *apiError) {
	if aerr := sessionFixed(req); aerr != nil {
		return nil, aerr
	}
	spec, aerr := s.cfgFor(ss.tenant).validate(req, s.languages)
	if aerr != nil {
		return nil, aerr
	}
	spec.limits, spec.egress, spec.session = ss.limits, ss.egress, ss.id
	return spec, nil
}

// sessionFixed refuses the fields of a run's request that a session sets
// once, when it is created.
func sessionFixed(req *runRequest) *apiError {
	l := req.Limits
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"limits.memory", l.Memory != ""}, {"limits.cpus", l.CPUs != 0}, {"limits.pids", l.Pids != 0},
		{"limits.output", l.Output != ""}, {"network", req.Network != ""}, {"egress", len(req.Egress) > 0},
		{"seccomp_kill", req.SeccompKill}, {"secrets", len(req.Secrets) > 0},
	} {
		if f.set {
			return badField(f.name, "a session's sandbox has the limits and network it was created with: give %s to POST /v1/sessions", f.name)
		}
	}
	return nil
}

// sessionRoute wraps a handler of a session's route: it finds the session
// (or forwards the request, or answers 404) and counts the request in it.
func (s *server) sessionRoute(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := s.sessionOf(w, r)
		if ss == nil {
			return
		}
		defer ss.done()
		h(w, r, ss)
	}
}

// sessionTick is how often idle and old sessions are looked for: a session
// ends at most this much after its idle timeout or lifetime.
const sessionTick = 250 * time.Millisecond
