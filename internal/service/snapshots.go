package service

import (
	"fmt"
	"net/http"
	"strconv"
)

// A session's snapshots: its workspace at one moment, to restore later.
// On a live sandbox, Restore and Reset end every process of the session
// (the next call starts its sandbox anew on the workspace they leave).

// takeSnapshot answers POST /v1/sessions/{id}/snapshots.
func (s *server) takeSnapshot(w http.ResponseWriter, r *http.Request, ss *session) {
	ss.mu.Lock()
	full := len(ss.snaps) >= maxSnapshots
	ss.mu.Unlock()
	if full {
		s.refuse(w, ss.id, &apiError{status: http.StatusConflict,
			msg: fmt.Sprintf("session %s holds %d snapshots, its most: delete one (DELETE /v1/sessions/{id}/snapshots/{snapshot})", ss.id, maxSnapshots)})
		return
	}
	// The library takes a snapshot once no call is in flight, and a
	// process started through the API is a call until it ends: the
	// snapshot would wait for it for ever.
	if n := ss.runningBackground(); n > 0 {
		s.refuse(w, ss.id, &apiError{status: http.StatusConflict,
			msg: fmt.Sprintf("session %s runs %d background processes started through the API, and a snapshot waits until none does: signal them first (or start long-lived processes from a run, with &)", ss.id, n)})
		return
	}
	snap, err := ss.sb.Snapshot()
	if err != nil {
		s.refuse(w, ss.id, sessionCallError(err))
		return
	}
	ss.mu.Lock()
	if ss.snaps == nil { // the session ended meanwhile
		ss.mu.Unlock()
		snap.Release()
		s.refuse(w, ss.id, &apiError{status: http.StatusNotFound, field: "id", msg: "the session ended; create a new session"})
		return
	}
	ss.nextSnap++
	name := strconv.Itoa(ss.nextSnap)
	ss.snaps[name] = snap
	ss.mu.Unlock()
	writeJSON(w, http.StatusCreated, snapshotInfo{Snapshot: name})
}

// snapshotInfo names a snapshot in answers and requests.
type snapshotInfo struct {
	Snapshot string `json:"snapshot"`
}

func (ss *session) snapshot(name string) *apiError {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.snaps[name] == nil {
		return &apiError{status: http.StatusNotFound, field: "snapshot", msg: fmt.Sprintf("snapshot %q: no such snapshot in session %s", name, ss.id)}
	}
	return nil
}

// deleteSnapshot answers DELETE /v1/sessions/{id}/snapshots/{snapshot}.
func (s *server) deleteSnapshot(w http.ResponseWriter, r *http.Request, ss *session) {
	name := r.PathValue("snapshot")
	if aerr := ss.snapshot(name); aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	ss.mu.Lock()
	snap := ss.snaps[name]
	delete(ss.snaps, name)
	ss.mu.Unlock()
	if snap != nil {
		snap.Release()
	}
	w.WriteHeader(http.StatusNoContent)
}

// restoreSnapshot answers POST /v1/sessions/{id}/restore: the workspace
// becomes the snapshot's, and every process of the session ends.
func (s *server) restoreSnapshot(w http.ResponseWriter, r *http.Request, ss *session) {
	if aerr := s.admitBody(w, r); aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	var req snapshotInfo
	aerr := decodeJSON(http.MaxBytesReader(w, r.Body, maxBody), &req)
	s.doneReading(r)
	if aerr == nil {
		aerr = ss.snapshot(req.Snapshot)
	}
	if aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	ss.mu.Lock()
	snap := ss.snaps[req.Snapshot]
	ss.mu.Unlock()
	if snap == nil {
		s.refuse(w, ss.id, &apiError{status: http.StatusNotFound, field: "snapshot", msg: fmt.Sprintf("snapshot %q was deleted meanwhile", req.Snapshot)})
		return
	}
	ss.endBackground()
	if err := ss.sb.Restore(snap); err != nil {
		s.refuse(w, ss.id, sessionCallError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resetSession answers POST /v1/sessions/{id}/reset: the workspace is
// emptied, and every process of the session ends.
func (s *server) resetSession(w http.ResponseWriter, r *http.Request, ss *session) {
	ss.endBackground()
	if err := ss.sb.Reset(); err != nil {
		s.refuse(w, ss.id, sessionCallError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
