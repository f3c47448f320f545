package service

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
)

// The files of a session's /workspace, in and out. A path is relative to
// /workspace (or absolute within it), given in the query: ?path=src/a.py.

// maxFile bounds a file put or got whole: the server holds it in memory
// on its way. A tar of a directory streams, and is bounded by the
// workspace's size only.
const maxFile = 16 << 20

// pathOf reads the query's path; empty means the workspace itself where
// a directory is meant.
func pathOf(r *http.Request, dir bool) (string, *apiError) {
	p := r.URL.Query().Get("path")
	if p == "" && !dir {
		return "", badField("path", "missing: the file's path in the workspace, e.g. ?path=src/main.py")
	}
	if p == "" {
		p = "."
	}
	return p, nil
}

// fileError is the answer to a file operation that failed.
func fileError(err error, path string) *apiError {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &apiError{status: http.StatusNotFound, field: "path", msg: fmt.Sprintf("path %q: %v", path, err)}
	case errors.Is(err, sandbox.ErrOutsideWorkspace), errors.Is(err, fs.ErrInvalid), errors.Is(err, fs.ErrExist):
		return &apiError{status: http.StatusBadRequest, field: "path", msg: fmt.Sprintf("path %q: %v", path, err)}
	case errors.Is(err, sandbox.ErrClosed):
		return &apiError{status: http.StatusNotFound, field: "id", msg: "the session ended: " + err.Error() + "; create a new session"}
	}
	return &apiError{status: http.StatusInternalServerError, msg: fmt.Sprintf("path %q: %v", path, err)}
}

// putFile answers PUT /v1/sessions/{id}/files?path=P: the body becomes the
// file's content (mode 0644), its directories made as needed.
func (s *server) putFile(w http.ResponseWriter, r *http.Request, ss *session) {
	p, aerr := pathOf(r, false)
	if aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFile))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.refuse(w, ss.id, &apiError{status: http.StatusRequestEntityTooLarge, field: "body",
			msg: fmt.Sprintf("body: larger than %d bytes; send a tar (PUT /v1/sessions/{id}/tar) for more", maxFile)})
		return
	case err != nil:
		s.refuse(w, ss.id, badField("body", "%v", err))
		return
	}
	if err := ss.sb.WriteFile(p, data, 0o644); err != nil { // its directories made as needed
		s.refuse(w, ss.id, fileError(err, p))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getFile answers GET /v1/sessions/{id}/files?path=P with the file's
// content.
func (s *server) getFile(w http.ResponseWriter, r *http.Request, ss *session) {
	p, aerr := pathOf(r, false)
	if aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	st, err := ss.sb.Stat(p)
	switch {
	case err != nil:
		s.refuse(w, ss.id, fileError(err, p))
		return
	case !st.Mode.IsRegular():
		s.refuse(w, ss.id, badField("path", "%q is a %s, not a regular file: list a directory with GET /v1/sessions/{id}/dir, fetch it with GET /v1/sessions/{id}/tar", p, st.Mode.Type()))
		return
	case st.Size > maxFile:
		s.refuse(w, ss.id, &apiError{status: http.StatusRequestEntityTooLarge, field: "path",
			msg: fmt.Sprintf("path %q: %d bytes, above the %d a file is served whole; fetch it with GET /v1/sessions/{id}/tar", p, st.Size, maxFile)})
		return
	}
	data, err := ss.sb.ReadFile(p)
	if err != nil {
		s.refuse(w, ss.id, fileError(err, p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(data)
}

// dirEntry describes a name in the workspace.
type dirEntry struct {
	Name    string    `json:"name"`
	Type    string    `json:"type"` // "file", "dir", "symlink" or "other"
	Mode    string    `json:"mode"` // permission bits in octal, e.g. "0644"
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty"` // a symlink's
}

// listDir answers GET /v1/sessions/{id}/dir?path=P: the names in a
// directory of the workspace, symlinks described, not followed.
func (s *server) listDir(w http.ResponseWriter, r *http.Request, ss *session) {
	p, _ := pathOf(r, true)
	entries, err := ss.sb.ReadDir(p)
	if err != nil {
		s.refuse(w, ss.id, fileError(err, p))
		return
	}
	out := struct {
		Path    string     `json:"path"`
		Entries []dirEntry `json:"entries"`
	}{Path: p, Entries: []dirEntry{}}
	for _, e := range entries {
		typ := "other"
		switch {
		case e.Mode.IsRegular():
			typ = "file"
		case e.Mode.IsDir():
			typ = "dir"
		case e.Mode&fs.ModeSymlink != 0:
			typ = "symlink"
		}
		out.Entries = append(out.Entries, dirEntry{Name: e.Name, Type: typ, Mode: fmt.Sprintf("%04o", e.Mode.Perm()),
			Size: e.Size, ModTime: e.ModTime.UTC(), Target: e.Target})
	}
	writeJSON(w, http.StatusOK, out)
}

// getTar answers GET /v1/sessions/{id}/tar?path=P with a tar of the
// directory, streamed as it is written.
func (s *server) getTar(w http.ResponseWriter, r *http.Request, ss *session) {
	p, _ := pathOf(r, true)
	st, err := ss.sb.Stat(p)
	if err == nil && !st.Mode.IsDir() {
		err = fmt.Errorf("not a directory: %w", fs.ErrInvalid)
	}
	if err != nil {
		s.refuse(w, ss.id, fileError(err, p))
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := ss.sb.WriteTar(w, p); err != nil {
		// The status is sent: the client sees a tar cut short.
		ss.log.Warn("tar of a directory cut short", "path", p, "err", err)
	}
}

// putTar answers PUT /v1/sessions/{id}/tar?path=P: the body, a tar, is
// extracted into the directory, made as needed. A file in it larger than
// the workspace holds (by the size its header declares, holes included)
// is refused with 413 before its content is read; the request's end
// stops the extraction.
func (s *server) putTar(w http.ResponseWriter, r *http.Request, ss *session) {
	p, _ := pathOf(r, true)
	if err := ss.sb.ExtractTar(r.Context(), r.Body, p); err != nil { // dir made as needed
		aerr := fileError(err, p)
		if errors.Is(err, syscall.EFBIG) {
			aerr = &apiError{status: http.StatusRequestEntityTooLarge, field: "body", msg: fmt.Sprintf("not extracted: %v", err)}
		} else if aerr.status == http.StatusInternalServerError {
			aerr = badField("body", "not extracted: %v", err)
		}
		s.refuse(w, ss.id, aerr)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
