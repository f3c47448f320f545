// Package wire holds the messages that cross process boundaries: the run
// configuration (a sandbox's Spec and its Program) the caller hands to the
// in-sandbox init, the setup error the init hands back, and the requests
// and replies between the caller and its spawner. Both ends are the same
// binary, so JSON is enough.
package wire

import (
	"bytes"
	"slices"
	"syscall"
)

// The sandbox user and the working directory every sandbox shares: the
// ids the program runs as inside (/etc/passwd names them "sandbox"), and
// where a program that names no directory starts. The root package
// exports them as sandbox.SandboxUID, SandboxGID and DefaultDir.
const (
	SandboxUID = 1000
	SandboxGID = 1000
	DefaultDir = "/workspace"
)

// Config is everything the in-sandbox init needs to build the sandbox and
// start the program. It is sent over the init's inherited socket, never argv.
//
// It is a Spec (what the sandbox is), a Program (what runs in it), and
// what the launcher adds for this one launch. A prepared sandbox is built
// from a Spec alone and given a Program later; the spawner's pool gives it
// only to a run whose Spec is Equal to the one it was prepared from.
type Config struct {
	Spec
	Program

	// Prepare makes the init build the sandbox without a program: Path,
	// Args, Env and Dir are empty, and the init has /dev/null as stdio.
	// Once built it sends PreparedMark and waits for a Program. It says
	// how this init is started, not what sandbox it builds, so it is in
	// neither the Spec (a run and the sandbox prepared for it share one)
	// nor the Program.
	Prepare bool

	// ResetOOMScore says the init inherits a negative oom_score_adj and
	// must raise it to 0; the launcher knows its own, which the init gets.
	// The launcher sets it for each launch from its own state; the caller
	// never asks for it, so it is no part of the Spec.
	ResetOOMScore bool

	// Rlimit stand-ins the launcher chose when no cgroup could be had
	// (BestEffort); zero means not set. The launcher derives them from
	// the Spec's limits at each launch, so they are not in it.
	RlimitData  uint64
	RlimitNproc uint64
}

// Spec is what a sandbox is, whatever runs in it: its ids, root, mounts,
// limits, filter and network. Two runs with Equal Specs can use
// sandboxes built alike, which is what the spawner's pool relies on: every
// field that makes sandboxes differ belongs here, and Equal compares it
// (TestSpecEqualCoversEveryField fails for a field it leaves out).
type Spec struct {
	Hostname string

	Rootfs        string // host directory used as the root's source; "" = host binds
	Workspace     string // host directory bound read-write at /workspace; "" = tmpfs
	WorkspaceSize int64  // bytes, for the tmpfs workspace
	// WorkspaceMount says the init is given the session's workspace as a
	// detached mount to attach at /workspace instead of making a tmpfs:
	// a cold init as its next fd after the proxy channel's, a prepared
	// one with its Program. It decides how /workspace is built, so it is
	// the Spec's, and a prepared sandbox takes only runs that bring one
	// when it waits for one.
	WorkspaceMount bool
	TmpSize        int64 // bytes
	Binds          []Bind
	NoFile         uint64 // RLIMIT_NOFILE

	HostUID, HostGID int // the host ids the sandbox user maps to

	// Limits for the run's cgroup; zero fields are not limited.
	Memory       int64  // bytes
	CPUQuota     int64  // microseconds per CPUPeriod
	CPUPeriod    uint64 // microseconds
	Pids         int64
	CgroupParent string // "" = the launcher's own cgroup
	BestEffort   bool   // without a writable cgroup, fall back to rlimits
	MaxFileSize  int64  // RLIMIT_FSIZE in bytes; 0 = unlimited
	IOReadBPS    int64  // bytes per second on the disks under Workspace and writable binds
	IOWriteBPS   int64

	// Seccomp is the syscall filter, as the kernel takes it (struct
	// sock_filter array); nil runs unfiltered. With SeccompListen the init
	// hands the filter's notification fd to its parent, whose supervisor
	// answers refused syscalls and counts them; with SeccompKill it ends
	// the run at the first.
	Seccomp       []byte
	SeccompListen bool
	SeccompKill   bool

	// HostNetwork keeps the launcher's network namespace (NetworkHostUnsafe).
	HostNetwork bool
	// ProxyPort, when set, makes the init listen on 127.0.0.1:ProxyPort
	// inside the run's namespace and hand the listening socket over its
	// proxy channel (fd 4) before it execs the program.
	ProxyPort int

	// Terminal, when set, makes the init give the program a pty of the
	// sandbox's own devpts as 0, 1, 2 and controlling terminal, in place
	// of the stdio it was started with (see TerminalMark). It is the
	// Spec's, not the Program's: the init makes the pty from the config
	// it was built with, so a sandbox prepared without one (the pool
	// never prepares one) cannot give a program a terminal, and a run
	// with one matches no pool and starts cold.
	Terminal *Winsize `json:",omitempty"`
	// TrustedCAs are PEM certificates added to every CA bundle of the
	// sandbox's trust store.
	TrustedCAs []byte
}

// Equal says whether s and t are the same sandbox, so that one prepared
// from t may serve a run of s. It compares every field, telling a nil
// slice from an empty one (a nil Seccomp runs unfiltered): a difference
// that does not matter costs a cold start, one missed would hand a run a
// sandbox it did not ask for.
func (s *Spec) Equal(t *Spec) bool {
	return s.Hostname == t.Hostname &&
		s.Rootfs == t.Rootfs && s.Workspace == t.Workspace && s.WorkspaceSize == t.WorkspaceSize &&
		s.WorkspaceMount == t.WorkspaceMount && s.TmpSize == t.TmpSize &&
		sameSlice(s.Binds, t.Binds) && s.NoFile == t.NoFile &&
		s.HostUID == t.HostUID && s.HostGID == t.HostGID &&
		s.Memory == t.Memory && s.CPUQuota == t.CPUQuota && s.CPUPeriod == t.CPUPeriod && s.Pids == t.Pids &&
		s.CgroupParent == t.CgroupParent && s.BestEffort == t.BestEffort && s.MaxFileSize == t.MaxFileSize &&
		s.IOReadBPS == t.IOReadBPS && s.IOWriteBPS == t.IOWriteBPS &&
		sameBytes(s.Seccomp, t.Seccomp) && s.SeccompListen == t.SeccompListen && s.SeccompKill == t.SeccompKill &&
		s.HostNetwork == t.HostNetwork && s.ProxyPort == t.ProxyPort &&
		(s.Terminal == nil) == (t.Terminal == nil) && (s.Terminal == nil || *s.Terminal == *t.Terminal) &&
		sameBytes(s.TrustedCAs, t.TrustedCAs)
}

func sameSlice[T comparable](a, b []T) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// Winsize is a terminal's window size, in characters.
type Winsize struct {
	Rows, Cols uint16
}

// TerminalMark is the byte that carries the master of a run's pty from its
// init to the launcher, as SCM_RIGHTS, after the sandbox is built and
// before the program's filter is loaded. The launcher passes it on to the
// caller with the Started reply (Reply.Terminal). The sequence, for a run
// with Spec.Terminal:
//
//	caller            spawner (launcher)               init
//	Request{Spec,    →  launch                      →  builds the sandbox, pivots,
//	  Program}                                         opens /dev/pts/ptmx, unlocks it,
//	                                                   TIOCGPTPEER, TIOCSCTTY on the peer,
//	                                                   peer on 0, 1, 2
//	                                            ←  TerminalMark + SCM_RIGHTS(master)
//	                                               (then the filter's listener, if any;
//	                                               then EOF at the program's execve)
//	                 ←  Reply{Started, Terminal} + SCM_RIGHTS(master)
//	reads and writes the master, TIOCSWINSZ on it for Cmd.Resize
//
// An init that fails sends its setup error instead, and the master, if it
// was sent, is closed unused.
const TerminalMark = 'T'

// Bind is one extra bind mount.
type Bind struct {
	Source, Target string
	Writable       bool
}

// SetupError is a failure inside the init, carried with its errno so the
// caller can rebuild an error that errors.Is matches to syscall.Errno values.
type SetupError struct {
	Stage string // which step: "mount", "pivot_root", "exec", ...
	Op    string // the system call or operation
	Path  string // the path involved, if any
	Errno int    // 0 when the error was not a system call's
	Text  string // the message when Errno is 0
}

// String is e as one line, as the caller's sandbox.SetupError reads
// without the caller's advice: for a log in a process that has no caller's
// options to explain it with (the spawner's warnings).
func (e *SetupError) String() string {
	s := "sandbox: " + e.Stage
	if e.Op != "" {
		s += ": " + e.Op
	}
	if e.Path != "" {
		s += " " + e.Path
	}
	if e.Errno != 0 {
		return s + ": " + syscall.Errno(e.Errno).Error()
	}
	return s + ": " + e.Text
}

// Request is a message from the caller to its spawner. Start requests carry
// three fds (stdin, stdout, stderr) as SCM_RIGHTS, then the proxy channel
// and the workspace mount when Spec asks for them.
type Request struct {
	ID   uint64
	Kill bool // kill the run ID instead of starting one

	// Spec is the sandbox of a start or a Fill, and Program a start's
	// program: the start's Config is both.
	Spec    *Spec    `json:",omitempty"`
	Program *Program `json:",omitempty"`

	// Owner names the Sandbox the request is for, unique in the caller:
	// its runs' teardown and its pool are tracked under it.
	Owner string `json:",omitempty"`
	// Pool is how many sandboxes prepared from Spec the spawner keeps
	// ready for Owner; a start takes one when its Spec is the pool's.
	Pool int `json:",omitempty"`
	// Sync asks for a Synced reply once Owner's prepared sandboxes are
	// destroyed and the teardown of its ended runs is done (Close).
	Sync bool `json:",omitempty"`
	// Fill asks for Owner's pool of Pool sandboxes prepared from Spec to
	// be filled, and for a Synced reply once it is full (Err: why not).
	Fill bool `json:",omitempty"`
}

// Reply kinds.
const (
	Accepted = "accepted" // the start request has been read, before anything of it was done
	Started  = "started"  // the program has been exec'd
	Failed   = "failed"   // setup failed; Err says why
	Exited   = "exited"   // the sandbox's init has been reaped
	Synced   = "synced"   // the Sync request ID is done
	Warning  = "warning"  // Text is for the Logger of the Sandbox named Owner (of every one when empty)
)

// Reply is a message from the spawner to the caller.
type Reply struct {
	ID   uint64
	Kind string
	Err  *SetupError `json:",omitempty"`
	Exit *Exit       `json:",omitempty"`
	// Owner and Text are a Warning's.
	Owner string `json:",omitempty"`
	Text  string `json:",omitempty"`
	// Terminal says a Started reply carries the master of the run's pty
	// as SCM_RIGHTS (Spec.Terminal; see TerminalMark).
	Terminal bool `json:",omitempty"`
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

	// Pooled says the run took a sandbox prepared ahead.
	Pooled bool `json:",omitempty"`

	// Limits says what was enforced, and how.
	Limits []Limit

	// Denials counts the syscalls the filter refused and reported;
	// Violation names the one that ended the run under SeccompKill.
	Denials   []Denial `json:",omitempty"`
	Violation string   `json:",omitempty"`
}

// Denial is one refused syscall and how often it was refused.
type Denial struct {
	Syscall string
	Errno   int
	Count   int
}

// Limit is one resource limit as it was put in place.
type Limit struct {
	Name     string // "memory", "cpu", "pids"
	Value    string // the limit as set, e.g. "536870912 bytes"
	Enforced bool
	By       string // "cgroup v2", "cgroup v1", "RLIMIT_DATA", or why not
}

// PreparedMark is the byte a prepared init sends when its sandbox is built.
// A setup error, JSON, never starts with it.
const PreparedMark = 'P'

// Program is what runs in a sandbox: the part of a Config a prepared init
// is given once it is built, with the run's stdio (and the session's
// workspace mount, when its Spec has WorkspaceMount) as SCM_RIGHTS.
type Program struct {
	Path string   // the program, as the caller named it
	Args []string // argv, Args[0] included
	Env  []string // the complete environment of the program
	Dir  string   // working directory inside the sandbox
}

// ListenerMark is the byte that carries the filter's listener from an
// init to its launcher, as SCM_RIGHTS, ahead of anything else the init
// sends but a TerminalMark.
const ListenerMark = 'L'

// ExecMark is the byte an init without a listener to send sends instead,
// before its filter and execve: an init that ends without either mark died
// during setup.
const ExecMark = 'X'

// ProxyMark is the byte that carries the listening socket of a
// NetworkAllow run's egress proxy from its init, inside the run's network
// namespace, straight to the caller, as SCM_RIGHTS on the proxy channel.
const ProxyMark = 'P'

// The SetupError Ops the caller tells apart from the rest.
const (
	// OpInitDied marks the SetupError of an init that died during setup
	// before it could report: Run tells why from its exit.
	OpInitDied = "init died during setup"
	// OpNoCgroup marks the SetupError of a host without a writable
	// cgroup, so the caller can tell it from other cgroup failures.
	OpNoCgroup = "no writable cgroup"
)

// MaxMessage is the largest message on the spawner's socket.
const MaxMessage = 1 << 20

// SpawnerConnFd is the spawner's end of its socket pair with the caller.
const SpawnerConnFd = 3
