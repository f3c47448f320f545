package wire

import (
	"bytes"
	"slices"
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
	// SeccompEvents makes the supervisor also report each refusal it
	// answers, and each exec the filter notifies it of (Seccomp then
	// notifies execve and execveat with seccomp.ContinueErrno), as it
	// happens: Reply{Events}, for the caller's audit trail.
	SeccompEvents bool

	// HostNetwork keeps the launcher's network namespace (HostNetworkUnsafe).
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

	// RootfsLayers, when set, are the host directories of an image's
	// layers, top first, whose read-only overlay the init mounts and
	// uses as the root's source in place of Rootfs, which is then the
	// same tree on the host: the planner reads that.
	RootfsLayers []string
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
		s.SeccompEvents == t.SeccompEvents &&
		s.HostNetwork == t.HostNetwork && s.ProxyPort == t.ProxyPort &&
		(s.Terminal == nil) == (t.Terminal == nil) && (s.Terminal == nil || *s.Terminal == *t.Terminal) &&
		sameBytes(s.TrustedCAs, t.TrustedCAs) &&
		sameSlice(s.RootfsLayers, t.RootfsLayers)
}

func sameSlice[T comparable](a, b []T) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// Winsize is a terminal's window size, in characters.
type Winsize struct {
	Rows, Cols uint16
}

// Bind is one extra bind mount.
type Bind struct {
	Source, Target string
	Writable       bool
}

// Program is what runs in a sandbox: the part of a Config a prepared init
// is given once it is built, with the run's stdio (and the session's
// workspace mount, when its Spec has WorkspaceMount) as SCM_RIGHTS.
type Program struct {
	Path string   // the program, as the caller named it
	Args []string // argv, Args[0] included
	Env  []string // the complete environment of the program
	Dir  string   // working directory inside the sandbox

	// Hold makes the program the init of a live sandbox instead: the
	// exec shim in its hold mode (internal/execshim), which execs
	// nothing, reaps orphans and waits to be killed. Path names nothing
	// then; processes enter the sandbox later (Enter requests).
	Hold bool `json:",omitempty"`
}
