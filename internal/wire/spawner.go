package wire

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/fumehood/sandbox/internal/report"
)

// The caller and its spawner talk over a SOCK_SEQPACKET socket pair, one
// JSON message a packet: Request from the caller, Reply from the spawner.
// The spawner's end is its fd SpawnerConnFd. Each Request names its Kind,
// and the spawner serves each kind by one method of its server
// (internal/spawner), named on the right of each arrow below.
//
//	caller                                    spawner
//	Request{ID, Start, Spec, Program,      →  serveStart: reads it
//	  Owner, Pool}
//	  + SCM_RIGHTS(0,1,2[, proxy channel]
//	  [, workspace mount])
//	                                        ←  Reply{ID, Accepted}, before anything of it is
//	                                           done (no Accepted before the spawner died:
//	                                           the caller may send the run to a new one)
//	                                           takes a sandbox of Owner's pool prepared from
//	                                           an Equal Spec when Pool > 0 (no proxy, no
//	                                           terminal), hands it the Program and files;
//	                                           else launches cold
//	                                        ←  Reply{ID, Started} or Reply{ID, Failed, Err};
//	                                           a run with a terminal: Reply{ID, Started,
//	                                           Terminal} + SCM_RIGHTS(the pty's master)
//	                                        ←  Reply{ID, Events} any number of times, with
//	                                           Spec.SeccompEvents: the refusals and execs of
//	                                           the run's supervisor as they happen, each
//	                                           reply below MaxReply, all before its Exited
//	Request{ID, Enter, Live: L, Spec,      →  serveEnter: (a live sandbox's call) starts
//	  Program, Owner}                          Program in the running sandbox of the run L,
//	  + SCM_RIGHTS(0,1,2)                      whose Program has Hold, as a process entering
//	                                           it (launch.Enter)
//	                                        ←  Reply{ID, Accepted}, then Started{Pid} or Failed,
//	                                           then Exited, as for a start; Kill kills the
//	                                           entrant's process group, not the sandbox
//	Request{ID, Dial, Live: L, Network,    →  serveDial: (Sandbox.DialContext) connects to
//	  Address, DialTimeout}                    Address from inside the network namespace of
//	                                           the live sandbox L (launch.Dial)
//	                                        ←  Reply{ID, Synced} + SCM_RIGHTS(the connected
//	                                           socket), or Reply{ID, Synced, Err}
//	Request{ID, Signal, Signal: n}         →  serveSignal: (Process.Signal) deliver the signal
//	                                           to the run's program, or take its default
//	                                           action (launch.Handle.Signal); no reply: how
//	                                           the run ended is in its Exit
//	Request{ID, Kill} (on ctx end, Kill)   →  serveKill: kill the run's init
//	                                        ←  Reply{ID, Exited, Exit} (Exit.Pooled: it took
//	                                           a prepared sandbox)
//	Request{ID, Fill, Owner, Spec, Pool}   →  serveFill: make Owner's pool Pool sandboxes
//	  (New with a Pool)                        prepared from Spec, destroying any prepared
//	                                           from another
//	                                        ←  Reply{ID, Synced[, Err]} once it is full, or
//	                                           a preparation failed
//	Request{ID, Sync, Owner} (Close)       →  serveSync: destroy Owner's pool, wait for the
//	                                           teardown of its runs
//	                                        ←  Reply{ID, Synced}
//	a Request of no kind the spawner       →  dispatch, before any method: Request.Check
//	  knows, or with a field its kind
//	  does not carry, or without one it
//	  needs
//	                                        ←  Reply{ID, Refused, Err} naming the kind or
//	                                           field, and nothing else of the request is done
//	                                        ←  Reply{Warning, Owner, Text} at any time: for
//	                                           Owner's Logger (every Logger when Owner is "")
//	close (caller exits or dies)            →  kill every run, destroy the pools, exit
//
// The only fd the spawner sends is the master of a run's pty (made in the
// sandbox: TerminalMark) and a Dial's connected socket; the caller keeps
// the read ends of the output pipes and the write end of stdin. The proxy
// channel of an *Egress run is passed on to its init, which answers
// the caller on it directly (ProxyMark).

// RequestKind is what a Request asks of the spawner. Its zero value is no
// kind, which the spawner refuses.
type RequestKind string

// Request kinds; Check says which fields each carries.
const (
	Start  RequestKind = "start"  // start a run in a new sandbox, or one of Owner's pool
	Enter  RequestKind = "enter"  // start a run as a process entering the live sandbox Live
	Dial   RequestKind = "dial"   // connect to Address inside the live sandbox Live
	Signal RequestKind = "signal" // deliver Signal to the run ID's program
	Kill   RequestKind = "kill"   // kill the run ID
	Fill   RequestKind = "fill"   // fill Owner's pool, and reply Synced once it is full
	Sync   RequestKind = "sync"   // destroy Owner's pool, and reply Synced once its runs are torn down
)

// Request is a message from the caller to its spawner. Start and Enter
// requests carry three fds (stdin, stdout, stderr) as SCM_RIGHTS; a
// Start's are followed by the proxy channel and the workspace mount when
// Spec asks for them. Every field but ID and Kind belongs to some kinds only
// (Check).
type Request struct {
	ID   uint64
	Kind RequestKind
	// Live names the live sandbox (a run whose Program has Hold) that an
	// Enter's Program runs in, or that a Dial connects in.
	Live uint64 `json:",omitempty"`
	// Network, Address and DialTimeout are a Dial's: it connects to
	// Address on Network ("tcp4", "tcp6" or "unix"; the address an IP
	// literal and port, or a path inside the sandbox), giving up after
	// DialTimeout.
	Network     string        `json:",omitempty"`
	Address     string        `json:",omitempty"`
	DialTimeout time.Duration `json:",omitempty"`
	// Signal is the signal number a Signal request delivers
	// (launch.Handle.Signal).
	Signal int

	// Spec is the sandbox of a Start, an Enter or a Fill, and Program a
	// Start's or an Enter's program: the run's Config is both.
	Spec    *Spec    `json:",omitempty"`
	Program *Program `json:",omitempty"`

	// Owner names the Sandbox the request is for, unique in the caller:
	// its runs' teardown and its pool are tracked under it.
	Owner string `json:",omitempty"`
	// Pool is how many sandboxes prepared from Spec the spawner keeps
	// ready for Owner (a Fill's, at least 1); a Start takes one when its
	// Spec is the pool's (0: it does not, and starts cold).
	Pool int `json:",omitempty"`
}

// ErrRequest marks a Request the spawner refuses (Check).
var ErrRequest = errors.New("malformed spawner request")

// requestFields says, for each kind, which fields of a Request besides ID
// and Kind it needs set, and which it may leave zero; any other field set
// is foreign to it.
var requestFields = map[RequestKind]struct{ needs, may []string }{
	Start:  {needs: []string{"Spec", "Program"}, may: []string{"Owner", "Pool"}},
	Enter:  {needs: []string{"Live", "Spec", "Program"}, may: []string{"Owner"}},
	Dial:   {needs: []string{"Live", "Network", "Address", "DialTimeout"}},
	Signal: {needs: []string{"Signal"}},
	Kill:   {},
	Fill:   {needs: []string{"Spec", "Pool"}, may: []string{"Owner"}},
	Sync:   {may: []string{"Owner"}},
}

// Check says whether r is a Request the spawner serves: of a kind it
// knows, with every field that kind needs and none it does not carry. The
// error, wrapping ErrRequest, names the kind and the field.
func (r *Request) Check() error {
	fields, ok := requestFields[r.Kind]
	if !ok {
		return fmt.Errorf("%w: no kind %q", ErrRequest, r.Kind)
	}
	if r.Pool < 0 {
		return fmt.Errorf("%w: a %s request with a negative Pool", ErrRequest, r.Kind)
	}
	if r.DialTimeout < 0 {
		return fmt.Errorf("%w: a %s request with a negative DialTimeout", ErrRequest, r.Kind)
	}
	v := reflect.ValueOf(r).Elem()
	for _, f := range reflect.VisibleFields(v.Type()) {
		if f.Name == "ID" || f.Name == "Kind" {
			continue
		}
		set := !v.FieldByIndex(f.Index).IsZero()
		switch {
		case slices.Contains(fields.needs, f.Name):
			if !set {
				return fmt.Errorf("%w: a %s request needs %s", ErrRequest, r.Kind, f.Name)
			}
		case set && !slices.Contains(fields.may, f.Name):
			return fmt.Errorf("%w: a %s request does not carry %s", ErrRequest, r.Kind, f.Name)
		}
	}
	return nil
}

// Reply kinds.
const (
	Accepted = "accepted" // the start request has been read, before anything of it was done
	Started  = "started"  // the program has been exec'd
	Failed   = "failed"   // setup failed; Err says why
	Exited   = "exited"   // the sandbox's init has been reaped
	Synced   = "synced"   // the Sync request ID is done
	Warning  = "warning"  // Text is for the Logger of the Sandbox named Owner (of every one when empty)
	Events   = "events"   // Events lists what the run's supervisor saw since the last (Spec.SeccompEvents)
	Refused  = "refused"  // the request was not served: Err says which kind or field the spawner does not take (Request.Check)
)

// Reply is a message from the spawner to the caller.
type Reply struct {
	ID   uint64
	Kind string
	Err  *SetupError `json:",omitempty"`
	Exit *Exit       `json:",omitempty"`
	// Owner and Text are a Warning's, and Err, on a Warning, the
	// launcher's failure it is about (a pool's preparation).
	Owner string `json:",omitempty"`
	Text  string `json:",omitempty"`
	// Terminal says a Started reply carries the master of the run's pty
	// as SCM_RIGHTS (Spec.Terminal; see TerminalMark).
	Terminal bool `json:",omitempty"`
	// Pid is, on a Started reply, the program's pid in the spawner's PID
	// namespace, and InnerPid in the sandbox's (1 but for an entrant).
	Pid      int `json:",omitempty"`
	InnerPid int `json:",omitempty"`
	// Events are an Events reply's, in the order they happened; the
	// spawner sends them before the run's Exited, and keeps each reply
	// below MaxReply.
	Events []Event `json:",omitempty"`
}

// Exit is how the sandbox's init ended and what it used.
type Exit struct {
	Status    uint32 // the raw wait status
	UserNS    int64  // user CPU time in nanoseconds
	SysNS     int64  // system CPU time in nanoseconds
	MaxRSSKiB int64

	// From the run's cgroup, when it had one.
	CgroupCPUNS int64
	MemoryPeak  int64
	OOMKills    uint64
	PidsMax     uint64
	// OOMKillsBefore, for a process that entered a live sandbox, counts
	// the OOM kills in the sandbox's cgroup before it started that no
	// earlier entrant's Exit reported: those of its background
	// processes between calls. OOMKills counts those while it ran.
	OOMKillsBefore uint64 `json:",omitempty"`

	// DefaultSignal is the signal whose default action (to end the
	// process) the launcher took by killing the init, which the kernel
	// would have dropped for being its namespace's init without a
	// handler for it; 0 if none.
	DefaultSignal int `json:",omitempty"`

	// Pooled says the run took a sandbox prepared ahead.
	Pooled bool `json:",omitempty"`

	// Limits says what was enforced, and how; the caller hands them
	// on as they are, in its Result.
	Limits []report.Limit

	// Denials counts the syscalls the filter refused and reported;
	// Violation names the one that ended the run under SeccompKill.
	Denials   []report.Denial `json:",omitempty"`
	Violation string          `json:",omitempty"`

	// Execs counts the programs executed that the supervisor was told
	// of (Spec.SeccompEvents with an audited exec; an attempt whose path
	// named no file is not one), and EventsUnsent the events of the run
	// it did not report: past MaxEvents, or while the events waiting to
	// be sent were at their bound.
	Execs        int `json:",omitempty"`
	EventsUnsent int `json:",omitempty"`
}

// MaxEvents is the most events (refusals and execs, each kind) the
// supervisor of one run reports; past them it only counts.
const MaxEvents = 1000

// MaxEventPath is the most bytes of an exec's path an Event carries.
const MaxEventPath = 512

// Event is one thing the supervisor of a run saw, as it happened: a
// syscall the filter refused, or a program executed.
type Event struct {
	Exec    bool   `json:",omitempty"` // an exec (execve or execveat); else a refusal
	Syscall string `json:",omitempty"` // the refused syscall's name, or the exec's
	Errno   int    `json:",omitempty"` // what the refusal answered
	Pid     int    `json:",omitempty"` // the process, in the sandbox's PID namespace; 0 if it was gone
	Time    int64  // when the supervisor took it, in Unix nanoseconds
	// Path is the exec's path (clipped to MaxEventPath) as it was in
	// the process's memory when the supervisor read it, and Dirfd, for
	// an execveat, the directory it is relative to (or the file itself,
	// with an empty Path).
	Path  string `json:",omitempty"`
	Dirfd int    `json:",omitempty"`
}

// Size bounds e's length in JSON: its fixed part, and its text were every
// byte escaped (\u00XX), as a program may choose its path's bytes.
func (e *Event) Size() int { return 160 + 6*(len(e.Syscall)+len(e.Path)) }

// EventsPerReply bounds the Size of the events one Events reply carries,
// so that with its envelope it stays below MaxReply.
const EventsPerReply = MaxReply - 1024

// MaxMessage is the largest message on the spawner's socket.
const MaxMessage = 1 << 20

// MaxReply is the largest Reply: what the caller reads each into. It is
// below the send buffer the spawner's socket has at Linux's default
// (net.core.wmem_default, 208 KiB), and above the largest Exit and the
// largest Events reply.
const MaxReply = 128 << 10

// SpawnerConnFd is the spawner's end of its socket pair with the caller.
const SpawnerConnFd = 3
