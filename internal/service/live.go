package service

import (
	"context"
	"errors"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
	"net"
)

// The calls of a live sandbox that sessions make, in one place.

// liveOptions makes o a live sandbox's: its processes, /tmp and /workspace
// last across calls until the session ends.
//
// The server ends a session at its idle timeout and lifetime itself: idle
// means no request in the session, and some requests (a proxied
// connection, a file listing) are not calls the library would count. So
// the library's idle timeout is off, and its lifetime stands a minute
// behind the server's, should the server fail to end it.
func liveOptions(o *sandbox.Options, idle, life time.Duration) {
	o.Workspace = nil
	o.Live = &sandbox.Live{IdleTimeout: -1, MaxLifetime: life + time.Minute}
}

// processes lists what is alive in the session's sandbox.
func (ss *session) processes(ctx context.Context) ([]processInfo, error) {
	list, err := ss.sb.Processes(ctx)
	if err != nil {
		return nil, err
	}
	out := []processInfo{}
	for _, p := range list {
		args := p.Args
		if args == nil {
			args = []string{}
		}
		out = append(out, processInfo{Pid: p.Pid, PPid: p.PPid, Args: args, State: p.State, CPUNS: p.CPU.Nanoseconds(), RSS: p.RSS})
	}
	return out, nil
}

// signal sends sig to the process with pid inside the session's sandbox.
func (ss *session) signal(pid int, sig syscall.Signal) error {
	return ss.sb.Signal(pid, sig)
}

// dial connects to address on the sandbox's loopback.
func (ss *session) dial(ctx context.Context, address string) (net.Conn, error) {
	return ss.sb.DialContext(ctx, "tcp", address)
}

// sessionCallError is the answer to a call on a session's sandbox that
// failed.
func sessionCallError(err error) *apiError {
	switch {
	case errors.Is(err, os.ErrProcessDone), errors.Is(err, syscall.ESRCH):
		return &apiError{status: http.StatusNotFound, msg: "no such process in the session: " + err.Error()}
	case errors.Is(err, sandbox.ErrClosed):
		return &apiError{status: http.StatusNotFound, field: "id", msg: "the session ended: " + err.Error() + "; create a new session"}
	case errors.Is(err, sandbox.ErrInvalidOption):
		return &apiError{status: http.StatusBadRequest, msg: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, msg: err.Error()}
}
