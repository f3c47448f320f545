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

	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// sizeSendBuffer lets fd, a SOCK_SEQPACKET socket, send messages of up to
// wire.MaxMessage bytes where it may, and returns the largest it can send: a
// packet must fit the socket's send buffer (less 32 bytes the kernel
// keeps), whose default (net.core.wmem_default, 208 KiB on Debian) is far
// less. Root may raise it past net.core.wmem_max; others get at most twice
// that, which at Debian's default (208 KiB) still carries MaxCommandLine
// with room for the rest of the configuration.
func sizeSendBuffer(fd int) int {
	want := wire.MaxMessage + 64<<10
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, want) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, want) // best effort: the size is read back
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil {
		return 200 << 10 // below any default the kernel sets
	}
	return min(wire.MaxMessage, got-32)
}

// errSpawnerGone marks a request that never reached a spawner because it
// had already died: safe to retry with a new one. It matches ErrSpawner,
// for a Run whose retry met the same.
var errSpawnerGone = fmt.Errorf("%w: gone before the request", ErrSpawner)

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
	h     *launch.Handle
	ready bool // the ready value has been delivered
	// accepted is closed when the spawner has read the request, or has
	// died first (then unreceived is set).
	accepted   chan struct{}
	unreceived bool
	refused    *wire.SetupError // the spawner refused the start instead (wire.Refused)
	synced     chan struct{}

	syncErr  *wire.SetupError // the Synced reply's error
	syncFile *os.File         // the file a Synced reply carried (a dial's connection)
	syncLost error            // the spawner died before replying
}

var ourSpawner struct {
	mu sync.Mutex
	c  *spawnerClient
}

// theSpawner returns the process's spawner, starting one if there is none
// or the last one died; log hears of the start and of the death.
func theSpawner(log *slog.Logger) (*spawnerClient, error) {
	ourSpawner.mu.Lock()
	defer ourSpawner.mu.Unlock()
	old := ourSpawner.c
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
	ourSpawner.c = c
	return c, nil
}

// currentSpawner returns the process's spawner if one is serving.
func currentSpawner() *spawnerClient {
	ourSpawner.mu.Lock()
	c := ourSpawner.c
	ourSpawner.mu.Unlock()
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
		// The collector's default pace keeps its heap near twice the
		// live heap: what a live session's entrant copies the page
		// tables of when it forks, and unmaps when it execs, grows with
		// it. The plans, the bulk of what a run allocates, are reused.
		Env:        roleEnviron(roleSpawner),
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
//
// With enter, the spawner's id of a live sandbox's init, the run is a
// process entering that sandbox (a wire.Enter request) instead.
//
// events, if set, hears the events of the run's supervisor as they come
// (launch.Handle.OnEvents).
func (c *spawnerClient) start(ctx context.Context, cfg *wire.Config, stdio [3]*os.File, extra launch.Files, owner string, pool int, enter uint64, events func([]wire.Event)) (*launch.Handle, error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("sandbox: %w: %w", errSpawnerGone, c.dead)
	}
	c.next++
	id := c.next
	h := launch.NewHandle(func() { c.send(wire.Request{ID: id, Kind: wire.Kill}, nil) })
	// The spawner does not answer: a signal that finds the run over
	// does nothing, and the run's Exited reply says how it ended.
	h.Signal = func(sig unix.Signal) error {
		return c.send(wire.Request{ID: id, Kind: wire.Signal, Signal: int(sig)}, nil)
	}
	h.ID = id
	h.OnEvents = events
	run := &clientRun{h: h, accepted: make(chan struct{})}
	c.runs[id] = run
	c.mu.Unlock()
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	for _, f := range extra.List() {
		fds = append(fds, int(f.Fd()))
	}
	req := wire.Request{ID: id, Kind: wire.Start, Spec: &cfg.Spec, Program: &cfg.Program, Owner: owner, Pool: pool}
	if enter != 0 {
		req.Kind, req.Live = wire.Enter, enter
	}
	if err := c.send(req, fds); err != nil {
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
		h.Kill() // whether or not it was read, it is not to run
		return nil, fmt.Errorf("sandbox: run: %w", ctx.Err())
	}
	if run.unreceived {
		return nil, fmt.Errorf("sandbox: %w: it died before reading the request", errSpawnerGone)
	}
	if run.refused != nil {
		return nil, setupError(run.refused, cfg)
	}
	return h, nil
}

// sync destroys the pool of owner in the spawner and waits until every
// run of it is torn down there. A spawner that is gone has nothing left.
func (c *spawnerClient) sync(owner string) {
	c.call(wire.Request{Kind: wire.Sync, Owner: owner})
}

// fill fills the pool of owner with size sandboxes prepared from spec and
// waits until it is full.
func (c *spawnerClient) fill(owner string, spec *wire.Spec, size int) error {
	se, err := c.call(wire.Request{Kind: wire.Fill, Owner: owner, Spec: spec, Pool: size})
	if err == nil && se != nil {
		err = setupError(se, &wire.Config{Spec: *spec})
	}
	return err
}

// call sends req and waits for its Synced reply.
func (c *spawnerClient) call(req wire.Request) (*wire.SetupError, error) {
	se, f, err := c.callFile(context.Background(), req)
	if f != nil {
		f.Close()
	}
	return se, err
}

// callFile sends req and waits for its Synced reply, with the file it
// carries, until ctx ends; a file that comes later is closed.
func (c *spawnerClient) callFile(ctx context.Context, req wire.Request) (*wire.SetupError, *os.File, error) {
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return nil, nil, err
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
		return nil, nil, err
	}
	select {
	case <-run.synced:
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-run.synced:
			if run.syncFile != nil {
				run.syncFile.Close()
			}
		default:
			delete(c.runs, req.ID) // its reply finds no one, and its file is closed
		}
		return nil, nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return run.syncErr, run.syncFile, run.syncLost
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
	buf, oob := make([]byte, wire.MaxReply), make([]byte, unix.CmsgSpace(4))
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
	var term, synced *os.File
	if r.Kind == wire.Started && r.Terminal && len(files) == 1 {
		term, files = files[0], nil
	}
	if r.Kind == wire.Synced && r.Err == nil && len(files) == 1 {
		synced, files = files[0], nil
	}
	sysutil.CloseFiles(files)
	defer func() {
		if term != nil {
			term.Close() // nobody took it
		}
		if synced != nil {
			synced.Close()
		}
	}()
	if r.Kind == wire.Warning {
		c.warn(r.Owner, r.Text, r.Err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	run := c.runs[r.ID]
	if run == nil {
		if r.Kind == wire.Refused {
			c.warn("", "the spawner refused a request", r.Err)
		}
		return
	}
	if run.synced != nil {
		run.syncErr = r.Err
		run.syncFile, synced = synced, nil
		close(run.synced)
		delete(c.runs, r.ID)
		return
	}
	switch r.Kind {
	case wire.Events:
		if run.h.OnEvents != nil {
			run.h.OnEvents(r.Events)
		}
	case wire.Accepted:
		close(run.accepted)
	case wire.Refused:
		select {
		case <-run.accepted:
			// The run's start was served: what was refused is a kill or
			// a signal of it, which nobody waits for.
			c.warn("", "the spawner refused a request", r.Err)
		default:
			run.refused = r.Err
			close(run.accepted)
			delete(c.runs, r.ID)
		}
	case wire.Started, wire.Failed:
		if !run.ready {
			run.ready = true
			if r.Err == nil {
				run.h.Term, term = term, nil
				run.h.Pid, run.h.InnerPid = r.Pid, r.InnerPid
			}
			run.h.Ready <- r.Err
		}
	case wire.Exited:
		if !run.ready { // cannot happen; keep the handle consistent anyway
			run.ready = true
			run.h.Ready <- nil
		}
		if r.Exit != nil {
			run.h.Done <- *r.Exit
		} else {
			run.h.Done <- wire.Exit{}
		}
		delete(c.runs, r.ID)
	}
}

// warn tells the Logger of the Sandbox named owner (every Logger when
// owner is "") of text, and of the failure se explains, if any.
func (c *spawnerClient) warn(owner, text string, se *wire.SetupError) {
	if se != nil {
		text += ": " + setupError(se, &wire.Config{}).Error()
	}
	spawnerWarning(owner, text, c.pid)
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
			run.h.Ready <- &wire.SetupError{Stage: "spawner", Text: err.Error()}
		}
		run.h.Lost = err
		run.h.Done <- wire.Exit{Status: uint32(syscall.SIGKILL)}
		delete(c.runs, id)
	}
}
