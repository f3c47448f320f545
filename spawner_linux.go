//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// The spawner is this binary re-exec'd once per caller process, small and
// before it holds any of the caller's heap. It starts every sandbox of the
// caller's (InProcess aside) and keeps their pools: the sandboxes' inits
// are its children, not the caller's, and a start costs the same whatever
// the caller's size, also where the init cannot share the memory of the
// process that clones it and the clone copies its page tables
// (forkplan.SharesMemory).
//
// Protocol, over a SOCK_SEQPACKET socket pair (one JSON message a packet;
// the messages are internal/wire's Request and Reply):
//
//	caller                                    spawner
//	Request{ID, Spec, Program, Owner, Pool}  →  reads it
//	  + SCM_RIGHTS(0,1,2[, proxy channel]
//	  [, workspace mount])
//	                                        ←  Reply{ID, accepted}, before anything of it is
//	                                           done (no Accepted before the spawner died:
//	                                           the caller may send the run to a new one)
//	                                           takes a sandbox of Owner's pool prepared from
//	                                           an Equal Spec when Pool > 0 (no proxy, no
//	                                           terminal), hands it the Program and files;
//	                                           else launches cold (see launch_linux.go)
//	                                        ←  Reply{ID, started} or Reply{ID, failed, Err};
//	                                           a run with a terminal: Reply{ID, started,
//	                                           Terminal} + SCM_RIGHTS(the pty's master)
//	Request{ID, Kill} (on ctx end)          →  kill the run's init
//	                                        ←  Reply{ID, exited, Exit} (Exit.Pooled: it took
//	                                           a prepared sandbox)
//	Request{ID, Owner, Fill, Spec, Pool}    →  make Owner's pool Pool sandboxes prepared from
//	  (New with Options.Pool)                  Spec, destroying any prepared from another
//	                                        ←  Reply{ID, synced[, Err]} once it is full, or
//	                                           a preparation failed
//	Request{ID, Owner, Sync} (Close)        →  destroy Owner's pool, wait for the teardown
//	                                           of its runs
//	                                        ←  Reply{ID, synced}
//	                                        ←  Reply{warning, Owner, Text} at any time: for
//	                                           Owner's Logger (every Logger when Owner is "")
//	close (caller exits or dies)            →  kill every run, destroy the pools, exit
//
// The only fd the spawner sends is the master of a run's pty (made in the
// sandbox: wire.TerminalMark); the caller keeps the read ends of the
// output pipes and the write end of stdin. The proxy channel of a
// NetworkAllow run is passed on to its init, which answers the caller on
// it directly.

const maxMessage = 1 << 20

// sizeSendBuffer lets fd, a SOCK_SEQPACKET socket, send messages of up to
// maxMessage bytes where it may, and returns the largest it can send: a
// packet must fit the socket's send buffer (less 32 bytes the kernel
// keeps), whose default (net.core.wmem_default, 208 KiB on Debian) is far
// less. Root may raise it past net.core.wmem_max; others get at most twice
// that, which at Debian's default (208 KiB) still carries MaxCommandLine
// with room for the rest of the configuration.
func sizeSendBuffer(fd int) int {
	want := maxMessage + 64<<10
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, want) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, want) // best effort: the size is read back
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil {
		return 200 << 10 // below any default the kernel sets
	}
	return min(maxMessage, got-32)
}

// errSpawnerGone marks a request that never reached a spawner because it
// had already died: safe to retry with a new one. It matches ErrSpawner,
// for a Run whose retry met the same.
var errSpawnerGone = fmt.Errorf("%w: gone before the request", ErrSpawner)

// spawnerConnFd is the spawner's end of the socket pair.
const spawnerConnFd = 3

// spawnerMain serves one caller until it goes away, then kills what is left.
// Each start is launched on a goroutine of its own, so that concurrent
// callers are not served one clone at a time.
func spawnerMain() {
	fd := spawnerConnFd
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
	byName.warn = func(owner, text string) { reply(wire.Reply{Kind: wire.Warning, Owner: owner, Text: text}) }
	if _, err := selfExe(); err != nil {
		byName.warn("", err.Error())
	}
	buf, oob := make([]byte, maxMessage), make([]byte, unix.CmsgSpace(5*4))
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
			go func(id uint64) {
				defer active.Done()
				serveStart(&req, files, r, byName.get(req.Owner), reply)
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
	h      *handle
	killed bool
}

func (r *served) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed = true
	if r.h != nil {
		r.h.kill()
	}
}

// setHandle records h, and kills it if a kill came first.
func (r *served) setHandle(h *handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h = h
	if r.killed {
		h.kill()
	}
}

// serveStart starts one run, from its owner's pool or cold, and reports
// it until it has been reaped.
func serveStart(req *wire.Request, files []*os.File, r *served, o *owner, reply func(wire.Reply, ...int)) {
	fail := func(se *wire.SetupError) {
		reply(wire.Reply{ID: req.ID, Kind: wire.Failed, Err: se})
		reply(wire.Reply{ID: req.ID, Kind: wire.Exited, Exit: &wire.Exit{}})
	}
	var extra initFiles
	var cfg *wire.Config
	ok := req.Spec != nil && req.Program != nil && len(files) >= 3
	if ok {
		cfg = &wire.Config{Spec: *req.Spec, Program: *req.Program}
		extra, ok = initFilesFrom(cfg, files[3:])
	}
	if !ok {
		sysutil.CloseFiles(files)
		fail(&wire.SetupError{Stage: "spawner", Text: "malformed start request"})
		return
	}
	var h *handle
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
			h.start(cfg.Program, files) // it takes the files over
		}
	}
	cold := h == nil
	if cold {
		var se *wire.SetupError
		h, se = launch(cfg, [3]*os.File(files[:3]), extra, false, &o.teardown, o.warn)
		sysutil.CloseFiles(files)
		if se != nil {
			fail(se)
			return
		}
	}
	r.setHandle(h)
	if se := <-h.ready; se != nil {
		reply(wire.Reply{ID: req.ID, Kind: wire.Failed, Err: se})
	} else {
		if h.term != nil {
			// The caller has its own copy once this is sent.
			reply(wire.Reply{ID: req.ID, Kind: wire.Started, Terminal: true}, int(h.term.Fd()))
			h.term.Close()
		} else {
			reply(wire.Reply{ID: req.ID, Kind: wire.Started})
		}
		if cold && req.Pool > 0 {
			o.coldStarted()
		}
	}
	exit := <-h.done
	exit.Pooled = !cold
	reply(wire.Reply{ID: req.ID, Kind: wire.Exited, Exit: &exit})
	close(h.reported)
}

// spawnerClient is the caller's side of one spawner.
type spawnerClient struct {
	conn *os.File
	rc   syscall.RawConn
	pid  int
	wmu  sync.Mutex

	mu   sync.Mutex
	runs map[uint64]*clientRun
	next uint64
	dead error // why the spawner is gone; nil while it serves

	maxSend int // the largest request the socket sends (sizeSendBuffer)
}

// clientRun is one run as the caller sees it through the spawner, or one
// Sync request waiting for its reply (synced).
type clientRun struct {
	h     *handle
	ready bool // the ready value has been delivered
	// accepted is closed when the spawner has read the request, or has
	// died first (then unreceived is set).
	accepted   chan struct{}
	unreceived bool
	synced     chan struct{}

	syncErr  *wire.SetupError // the Synced reply's error
	syncLost error            // the spawner died before replying
}

var spawner struct {
	mu sync.Mutex
	c  *spawnerClient
}

// theSpawner returns the process's spawner, starting one if there is none
// or the last one died; log hears of the start and of the death.
func theSpawner(log *slog.Logger) (*spawnerClient, error) {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	old := spawner.c
	if old.serving() {
		return old, nil
	}
	if old != nil {
		old.mu.Lock()
		dead := old.dead
		old.mu.Unlock()
		log.Warn("sandbox: the spawner died; starting a new one", "spawner", old.pid, "error", dead)
	}
	c, err := startSpawner()
	if err != nil {
		return nil, err
	}
	log.Debug("sandbox: spawner started", "spawner", c.pid)
	spawner.c = c
	return c, nil
}

// currentSpawner returns the process's spawner if one is serving.
func currentSpawner() *spawnerClient {
	spawner.mu.Lock()
	c := spawner.c
	spawner.mu.Unlock()
	if !c.serving() {
		return nil
	}
	return c
}

// serving says whether c is a spawner not yet seen to die.
func (c *spawnerClient) serving() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead == nil
}

func startSpawner() (*spawnerClient, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: start spawner: socketpair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("sandbox: start spawner: %w", err)
	}
	maxSend := sizeSendBuffer(fds[0])
	conn, child := os.NewFile(uintptr(fds[0]), "spawner"), os.NewFile(uintptr(fds[1]), "spawner-child")
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"sandbox-spawner"},
		// Its live heap is small, and each run allocates a request and a
		// plan: letting the heap grow by 4x the live heap between
		// collections instead of 1x makes them a quarter as frequent
		// (at the default, the collector took 1.5% of all CPU).
		Env:        roleEnviron(roleSpawner, "GOGC=400"),
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{child},
	}
	err = cmd.Start()
	child.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sandbox: start spawner: %w", err)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("sandbox: start spawner: %w", err)
	}
	c := &spawnerClient{conn: conn, rc: rc, pid: cmd.Process.Pid, runs: map[uint64]*clientRun{}, maxSend: maxSend}
	go func() {
		err := c.readLoop()
		c.fail(err) // at once: new Runs go to a new spawner
		cmd.Process.Kill()
		cmd.Wait()
		// A spawner that died could not remove its runs' cgroups.
		cgroup.RemoveStale("", time.Second)
	}()
	return c, nil
}

// start sends one run of the Sandbox named owner to the spawner, to be
// taken from a pool of that size when pool > 0.
//
// It returns once the spawner has read the request. An error matching
// errSpawnerGone means the spawner died before it did: nothing of the run
// was started, and a new spawner may take it.
func (c *spawnerClient) start(ctx context.Context, cfg *wire.Config, stdio [3]*os.File, extra initFiles, owner string, pool int) (*handle, error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("sandbox: %w: %w", errSpawnerGone, c.dead)
	}
	c.next++
	id := c.next
	h := newHandle(func() { c.send(wire.Request{ID: id, Kill: true}, nil) })
	run := &clientRun{h: h, accepted: make(chan struct{})}
	c.runs[id] = run
	c.mu.Unlock()
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	for _, f := range extra.list() {
		fds = append(fds, int(f.Fd()))
	}
	if err := c.send(wire.Request{ID: id, Spec: &cfg.Spec, Program: &cfg.Program, Owner: owner, Pool: pool}, fds); err != nil {
		c.mu.Lock()
		delete(c.runs, id)
		dead := c.dead != nil // its socket closed under our send
		c.mu.Unlock()
		if dead || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ENOTCONN) || errors.Is(err, os.ErrClosed) {
			// It died before our reader noticed: the request never
			// reached it.
			c.fail(err)
			return nil, fmt.Errorf("sandbox: %w: %w", errSpawnerGone, err)
		}
		return nil, err
	}
	select {
	case <-run.accepted:
	case <-ctx.Done():
		h.kill() // whether or not it was read, it is not to run
		return nil, fmt.Errorf("sandbox: run: %w", ctx.Err())
	}
	if run.unreceived {
		return nil, fmt.Errorf("sandbox: %w: it died before reading the request", errSpawnerGone)
	}
	return h, nil
}

// sync destroys the pool of owner in the spawner and waits until every
// run of it is torn down there. A spawner that is gone has nothing left.
func (c *spawnerClient) sync(owner string) {
	c.call(wire.Request{Owner: owner, Sync: true})
}

// fill fills the pool of owner with size sandboxes prepared from spec and
// waits until it is full.
func (c *spawnerClient) fill(owner string, spec *wire.Spec, size int) error {
	se, err := c.call(wire.Request{Owner: owner, Fill: true, Spec: spec, Pool: size})
	if err == nil && se != nil {
		err = setupError(se, &wire.Config{Spec: *spec})
	}
	return err
}

// call sends req and waits for its Synced reply.
func (c *spawnerClient) call(req wire.Request) (*wire.SetupError, error) {
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return nil, err
	}
	c.next++
	req.ID = c.next
	run := &clientRun{synced: make(chan struct{})}
	c.runs[req.ID] = run
	c.mu.Unlock()
	if err := c.send(req, nil); err != nil {
		c.mu.Lock()
		delete(c.runs, req.ID)
		c.mu.Unlock()
		return nil, err
	}
	<-run.synced
	c.mu.Lock()
	defer c.mu.Unlock()
	return run.syncErr, run.syncLost
}

func (c *spawnerClient) send(req wire.Request, fds []int) error {
	msg, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("sandbox: encode request: %w", err)
	}
	// Run has checked the command line against MaxCommandLine; what
	// still does not fit is a configuration whose strings grew in their
	// encoding (JSON escapes control bytes and <, > and & as six bytes
	// each), or one with a long list of Binds or TrustedCAs.
	if len(msg) > c.maxSend {
		return fmt.Errorf("sandbox: run configuration is %d bytes encoded, more than the %d the spawner's socket takes (Cmd.Args, Cmd.Env, Options.Env, Options.Binds): %w",
			len(msg), c.maxSend, ErrInvalidOption)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var serr error
	err = c.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), msg, oob, nil, 0)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("sandbox: send to spawner: %w: %w", ErrSpawner, err)
	}
	return nil
}

// readLoop delivers the spawner's replies until it goes away.
func (c *spawnerClient) readLoop() error {
	buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(4))
	for {
		var n, oobn int
		var rerr error
		err := c.rc.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
			return rerr != unix.EAGAIN && rerr != unix.EINTR
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("sandbox: %w: %w", ErrSpawner, err)
		}
		if n == 0 {
			return fmt.Errorf("sandbox: %w: it exited", ErrSpawner)
		}
		files := sysutil.ReceivedFiles(oob[:oobn])
		var r wire.Reply
		if err := json.Unmarshal(buf[:n], &r); err != nil {
			sysutil.CloseFiles(files)
			return fmt.Errorf("sandbox: %w: malformed reply: %w", ErrSpawner, err)
		}
		c.deliver(r, files)
	}
}

// deliver hands r to its run, with the master of the run's pty when r
// carries one; every other file is closed.
func (c *spawnerClient) deliver(r wire.Reply, files []*os.File) {
	var term *os.File
	if r.Kind == wire.Started && r.Terminal && len(files) == 1 {
		term, files = files[0], nil
	}
	sysutil.CloseFiles(files)
	defer func() {
		if term != nil {
			term.Close() // nobody took it
		}
	}()
	if r.Kind == wire.Warning {
		spawnerWarning(r.Owner, r.Text, c.pid)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	run := c.runs[r.ID]
	if run == nil {
		return
	}
	if run.synced != nil {
		run.syncErr = r.Err
		close(run.synced)
		delete(c.runs, r.ID)
		return
	}
	switch r.Kind {
	case wire.Accepted:
		close(run.accepted)
	case wire.Started, wire.Failed:
		if !run.ready {
			run.ready = true
			if r.Err == nil {
				run.h.term, term = term, nil
			}
			run.h.ready <- r.Err
		}
	case wire.Exited:
		if !run.ready { // cannot happen; keep the handle consistent anyway
			run.ready = true
			run.h.ready <- nil
		}
		if r.Exit != nil {
			run.h.done <- *r.Exit
		} else {
			run.h.done <- wire.Exit{}
		}
		delete(c.runs, r.ID)
	}
}

// fail ends every pending run after the spawner died. Its sandboxes died
// with it (their parent-death signal).
func (c *spawnerClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead == nil { // the first cause is the one to report
		c.dead = err
	}
	c.conn.Close()
	for id, run := range c.runs {
		if run.synced != nil {
			run.syncLost = err
			close(run.synced)
			delete(c.runs, id)
			continue
		}
		select {
		case <-run.accepted:
		default: // never read: start says so, and the run goes elsewhere
			run.unreceived = true
			close(run.accepted)
			delete(c.runs, id)
			continue
		}
		if !run.ready {
			run.h.ready <- &wire.SetupError{Stage: "spawner", Text: err.Error()}
		}
		run.h.lost = err
		run.h.done <- wire.Exit{Status: uint32(syscall.SIGKILL)}
		delete(c.runs, id)
	}
}
