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
	fd := wire.SpawnerConnFd
	var (
		mu     sync.Mutex
		runs   = map[uint64]*served{}
		wmu    sync.Mutex
		active sync.WaitGroup // starts not yet reaped, and syncs not yet answered
		byName owners
	)
	reply := func(r wire.Reply, fds ...int) {
		msg, _ := json.Marshal(r)
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		wmu.Lock()
		defer wmu.Unlock()
		for unix.Sendmsg(fd, msg, oob, nil, 0) == unix.EINTR {
		}
	}
	// What the caller's Loggers should hear of; the caller has no other
	// way to learn of what happens here off a run's path.
	byName.warn = func(owner, text string, se *wire.SetupError) {
		reply(wire.Reply{Kind: wire.Warning, Owner: owner, Text: text, Err: se})
	}
	buf, oob := make([]byte, wire.MaxMessage), make([]byte, unix.CmsgSpace(5*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			break // the caller is gone
		}
		files := sysutil.ReceivedFiles(oob[:oobn])
		var req wire.Request
		if err := json.Unmarshal(buf[:n], &req); err != nil || flags&unix.MSG_TRUNC != 0 {
			sysutil.CloseFiles(files)
			continue
		}
		switch {
		case req.Kill:
			sysutil.CloseFiles(files)
			mu.Lock()
			if r := runs[req.ID]; r != nil {
				r.kill()
			}
			mu.Unlock()
		case req.Signal != 0:
			sysutil.CloseFiles(files)
			mu.Lock()
			if r := runs[req.ID]; r != nil {
				r.signal(unix.Signal(req.Signal))
			}
			mu.Unlock()
		case req.Dial != 0:
			sysutil.CloseFiles(files)
			mu.Lock()
			var target *launch.Handle
			if l := runs[req.Dial]; l != nil {
				target = l.handle()
			}
			mu.Unlock()
			active.Add(1)
			go func(req wire.Request) {
				defer active.Done()
				conn, se := launch.Dial(target, req.Network, req.Address, req.DialTimeout)
				if se != nil {
					reply(wire.Reply{ID: req.ID, Kind: wire.Synced, Err: se})
					return
				}
				reply(wire.Reply{ID: req.ID, Kind: wire.Synced}, int(conn.Fd()))
				conn.Close()
			}(req)
		case req.Fill:
			sysutil.CloseFiles(files)
			o := byName.get(req.Owner)
			active.Add(1)
			go func(id uint64) {
				defer active.Done()
				var se *wire.SetupError
				if req.Spec == nil || req.Pool <= 0 {
					se = &wire.SetupError{Stage: "spawner", Text: "malformed fill request"}
				} else {
					se = o.fill(req.Spec, req.Pool)
				}
				reply(wire.Reply{ID: id, Kind: wire.Synced, Err: se})
			}(req.ID)
		case req.Sync:
			sysutil.CloseFiles(files)
			o := byName.get(req.Owner)
			active.Add(1)
			go func(id uint64) {
				defer active.Done()
				o.drain()
				byName.remove(req.Owner)
				reply(wire.Reply{ID: id, Kind: wire.Synced})
			}(req.ID)
		default:
			// Before anything is done: a caller that sees no Accepted
			// before the spawner dies may give the run to a new one.
			reply(wire.Reply{ID: req.ID, Kind: wire.Accepted})
			r := &served{}
			mu.Lock()
			runs[req.ID] = r
			mu.Unlock()
			active.Add(1)
			var target *launch.Handle
			if req.Enter != 0 {
				mu.Lock()
				if l := runs[req.Enter]; l != nil {
					target = l.handle()
				}
				mu.Unlock()
			}
			go func(id uint64) {
				defer active.Done()
				if req.Enter != 0 {
					serveEnter(&req, files, r, target, byName.get(req.Owner), reply)
				} else {
					serveStart(&req, files, r, byName.get(req.Owner), reply)
				}
				mu.Lock()
				delete(runs, id)
				mu.Unlock()
			}(req.ID)
		}
	}
	// The caller is gone: kill what runs, destroy the pools, and let each
	// run's goroutine reap it and remove its cgroup before exiting.
	mu.Lock()
	for _, r := range runs {
		r.kill()
	}
	mu.Unlock()
	reaped := make(chan struct{})
	go func() {
		for _, o := range byName.all() {
			o.drain()
		}
		active.Wait()
		// The runs are reaped; their cgroups' removal, which follows,
		// is counted by their owners.
		for _, o := range byName.all() {
			o.drain()
		}
		close(reaped)
	}()
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
	}
	os.Exit(0)
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

// serveStart starts one run, from its owner's pool or cold, and reports
// it until it has been reaped.
func serveStart(req *wire.Request, files []*os.File, r *served, o *owner, reply func(wire.Reply, ...int)) {
	fail := func(se *wire.SetupError) {
		reply(wire.Reply{ID: req.ID, Kind: wire.Failed, Err: se})
		reply(wire.Reply{ID: req.ID, Kind: wire.Exited, Exit: &wire.Exit{}})
	}
	var extra launch.Files
	var cfg *wire.Config
	ok := req.Spec != nil && req.Program != nil && len(files) >= 3
	if ok {
		cfg = &wire.Config{Spec: *req.Spec, Program: *req.Program}
		extra, ok = launch.FilesFrom(cfg, files[3:])
	}
	if !ok {
		sysutil.CloseFiles(files)
		fail(&wire.SetupError{Stage: "spawner", Text: "malformed start request"})
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
			fail(se)
			return
		}
	}
	r.setHandle(h)
	var started func()
	if cold && req.Pool > 0 {
		started = o.coldStarted
	}
	report(req.ID, h, reply, started, !cold)
}

// replyStarted tells the caller that h's program runs, with the master
// of its pty if it has one.
func replyStarted(id uint64, h *launch.Handle, reply func(wire.Reply, ...int)) {
	rep := wire.Reply{ID: id, Kind: wire.Started, Pid: h.Pid, InnerPid: h.InnerPid}
	if h.Term == nil {
		reply(rep)
		return
	}
	// The caller has its own copy once this is sent.
	rep.Terminal = true
	reply(rep, int(h.Term.Fd()))
	h.Term.Close()
}

// serveEnter starts one process in the live sandbox target, and reports
// it until it has been reaped.
func serveEnter(req *wire.Request, files []*os.File, r *served, target *launch.Handle, o *owner, reply func(wire.Reply, ...int)) {
	fail := func(se *wire.SetupError) {
		reply(wire.Reply{ID: req.ID, Kind: wire.Failed, Err: se})
		reply(wire.Reply{ID: req.ID, Kind: wire.Exited, Exit: &wire.Exit{}})
	}
	if req.Spec == nil || req.Program == nil || len(files) != 3 {
		sysutil.CloseFiles(files)
		fail(&wire.SetupError{Stage: "spawner", Text: "malformed enter request"})
		return
	}
	if target == nil || !target.Live() {
		sysutil.CloseFiles(files)
		fail(&wire.SetupError{Stage: "enter", Op: "find the live sandbox", Errno: int(unix.ESRCH), Text: "no live sandbox runs as that run"})
		return
	}
	cfg := &wire.Config{Spec: *req.Spec, Program: *req.Program}
	h, se := launch.Enter(target, cfg, [3]*os.File(files[:3]), &o.teardown)
	sysutil.CloseFiles(files) // the entrant has its own
	if se != nil {
		fail(se)
		return
	}
	r.setHandle(h)
	report(req.ID, h, reply, nil, false)
}

// report tells the caller how the run id of h started, calling started
// (if set) once it has, and, once it is reaped, how it ended.
func report(id uint64, h *launch.Handle, reply func(wire.Reply, ...int), started func(), pooled bool) {
	if se := <-h.Ready; se != nil {
		reply(wire.Reply{ID: id, Kind: wire.Failed, Err: se})
	} else {
		replyStarted(id, h, reply)
		if started != nil {
			started()
		}
	}
	var exit wire.Exit
	for done := false; !done; {
		select {
		case e := <-h.Events:
			sendEvents(id, e, h.Events, reply)
		case exit = <-h.Done:
			done = true
		}
	}
	// Every event came before Done: the ones still queued go first.
	select {
	case e := <-h.Events:
		sendEvents(id, e, h.Events, reply)
	default:
	}
	exit.Pooled = pooled
	reply(wire.Reply{ID: id, Kind: wire.Exited, Exit: &exit})
	close(h.Reported)
}

// sendEvents tells the caller of e and of the events queued behind it,
// in replies of at most wire.EventsPerReply.
func sendEvents(id uint64, e wire.Event, events chan wire.Event, reply func(wire.Reply, ...int)) {
	batch, size := []wire.Event{e}, e.Size()
	for {
		select {
		case e := <-events:
			if size+e.Size() > wire.EventsPerReply {
				reply(wire.Reply{ID: id, Kind: wire.Events, Events: batch})
				batch, size = nil, 0
			}
			batch, size = append(batch, e), size+e.Size()
			continue
		default:
		}
		reply(wire.Reply{ID: id, Kind: wire.Events, Events: batch})
		return
	}
}
