package service

import (
	"crypto/rand"
	"net/http"
	"strings"
)

// jsonMuxErrors answers the requests mux has no route for (404) or no
// route with that method for (405, with Allow) with a JSON error, as every
// other refusal is, instead of the mux's plain text.
func jsonMuxErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own answer: only its status and Allow are kept.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		msg := r.Method + " " + r.URL.Path + ": no such route; see the API's description (openapi.yaml)"
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			msg = r.Method + " " + r.URL.Path + ": want " + strings.ReplaceAll(rec.header.Get("Allow"), ", ", " or ")
		}
		if rec.status == 0 || rec.status == http.StatusOK {
			rec.status = http.StatusNotFound
		}
		writeJSON(w, rec.status, errorBody{ID: rand.Text(), Error: msg})
	})
}

// statusRecorder keeps what a handler answers but its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(p), nil
}
func (r *statusRecorder) WriteHeader(status int) { r.status = status }
