//go:build linux

package spawner

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// Main serves one caller until it goes away, then kills what is left.
// Each start is launched on a goroutine of its own, so that concurrent
// callers are not served one clone at a time.
func Main() {
	s := newServer(wire.SpawnerConnFd)
	s.serve()
	s.shutdown()
	os.Exit(0)
}

// server is the spawner serving one caller on the socket fd: one method
// per kind of wire.Request, in the order of wire's diagram.
type server struct {
	fd     int
	wmu    sync.Mutex // one reply at a time on fd
	mu     sync.Mutex
	runs   map[uint64]*served // on mu: the starts and entrants not yet reported, by ID
	active sync.WaitGroup     // starts not yet reaped, and syncs not yet answered
	owners owners
}

func newServer(fd int) *server {
	s := &server{fd: fd, runs: map[uint64]*served{}}
	// What the caller's Loggers should hear of; the caller has no other
	// way to learn of what happens here off a run's path.
	s.owners.warn = func(owner, text string, se *wire.SetupError) {
		s.reply(wire.Reply{Kind: wire.Warning, Owner: owner, Text: text, Err: se})
	}
	return s
}

// reply sends r to the caller, with fds as SCM_RIGHTS.
func (s *server) reply(r wire.Reply, fds ...int) {
	msg, _ := json.Marshal(r)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for unix.Sendmsg(s.fd, msg, oob, nil, 0) == unix.EINTR {
	}
}

// serve reads the caller's requests and serves each until the caller is
// gone. A message that is not a Request is dropped.
func (s *server) serve() {
	buf, oob := make([]byte, wire.MaxMessage), make([]byte, unix.CmsgSpace(5*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(s.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return // the caller is gone
		}
		files := sysutil.ReceivedFiles(oob[:oobn])
		var req wire.Request
		if err := json.Unmarshal(buf[:n], &req); err != nil || flags&unix.MSG_TRUNC != 0 {
			sysutil.CloseFiles(files)
			continue
		}
		s.dispatch(&req, files)
	}
}

// dispatch serves req, with the files it carried, by the method of its
// kind, once Check has found it one the spawner serves.
func (s *server) dispatch(req *wire.Request, files []*os.File) {
	if err := req.Check(); err != nil {
		sysutil.CloseFiles(files)
		s.reply(wire.Reply{ID: req.ID, Kind: wire.Refused, Err: &wire.SetupError{Stage: "spawner", Op: "read the request", Text: err.Error()}})
		return
	}
	if req.Kind != wire.Start && req.Kind != wire.Enter {
		sysutil.CloseFiles(files) // only a run's start carries any
	}
	switch req.Kind {
	case wire.Start:
		s.serveStart(req, files)
	case wire.Enter:
		s.serveEnter(req, files)
	case wire.Dial:
		s.serveDial(req)
	case wire.Signal:
		s.serveSignal(req)
	case wire.Kill:
		s.serveKill(req)
	case wire.Fill:
		s.serveFill(req)
	case wire.Sync:
		s.serveSync(req)
	}
}

// accept tells the caller the run id is read, before anything of it is
// done: a caller that sees no Accepted before the spawner dies may give
// the run to a new one. The run is served until finish.
func (s *server) accept(id uint64) *served {
	s.reply(wire.Reply{ID: id, Kind: wire.Accepted})
	r := &served{}
	s.mu.Lock()
	s.runs[id] = r
	s.mu.Unlock()
	s.active.Add(1)
	return r
}

// finish forgets the run id, reported to its end.
func (s *server) finish(id uint64) {
	s.mu.Lock()
	delete(s.runs, id)
	s.mu.Unlock()
	s.active.Done()
}

// handle is the handle of the run id, nil if it has none or is not served.
func (s *server) handle(id uint64) *launch.Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[id]; r != nil {
		return r.handle()
	}
	return nil
}

// serveStart starts a run, from its owner's pool or cold, on a goroutine
// of its own.
func (s *server) serveStart(req *wire.Request, files []*os.File) {
	r := s.accept(req.ID)
	go func() {
		defer s.finish(req.ID)
		s.start(req, files, r, s.owners.get(req.Owner))
	}()
}

// serveEnter starts a process in the live sandbox req.Live, on a
// goroutine of its own.
func (s *server) serveEnter(req *wire.Request, files []*os.File) {
	r := s.accept(req.ID)
	target := s.handle(req.Live)
	go func() {
		defer s.finish(req.ID)
		s.enter(req, files, r, target, s.owners.get(req.Owner))
	}()
}

// serveDial connects inside the live sandbox req.Live, and replies
// Synced with the connected socket.
func (s *server) serveDial(req *wire.Request) {
	target := s.handle(req.Live)
	s.active.Add(1)
	go func() {
		defer s.active.Done()
		conn, se := launch.Dial(target, req.Network, req.Address, req.DialTimeout)
		if se != nil {
			s.reply(wire.Reply{ID: req.ID, Kind: wire.Synced, Err: se})
			return
		}
		s.reply(wire.Reply{ID: req.ID, Kind: wire.Synced}, int(conn.Fd()))
		conn.Close()
	}()
}

// serveSignal delivers req.Signal to the program of the run req.ID.
func (s *server) serveSignal(req *wire.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[req.ID]; r != nil {
		r.signal(unix.Signal(req.Signal))
	}
}

// serveKill kills the run req.ID, whose Exited reply follows.
func (s *server) serveKill(req *wire.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[req.ID]; r != nil {
		r.kill()
	}
}

// serveFill fills the owner's pool, and replies Synced once it is full.
func (s *server) serveFill(req *wire.Request) {
	o := s.owners.get(req.Owner)
	s.active.Add(1)
	go func() {
		defer s.active.Done()
		s.reply(wire.Reply{ID: req.ID, Kind: wire.Synced, Err: o.fill(req.Spec, req.Pool)})
	}()
}

// serveSync destroys the owner's pool, and replies Synced once its runs
// are torn down.
func (s *server) serveSync(req *wire.Request) {
	o := s.owners.get(req.Owner)
	s.active.Add(1)
	go func() {
		defer s.active.Done()
		o.drain()
		s.owners.remove(req.Owner)
		s.reply(wire.Reply{ID: req.ID, Kind: wire.Synced})
	}()
}

// shutdown, once the caller is gone, kills what runs, destroys the pools,
// and lets each run's goroutine reap it and remove its cgroup, for at
// most 5 seconds.
func (s *server) shutdown() {
	s.mu.Lock()
	for _, r := range s.runs {
		r.kill()
	}
	s.mu.Unlock()
	reaped := make(chan struct{})
	go func() {
		for _, o := range s.owners.all() {
			o.drain()
		}
		s.active.Wait()
		// The runs are reaped; their cgroups' removal, which follows,
		// is counted by their owners.
		for _, o := range s.owners.all() {
			o.drain()
		}
		close(reaped)
	}()
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
	}
}

// served is one start the spawner is serving. A kill may come before its
// launch has a handle; it is then carried out as soon as there is one.
type served struct {
	mu     sync.Mutex
	h      *launch.Handle
	killed bool
}

func (r *served) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed = true
	if r.h != nil {
		r.h.Kill()
	}
}

// signal delivers sig to the run's program once it has a handle; the
// caller signals only a run it was told has started, which has one. An
// error means the run is over, which its Exited reply tells the caller.
func (r *served) signal(sig unix.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h != nil && r.h.Signal != nil {
		r.h.Signal(sig)
	}
}

// handle is the run's handle, nil until it has one.
func (r *served) handle() *launch.Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h
}

// setHandle records h, and kills it if a kill came first.
func (r *served) setHandle(h *launch.Handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h = h
	if r.killed {
		h.Kill()
	}
}

// fail tells the caller the run id failed to start, and ended.
func (s *server) fail(id uint64, se *wire.SetupError) {
	s.reply(wire.Reply{ID: id, Kind: wire.Failed, Err: se})
	s.reply(wire.Reply{ID: id, Kind: wire.Exited, Exit: &wire.Exit{}})
}

// start starts one run, from its owner's pool or cold, and reports it
// until it has been reaped.
func (s *server) start(req *wire.Request, files []*os.File, r *served, o *owner) {
	var extra launch.Files
	cfg := &wire.Config{Spec: *req.Spec, Program: *req.Program}
	ok := len(files) >= 3
	if ok {
		extra, ok = launch.FilesFrom(cfg, files[3:])
	}
	if !ok {
		sysutil.CloseFiles(files)
		s.fail(req.ID, &wire.SetupError{Stage: "spawner", Text: "malformed start request"})
		return
	}
	var h *launch.Handle
	// A run with a proxy or a terminal neither takes a prepared sandbox
	// nor makes the pool one of its Spec: neither can be prepared ahead.
	if req.Pool > 0 && cfg.ProxyPort == 0 && cfg.Terminal == nil {
		// The pool is refilled once this run is out of the way: a
		// preparation is a cold start's work, which on a small machine
		// would take the CPU from this run's start and its report. A
		// longer run lets it go after refillDelay.
		refill := time.AfterFunc(refillDelay, o.refill)
		defer func() {
			if refill.Stop() {
				o.refill()
			}
		}()
		if h = o.take(cfg, req.Pool); h != nil {
			h.Start(cfg.Program, files) // it takes the files over
		}
	}
	cold := h == nil
	if cold {
		var se *wire.SetupError
		h, se = launch.Launch(cfg, [3]*os.File(files[:3]), extra, false, &o.teardown, o.warn)
		sysutil.CloseFiles(files)
		if se != nil {
			s.fail(req.ID, se)
			return
		}
	}
	r.setHandle(h)
	var started func()
	if cold && req.Pool > 0 {
		started = o.coldStarted
	}
	s.report(req.ID, h, started, !cold)
}

// replyStarted tells the caller that h's program runs, with the master
// of its pty if it has one.
func (s *server) replyStarted(id uint64, h *launch.Handle) {
	rep := wire.Reply{ID: id, Kind: wire.Started, Pid: h.Pid, InnerPid: h.InnerPid}
	if h.Term == nil {
		s.reply(rep)
		return
	}
	// The caller has its own copy once this is sent.
	rep.Terminal = true
	s.reply(rep, int(h.Term.Fd()))
	h.Term.Close()
}

// enter starts one process in the live sandbox target, and reports it
// until it has been reaped.
func (s *server) enter(req *wire.Request, files []*os.File, r *served, target *launch.Handle, o *owner) {
	if len(files) != 3 {
		sysutil.CloseFiles(files)
		s.fail(req.ID, &wire.SetupError{Stage: "spawner", Text: "malformed enter request"})
		return
	}
	if target == nil || !target.Live() {
		sysutil.CloseFiles(files)
		s.fail(req.ID, &wire.SetupError{Stage: "enter", Op: "find the live sandbox", Errno: int(unix.ESRCH), Text: "no live sandbox runs as that run"})
		return
	}
	cfg := &wire.Config{Spec: *req.Spec, Program: *req.Program}
	h, se := launch.Enter(target, cfg, [3]*os.File(files[:3]), &o.teardown)
	sysutil.CloseFiles(files) // the entrant has its own
	if se != nil {
		s.fail(req.ID, se)
		return
	}
	r.setHandle(h)
	s.report(req.ID, h, nil, false)
}

// report tells the caller how the run id of h started, calling started
// (if set) once it has, and, once it is reaped, how it ended.
func (s *server) report(id uint64, h *launch.Handle, started func(), pooled bool) {
	if se := <-h.Ready; se != nil {
		s.reply(wire.Reply{ID: id, Kind: wire.Failed, Err: se})
	} else {
		s.replyStarted(id, h)
		if started != nil {
			started()
		}
	}
	var exit wire.Exit
	for done := false; !done; {
		select {
		case e := <-h.Events:
			s.sendEvents(id, e, h.Events)
		case exit = <-h.Done:
			done = true
		}
	}
	// Every event came before Done: the ones still queued go first.
	select {
	case e := <-h.Events:
		s.sendEvents(id, e, h.Events)
	default:
	}
	exit.Pooled = pooled
	s.reply(wire.Reply{ID: id, Kind: wire.Exited, Exit: &exit})
	close(h.Reported)
}

// sendEvents tells the caller of e and of the events queued behind it,
// in replies of at most wire.EventsPerReply.
func (s *server) sendEvents(id uint64, e wire.Event, events chan wire.Event) {
	batch, size := []wire.Event{e}, e.Size()
	for {
		select {
		case e := <-events:
			if size+e.Size() > wire.EventsPerReply {
				s.reply(wire.Reply{ID: id, Kind: wire.Events, Events: batch})
				batch, size = nil, 0
			}
			batch, size = append(batch, e), size+e.Size()
			continue
		default:
		}
		s.reply(wire.Reply{ID: id, Kind: wire.Events, Events: batch})
		return
	}
}
