package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
)

// The audit trail (Options.Audit): every event of a Sandbox as a
// slog.Record whose message says what kind of event it is and whose
// attributes say the rest. The records are made and handed to the handler
// by the caller's process alone: nothing of the trail is in any sandbox,
// and what a program chooses (a path, a host name, an argument) is only
// ever an attribute's value, which a handler such as slog.JSONHandler
// escapes, never a message.

// The message of each kind of audit event; the package documentation's
// "Audit trail" lists each one's attributes.
const (
	AuditRunStart   = "run start"
	AuditRunEnd     = "run end"
	AuditLiveStart  = "live start"
	AuditLiveEnd    = "live end"
	AuditConnection = "connection"
	AuditDenial     = "denial"
	AuditExec       = "exec"
	AuditChange     = "change"
	AuditDropped    = "audit dropped"
)

// Bounds of the audit trail.
const (
	// AuditQueue is how many events a Sandbox holds for its Audit
	// handler while the handler is busy. Past it, events are dropped and
	// counted, and an "audit dropped" event with the count follows as
	// soon as the handler takes events again; no event waits for room,
	// so a slow or stuck handler never holds up a run or its egress
	// proxy. The last 256 places are kept for run start and run end
	// events, so that a flood of a run's connections or refusals does
	// not cost the record of the run itself.
	AuditQueue = 4096
	// AuditFlushTimeout bounds how long Close waits for the Audit
	// handler to take the events still queued. Events a handler stuck
	// past it has not taken stay queued and reach it, in order, when it
	// returns, after Close.
	AuditFlushTimeout = 5 * time.Second

	auditReserve = 256
)

// auditQueueLen is the queue's length: AuditQueue, which the tests
// shorten to reach its bound with few events.
var auditQueueLen = AuditQueue

// Audit is a Sandbox's audit trail, Options.Audit.
type Audit struct {
	// Handler receives every event of the trail, in order, as slog
	// records at slog.LevelInfo: each run's start and end, each
	// connection of its egress proxy, each syscall its filter refused,
	// each workspace change (with SessionWorkspace.TrackChanges), each
	// program executed (with Exec), and a live sandbox's start and end;
	// "Audit trail" in the package documentation lists the events and
	// their attributes. For JSON lines, give it slog.NewJSONHandler(w,
	// nil). The handler is called from one goroutine of the Sandbox's
	// own, never from a run's path: a slow one costs queued events
	// (AuditQueue), which are counted, not the run's time. New refuses a
	// nil handler, and one not enabled at Info.
	Handler slog.Handler
	// Exec adds to the trail each program a run executes (every execve
	// and execveat, of the program and what it starts), with its path and
	// pid: the filter hands each exec to the supervisor, which records it
	// and lets it run. The path is read from the process's memory before
	// the exec, so a hostile multi-threaded program can make the record
	// name another path than what ran (see "Audit trail" in the package
	// documentation). It costs each exec a round trip to the supervisor,
	// about 0.3 ms here, a third more than a shell's fork and exec of
	// /bin/true (BenchmarkAuditExec): so it is off by default. It needs a
	// filter (not Unconfined), and a policy that allows execve and
	// execveat whatever their arguments, as the default does; New reports
	// an *OptionError otherwise.
	Exec bool
}

// auditor is a Sandbox's audit trail: a bounded queue of records that one
// goroutine of its own hands to the handler, in the order they came.
type auditor struct {
	h     slog.Handler
	id    string // the Sandbox's id, on every event
	warn  func(msg string, args ...any)
	queue chan slog.Record
	// wake has the drainer report drops when nothing is queued.
	wake    chan struct{}
	dropped atomic.Int64 // dropped since the last "audit dropped" event

	// runs counts the runs begun whose end is not yet queued; after
	// close no run is begun, and idle, if set, is closed when the last
	// ends.
	mu        sync.Mutex
	runs      int
	closed    bool
	idle      chan struct{}
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{} // closed when the drainer has handed over everything
}

// newAuditor starts the audit trail of o, or returns nil without
// Options.Audit.
func newAuditor(o *resolved, log *slog.Logger) (*auditor, error) {
	if o.Audit == nil {
		return nil, nil
	}
	if !o.Audit.Enabled(context.Background(), slog.LevelInfo) {
		return nil, optionErr("Options.Audit.Handler", "a handler", "is not enabled at slog.LevelInfo, the level of every audit event; a trail must take all of them")
	}
	var b [8]byte
	rand.Read(b[:])
	a := &auditor{
		h:       o.Audit,
		id:      hex.EncodeToString(b[:]),
		warn:    log.Warn,
		queue:   make(chan slog.Record, auditQueueLen),
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go a.drain()
	return a, nil
}

// emit queues r without waiting; reserved events may take the last
// places. It reports whether r was queued; when not, it is counted.
func (a *auditor) emit(r slog.Record, reserved bool) bool {
	if reserved || len(a.queue) < cap(a.queue)-auditReserve {
		select {
		case a.queue <- r:
			return true
		default:
		}
	}
	a.dropped.Add(1)
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return false
}

// drain hands the queued records to the handler until close, and what is
// queued by then.
func (a *auditor) drain() {
	defer close(a.done)
	failed := false
	handle := func(r slog.Record) {
		if err := a.h.Handle(context.Background(), r); err != nil && !failed {
			failed = true // said once: a broken sink fails every event
			a.warn("sandbox: the audit handler failed", "sandbox", a.id, "error", err)
		}
	}
	for {
		select {
		case r := <-a.queue:
			handle(r)
		case <-a.wake:
		case <-a.closing:
			for {
				select {
				case r := <-a.queue:
					handle(r)
					a.reportDropped(handle)
					continue
				default:
				}
				a.reportDropped(handle)
				return
			}
		}
		a.reportDropped(handle)
	}
}

// reportDropped hands over an "audit dropped" event for the events
// dropped since the last one, if any were.
func (a *auditor) reportDropped(handle func(slog.Record)) {
	if n := a.dropped.Swap(0); n > 0 {
		r := slog.NewRecord(time.Now(), slog.LevelInfo, AuditDropped, 0)
		r.AddAttrs(slog.String("sandbox", a.id), slog.Int64("count", n))
		handle(r)
	}
}

// close waits, up to AuditFlushTimeout, for the runs begun to queue their
// end and for the handler to take everything queued.
func (a *auditor) close() {
	if a == nil {
		return
	}
	deadline := time.NewTimer(AuditFlushTimeout)
	defer deadline.Stop()
	a.mu.Lock()
	a.closed = true
	if a.runs > 0 {
		ended := make(chan struct{})
		a.idle = ended
		a.mu.Unlock()
		select {
		case <-ended:
		case <-deadline.C:
		}
	} else {
		a.mu.Unlock()
	}
	a.stop()
	select {
	case <-a.done:
	case <-deadline.C:
		a.warn("sandbox: the audit handler did not take the queued events before Close returned; they reach it when it does",
			"sandbox", a.id, "timeout", AuditFlushTimeout)
	}
}

// stop ends the drainer once it has handed over what is queued, without
// waiting: for a Sandbox dropped without Close.
func (a *auditor) stop() { a.closeOnce.Do(func() { close(a.closing) }) }

// runEnded counts one run's end as queued.
func (a *auditor) runEnded() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs--; a.runs == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
}

// record makes an event of the Sandbox at t; run 0 is none.
func (a *auditor) record(t time.Time, msg string, run uint64, attrs ...slog.Attr) slog.Record {
	r := slog.NewRecord(t, slog.LevelInfo, msg, 0)
	r.AddAttrs(slog.String("sandbox", a.id))
	if run != 0 {
		r.AddAttrs(slog.Uint64("run", run))
	}
	r.AddAttrs(attrs...)
	return r
}

// runAudit is the audit of one run: its events, and how many of them the
// queue dropped.
type runAudit struct {
	a       *auditor
	id      uint64
	live    bool // the init of a live sandbox (live start and end)
	begin   time.Time
	dropped atomic.Int64
	// The refusals and execs handed to the trail, of those the run made.
	denials, execs atomic.Int64
	endOnce        sync.Once
}

// beginRun queues the start of run id of cmd under o, within ctx: a run
// start event, or for a live sandbox's init a live start. Nil without an
// audit trail, and after close.
func (a *auditor) beginRun(ctx context.Context, id uint64, cmd *Cmd, o *resolved, root *rootView) *runAudit {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	if a.closed {
		// Refused as closed: nothing of it happens.
		a.mu.Unlock()
		return nil
	}
	a.runs++
	a.mu.Unlock()
	ra := &runAudit{a: a, id: id, live: cmd.hold, begin: time.Now()}
	attrs := []slog.Attr{slog.Bool("live", o.Live), slog.String("network", o.Network.String())}
	if len(o.Egress) > 0 {
		attrs = append(attrs, slog.Any("egress", o.Egress))
	}
	msg := AuditLiveStart
	if !cmd.hold {
		msg = AuditRunStart
		args := cmd.Args
		if len(args) == 0 {
			args = []string{cmd.Path}
		}
		attrs = append([]slog.Attr{slog.String("path", cmd.Path), slog.Any("argv", args), slog.String("dir", orDefault(cmd.Dir, root.workDir))}, attrs...)
		if d, ok := ctx.Deadline(); ok {
			attrs = append(attrs, slog.Duration("timeout", time.Until(d)))
		}
	}
	// Groups last: a handler whose ReplaceAttr empties a group may drop
	// what follows it.
	attrs = append(attrs, slog.Group("limits",
		slog.Int64("memory", limit(o.Limits.Memory, DefaultMemory)),
		slog.Float64("cpus", max(orDefault(o.Limits.CPUs, DefaultCPUs), 0)),
		slog.Int64("pids", limit(o.Limits.Pids, DefaultPids)),
		slog.Int64("output", orDefault(o.Limits.Output, DefaultOutputLimit))))
	if !a.emit(a.record(ra.begin, msg, id, attrs...), true) {
		ra.dropped.Add(1)
	}
	return ra
}

// event queues one of the run's events other than its start and end.
func (ra *runAudit) event(t time.Time, msg string, attrs ...slog.Attr) {
	if !ra.a.emit(ra.a.record(t, msg, ra.id, attrs...), false) {
		ra.dropped.Add(1)
	}
}

// connection queues one attempt of the run's egress proxy, as the proxy
// records it: when it ended. It is the proxy's OnRecord, which must not
// block.
func (ra *runAudit) connection(c egress.Connection) {
	decision := "refused"
	if c.Allowed {
		decision = "allowed"
	}
	attrs := []slog.Attr{slog.String("host", c.Host), slog.Int("port", c.Port), slog.String("method", c.Method),
		slog.String("decision", decision), slog.String("reason", c.Reason), slog.String("addr", c.Addr),
		slog.Int("status", c.Status), slog.Int64("bytes_up", c.BytesUp), slog.Int64("bytes_down", c.BytesDown),
		slog.Time("started", c.Start), slog.Duration("duration", c.Duration)}
	if c.Error != "" {
		attrs = append(attrs, slog.String("error", c.Error))
	}
	ra.event(c.Start.Add(c.Duration), AuditConnection, attrs...)
}

// runFacts is what a run's end reports besides its Result.
type runFacts struct {
	auditExec bool // the run's execs were audited
	execs     int  // programs it executed, audited or not listed
}

// denial queues one syscall the run's filter refused, at when.
func (ra *runAudit) denial(at time.Time, name string, errno, pid int) {
	ra.denials.Add(1)
	ra.event(at, AuditDenial, slog.String("syscall", name), slog.Int("errno", errno),
		slog.String("error", syscall.Errno(errno).Error()), slog.Int("pid", pid))
}

// exec queues one program the run executed, at when: path as it was in
// the process's memory before the exec, relative to dirfd for an
// execveat.
func (ra *runAudit) exec(at time.Time, call, path string, dirfd, pid int) {
	ra.execs.Add(1)
	attrs := []slog.Attr{slog.String("path", path), slog.Int("pid", pid), slog.String("syscall", call)}
	if call == "execveat" {
		attrs = append(attrs, slog.Int("dirfd", dirfd))
	}
	ra.event(at, AuditExec, attrs...)
}

// end queues the run's last events: its changes, and its end (run end, or live end for a live sandbox's init). Only the first
// call does anything.
func (ra *runAudit) end(res *Result, err error, f runFacts) {
	if ra == nil {
		return
	}
	ra.endOnce.Do(func() {
		defer ra.a.runEnded()
		if res != nil {
			for _, c := range res.Changes {
				ra.event(time.Now(), AuditChange, slog.String("path", c.Path), slog.String("change", c.Kind.String()),
					slog.Int64("size", c.Size), slog.String("mode", c.Mode.String()))
			}
		}
		ra.a.emit(ra.endRecord(res, err, f), true)
	})
}

// endRecord is the run's end event.
func (ra *runAudit) endRecord(res *Result, err error, f runFacts) slog.Record {
	now := time.Now()
	attrs := []slog.Attr{slog.Time("started", ra.begin), slog.Duration("duration", now.Sub(ra.begin))}
	var limits []any
	if res != nil {
		attrs = append(attrs, slog.String("outcome", res.Outcome.String()), slog.Int("exit_code", res.ExitCode))
		if res.Signal != 0 {
			attrs = append(attrs, slog.String("signal", res.Signal.String()))
		}
		if res.Violation != "" {
			attrs = append(attrs, slog.String("violation", res.Violation))
		}
		limits = make([]any, 0, len(res.Limits))
		for _, l := range res.Limits {
			limits = append(limits, slog.Group(l.Name, slog.String("value", l.Value), slog.Bool("enforced", l.Enforced), slog.String("by", l.By)))
		}
		denials := 0
		for _, d := range res.Denials {
			denials += d.Count
		}
		attrs = append(attrs,
			slog.Duration("wall", res.WallTime), slog.Duration("user", res.UserTime), slog.Duration("system", res.SystemTime),
			slog.Int64("memory_peak", res.MemoryPeak), slog.Bool("pooled", res.Pooled),
			slog.Int("denials", denials), slog.Int("denials_dropped", max(denials-int(ra.denials.Load()), 0)),
			slog.Int("connections", len(res.Connections)+res.ConnectionsDropped), slog.Int("connections_dropped", res.ConnectionsDropped),
			slog.Int("changes", len(res.Changes)+max(res.ChangesDropped, 0)), slog.Int("changes_dropped", res.ChangesDropped))
	}
	if f.auditExec {
		attrs = append(attrs, slog.Int("execs", f.execs), slog.Int("execs_dropped", max(f.execs-int(ra.execs.Load()), 0)))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	// The end itself is reserved room; what was dropped before it is
	// all there is to count.
	attrs = append(attrs, slog.Int64("audit_dropped", ra.dropped.Load()))
	if res != nil {
		// Last, as in a run start.
		attrs = append(attrs, slog.Group("limits", limits...))
	}
	msg := AuditRunEnd
	if ra.live {
		msg = AuditLiveEnd
	}
	return ra.a.record(now, msg, ra.id, attrs...)
}
