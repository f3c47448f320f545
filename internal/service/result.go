package service

import (
	"strings"
	"time"

	"github.com/fumehood/sandbox"
)

// runResponse is the answer to a run: the body in JSON mode, and the
// "result" of a stream's last line.
type runResponse struct {
	ID string `json:"id"`
	// Cause is how the run ended as a metric label: the Outcome's name
	// with underscores (exited, signaled, timeout, canceled, out_of_memory,
	// seccomp_kill), or "error" when there is no Result.
	Cause string `json:"cause"`
	// Error says what went wrong: the run could not be made, or it was
	// killed at its timeout or by the server's shutdown.
	Error string `json:"error,omitempty"`
	// Field is the request field at fault when the request could not
	// run as given (400), e.g. "command" for a command line too long.
	Field string `json:"field,omitempty"`
	// DurationNS is the run as the server saw it, the sandbox's set-up
	// and removal included.
	DurationNS int64 `json:"duration_ns"`
	// Result is the run's, as it serialises itself, with its Stdout and
	// Stderr left empty: writeAnswer writes the output in their place, and
	// when streaming the output went in events. Nil when there is no
	// Result.
	*sandbox.Result
}

// causeOf is how a run ended, as a metric label.
func causeOf(r *sandbox.Result) string {
	if r == nil {
		return "error"
	}
	return strings.ReplaceAll(r.Outcome.String(), " ", "_")
}

func newRunResponse(id string, r *sandbox.Result, elapsed time.Duration) *runResponse {
	resp := &runResponse{ID: id, Cause: causeOf(r), DurationNS: elapsed.Nanoseconds()}
	if r != nil {
		res := *r
		res.Stdout, res.Stderr = nil, nil
		resp.Result = &res
	}
	return resp
}
