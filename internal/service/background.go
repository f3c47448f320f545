package service

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fumehood/sandbox"
)

// backgroundOutput is how much of each of a background process's stdout
// and stderr the server keeps: the last bytes it wrote. With maxBackground
// processes remembered a session, the output a session costs the server is
// bounded by 2*backgroundOutput*maxBackground (2 MiB).
const backgroundOutput = 64 << 10

// background is a process started in a session with POST
// /v1/sessions/{id}/processes, which keeps running between requests.
type background struct {
	pid     int
	argv    []string
	started time.Time
	proc    *sandbox.Process
	stdout  *tailBuffer
	stderr  *tailBuffer

	done chan struct{} // closed once it ended and res and err are set

	mu    sync.Mutex
	ended bool
	res   *sandbox.Result
	err   error
}

func (b *background) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.ended
}

// backgroundInfo describes a background process in answers.
type backgroundInfo struct {
	Pid             int          `json:"pid"` // inside the session's sandbox
	Command         []string     `json:"command"`
	StartedAt       time.Time    `json:"started_at"`
	Running         bool         `json:"running"`
	Stdout          *string      `json:"stdout,omitempty"` // the last bytes it wrote, when asked for one process
	Stderr          *string      `json:"stderr,omitempty"`
	StdoutTruncated bool         `json:"stdout_truncated"` // it wrote more than is kept
	StderrTruncated bool         `json:"stderr_truncated"`
	Result          *runResponse `json:"result,omitempty"` // how it ended, once it has
}

func (b *background) info(withOutput bool) backgroundInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	in := backgroundInfo{Pid: b.pid, Command: clip(b.argv), StartedAt: b.started, Running: !b.ended}
	in.StdoutTruncated, in.StderrTruncated = b.stdout.truncated(), b.stderr.truncated()
	if withOutput {
		o, e := string(b.stdout.bytes()), string(b.stderr.bytes())
		in.Stdout, in.Stderr = &o, &e
	}
	if b.ended {
		resp := newRunResponse(strconv.Itoa(b.pid), b.res, time.Duration(0))
		if b.res != nil {
			resp.DurationNS = b.res.WallTime.Nanoseconds()
			resp.StdoutTruncated, resp.StderrTruncated = in.StdoutTruncated, in.StderrTruncated
		}
		if b.err != nil {
			resp.Error = b.err.Error()
		}
		in.Result = resp
	}
	return in
}

// startBackground answers POST /v1/sessions/{id}/processes: the body of a
// run, started in the session and left running; the answer is its pid.
func (s *server) startBackground(w http.ResponseWriter, r *http.Request, ss *session) {
	id := ss.id
	if aerr := s.admitBody(w, r); aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	req, aerr := decodeRequest(http.MaxBytesReader(w, r.Body, maxBody))
	s.doneReading(r)
	if aerr == nil {
		aerr = sessionFixed(req)
	}
	if aerr == nil && (req.Limits.Timeout != "" || req.Stream) {
		field := "limits.timeout"
		if req.Stream {
			field = "stream"
		}
		aerr = badField(field, "a background process runs until it exits, is signaled, or the session ends; its output is kept, not streamed")
	}
	var spec *runSpec
	if aerr == nil {
		spec, aerr = s.cfgFor(ss.tenant).validate(req, s.languages)
	}
	if aerr != nil {
		s.refuse(w, id, aerr)
		return
	}
	if !ss.roomForBackground() {
		s.refuse(w, id, &apiError{status: http.StatusConflict,
			msg: fmt.Sprintf("session %s already runs %d background processes: signal one to end it first", id, maxBackground)})
		return
	}
	if aerr := s.policies.takeRun(ss.tenant); aerr != nil {
		aerr.label = ss.label
		s.refuse(w, id, aerr)
		return
	}
	cmd := sandbox.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Env = spec.env
	if spec.stdin != "" {
		cmd.Stdin = strings.NewReader(spec.stdin)
	}
	b := &background{argv: spec.argv, started: time.Now(), stdout: newTailBuffer(backgroundOutput), stderr: newTailBuffer(backgroundOutput),
		done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.stdout, b.stderr
	// The session's context, not the request's: the process outlives
	// the request, and ends with the session.
	proc, err := ss.sb.Start(ss.ctx, cmd)
	if err != nil {
		s.policies.dropRun(ss.tenant)
		status := http.StatusInternalServerError
		if errors.Is(err, sandbox.ErrInvalidOption) || errors.Is(err, sandbox.ErrNotFound) {
			status = http.StatusBadRequest
		}
		s.refuse(w, id, &apiError{status: status, field: "command", msg: err.Error()})
		return
	}
	b.proc, b.pid = proc, proc.Pid()
	ss.addBackground(b)
	go func() {
		defer s.policies.dropRun(ss.tenant)
		res, err := proc.Wait()
		b.mu.Lock()
		b.ended, b.res, b.err = true, res, err
		b.mu.Unlock()
		close(b.done)
		ss.log.Info("background process ended", "pid", b.pid, "cause", causeOf(res), "err", err)
	}()
	ss.log.Info("background process started", "pid", b.pid, "command", clip(spec.argv))
	writeJSON(w, http.StatusCreated, b.info(false))
}

// roomForBackground makes room for one more background process: it
// forgets the oldest ended one if the session remembers maxBackground, and
// reports false if all of those still run.
func (ss *session) roomForBackground() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.procs) < maxBackground {
		return true
	}
	var oldest *background
	for _, b := range ss.procs {
		if !b.running() && (oldest == nil || b.started.Before(oldest.started)) {
			oldest = b
		}
	}
	if oldest == nil {
		return false
	}
	delete(ss.procs, oldest.pid)
	return true
}

func (ss *session) addBackground(b *background) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.procs[b.pid] = b
}

func (ss *session) backgroundByPid(pid int) *background {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.procs[pid]
}

func (ss *session) backgrounds() []*background {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*background
	for _, b := range ss.procs {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *background) int { return a.started.Compare(b.started) })
	return out
}

// listProcesses answers GET /v1/sessions/{id}/processes: everything alive
// in the session's sandbox, and the background processes started through
// the API (running or ended).
func (s *server) listProcesses(w http.ResponseWriter, r *http.Request, ss *session) {
	procs, err := ss.processes(r.Context())
	if err != nil {
		s.refuse(w, ss.id, sessionCallError(err))
		return
	}
	list := processList{Processes: procs, Background: []backgroundInfo{}}
	for _, b := range ss.backgrounds() {
		list.Background = append(list.Background, b.info(false))
	}
	writeJSON(w, http.StatusOK, list)
}

// processList is the answer of GET /v1/sessions/{id}/processes.
type processList struct {
	Processes  []processInfo    `json:"processes"`  // never null
	Background []backgroundInfo `json:"background"` // never null
}

// processInfo is a process alive in a session's sandbox.
type processInfo struct {
	Pid   int      `json:"pid"` // inside the sandbox
	PPid  int      `json:"ppid"`
	Args  []string `json:"args"`
	State string   `json:"state"`
	CPUNS int64    `json:"cpu_ns"`
	RSS   int64    `json:"rss_bytes"`
}

// getBackground answers GET /v1/sessions/{id}/processes/{pid}: a
// background process with its kept output, and its result once it ended.
func (s *server) getBackground(w http.ResponseWriter, r *http.Request, ss *session) {
	pid, aerr := pidOf(r)
	if aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	b := ss.backgroundByPid(pid)
	if b == nil {
		s.refuse(w, ss.id, &apiError{status: http.StatusNotFound, field: "pid",
			msg: fmt.Sprintf("pid %d: no background process the API started in session %s (GET /v1/sessions/{id}/processes lists them)", pid, ss.id)})
		return
	}
	writeJSON(w, http.StatusOK, b.info(true))
}

// signalRequest is the body of POST /v1/sessions/{id}/processes/{pid}/signal.
type signalRequest struct {
	Signal string `json:"signal"` // a name, with or without SIG: "TERM", "SIGKILL"
}

// signalProcess answers POST /v1/sessions/{id}/processes/{pid}/signal:
// the signal goes to the process with that pid inside the sandbox,
// whichever started it.
func (s *server) signalProcess(w http.ResponseWriter, r *http.Request, ss *session) {
	pid, aerr := pidOf(r)
	if aerr == nil && pid == 1 {
		aerr = badField("pid", "pid 1 is the session's init, which holds the sandbox: DELETE /v1/sessions/{id} ends it and everything in it")
	}
	if aerr == nil {
		aerr = s.admitBody(w, r)
		if aerr == nil {
			var req signalRequest
			aerr = decodeJSON(http.MaxBytesReader(w, r.Body, maxBody), &req)
			s.doneReading(r)
			if aerr == nil {
				var sig syscall.Signal
				if sig, aerr = signalOf(req.Signal); aerr == nil {
					if err := ss.signal(pid, sig); err != nil {
						aerr = sessionCallError(err)
						aerr.field = "pid"
					}
				}
			}
		}
	}
	if aerr != nil {
		s.refuse(w, ss.id, aerr)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func pidOf(r *http.Request) (int, *apiError) {
	pid, err := strconv.Atoi(r.PathValue("pid"))
	if err != nil || pid < 1 {
		return 0, badField("pid", "%q: want a process id inside the session's sandbox, a positive number", r.PathValue("pid"))
	}
	return pid, nil
}

// runningBackground counts the background processes that still run.
func (ss *session) runningBackground() int {
	n := 0
	for _, b := range ss.backgrounds() {
		if b.running() {
			n++
		}
	}
	return n
}

// endBackground kills the background processes that still run and waits
// until they have ended. The library counts a process started with Start
// as a call until it ends, and Snapshot, Restore and Reset wait for the
// calls in flight: Restore and Reset end every process anyway, so the
// server ends these first rather than wait for ever.
func (ss *session) endBackground() {
	for _, b := range ss.backgrounds() {
		if b.running() {
			b.proc.Kill()
			<-b.done
		}
	}
}
