package sandbox

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/wire"
)

// Defaults for the zero values of Options.
const (
	DefaultOutputLimit   = 1 << 20  // bytes kept per captured stream
	DefaultTmpSize       = 64 << 20 // bytes of /tmp
	DefaultWorkspaceSize = 64 << 20 // bytes of the tmpfs /workspace
	DefaultMaxOpenFiles  = 1024
	DefaultMemory        = 512 << 20        // bytes of memory per run, swap off
	DefaultCPUs          = 1.0              // CPUs' worth of CPU time per run
	DefaultPids          = 256              // processes and threads per run
	DefaultIdleTimeout   = 10 * time.Minute // of a live sandbox (Options.Live)
	// MinMemory is the smallest Options.Memory New accepts. Below it
	// the sandbox's own init may be killed, or fail to report, while it
	// builds the sandbox, before any program runs. Measured on cgroup v1,
	// the init needs about 300 KB. 16 MiB leaves a wide margin, and is
	// still far below what an interpreter such as python3 needs to start.
	MinMemory = 16 << 20
	// DefaultMaxFileSize is the largest file a run may write where no
	// tmpfs size bounds it: in a host Workspace or a writable Bind, which
	// lie on the host's disk. 4 GiB lets a program write what builds,
	// downloads and datasets commonly need, while one runaway file cannot
	// fill a host disk of ordinary size. It bounds each file, not their
	// sum: a filesystem quota on the host directory bounds the total.
	DefaultMaxFileSize = 4 << 30
	// cpuPeriod is the cgroup CPU period CPUs is applied over, in µs.
	cpuPeriod       = 100000
	DefaultHostname = "sandbox"
	// DefaultDir is the working directory of a Cmd whose Dir is empty.
	DefaultDir = wire.DefaultDir
	// SandboxUID and SandboxGID are the ids the program runs as inside the
	// sandbox; /etc/passwd names them "sandbox".
	SandboxUID = wire.SandboxUID
	SandboxGID = wire.SandboxGID
	// nobodyID is the host id a root caller's sandbox maps to by default.
	nobodyID = 65534
)

// Options configure a Sandbox. The zero value is a safe default: no network,
// host /usr, /bin, /sbin, /lib* read-only, a generated /etc, tmpfs /tmp and
// /workspace, and nothing else of the host. New checks every field; a field it
// cannot honour is an error that names it, never a silent no-op.
type Options struct {
	// Rootfs, if set, is a host directory (an extracted image, a debootstrap
	// tree) whose top-level entries replace the host's /usr, /bin, /lib*
	// binds. It is bound read-only; /proc, /dev, /tmp, /workspace and /etc
	// are provided by the sandbox as usual.
	Rootfs string
	// Image, if set, is a container image whose filesystem is the root,
	// as Rootfs is (see Image); its config supplies the default
	// environment and working directory. It is pulled at the first Run
	// and kept in use (safe from a prune of the store) until Close. Not
	// with Rootfs.
	Image *Image
	// pulled is Image once the Sandbox pulled it (resolveImage).
	pulled *image.Image

	// Workspace, if set, is a host directory bound read-write at
	// /workspace, shared by every Run and kept after Close. It must exist
	// (it is used as it is, never made) and be writable by the sandbox's
	// host uid (see HostUID and HostIDs): New refuses it otherwise, as it
	// refuses a writable Bind that uid cannot write. Empty means the
	// session's own tmpfs of WorkspaceSize bytes (see Sandbox).
	Workspace string
	// WorkspaceSize caps the session's tmpfs /workspace, in bytes, across
	// Runs: what its files hold, together with, where the workspace is
	// layered (see Sessions in the package documentation), the snapshot
	// layers it stands on. Zero means DefaultWorkspaceSize. The number of
	// files and directories is capped too, at one per 4 KiB of the size
	// (at least 4096): empty files take no size but kernel memory.
	WorkspaceSize int64
	// WorkspaceFrom, if set, is a host directory whose tree the session
	// workspace starts with, copied once when the session starts; Reset
	// returns to it.
	WorkspaceFrom string
	// FreshWorkspace gives every Run an empty tmpfs /workspace of its own,
	// gone when the Run ends: no session state, for unrelated programs
	// run through one Sandbox. The file operations, Snapshot, Restore and
	// Reset are then refused.
	FreshWorkspace bool
	// TrackChanges lists in each Run's Result.Changes the workspace
	// paths the Run added, modified and deleted. The session's keeper
	// records the workspace when a Run starts and compares it when the
	// Run ends: where the workspace is layered, only the layer that
	// takes changes (what lies beneath a snapshot costs nothing), else
	// the whole tree; about 5 µs per recorded file and 0.25 ms per Run
	// here (see Sessions in the package documentation). False: no list,
	// and no cost. It needs the session workspace: with
	// Options.Workspace, Options.FreshWorkspace or Options.Live, New
	// reports an *OptionError.
	TrackChanges bool
	// TmpSize caps /tmp and /dev/shm each, in bytes, and their files as
	// WorkspaceSize does. Zero means DefaultTmpSize.
	TmpSize int64

	// Binds are extra bind mounts from the host, read-only unless Writable.
	// A target may lie in /etc (a host directory of configuration such as
	// /etc/apt), writable too, as anywhere else; it may not be /etc itself
	// nor a file the sandbox generates there (passwd, group, hosts,
	// hostname, resolv.conf, nsswitch.conf), which follow other options.
	// A Bind over a file of the trust store hides what TrustedCAs adds to it.
	Binds []Bind

	// TrustedCAs, if set, are PEM certificates (a corporate CA, a test CA)
	// that TLS clients in the sandbox trust besides the host's store: each
	// CA bundle file of the store that programs read (Debian's
	// /etc/ssl/certs/ca-certificates.crt, RHEL's ca-bundle.crt and
	// tls-ca-bundle.pem, SUSE's ca-bundle.pem, ...) shows the store's
	// certificates followed by these. New refuses input that holds no
	// certificate, anything but CERTIFICATE blocks, a malformed one, or
	// more than 1 MiB.
	// Where the store has no bundle, they become
	// /etc/ssl/certs/ca-certificates.crt. OpenSSL's hashed directory lookup
	// (-CApath, /etc/ssl/certs/<hash>.0) does not find them: the OpenSSL,
	// GnuTLS and Go clients load the bundle file too; Java's keystore
	// (certs/java/cacerts) does not list them either. Node is pointed at
	// the bundle (see Env). Each run copies the bundles it extends into
	// its root (about 220 KiB for Debian's). With Rootfs, the
	// store is the rootfs's (its /etc/ssl, /etc/pki, ...) and they are
	// added to its bundles the same way. Nil means the store as it is.
	TrustedCAs []byte

	// Env is the environment every run starts from; Cmd.Env is added to
	// it and wins on conflicts. PATH, HOME and LANG get defaults when
	// neither sets them, and so does NODE_EXTRA_CA_CERTS, the trust
	// store's bundle, where the sandbox has one (Node reads no other
	// store). Nothing of the host's environment is passed on.
	Env []string

	// OutputLimit caps each captured stream (Result.Stdout, Result.Stderr),
	// in bytes. Zero means DefaultOutputLimit. Streams given to Cmd.Stdout
	// or Cmd.Stderr are passed through uncapped.
	OutputLimit int64

	// MaxOpenFiles is the program's RLIMIT_NOFILE. Zero means
	// DefaultMaxOpenFiles.
	MaxOpenFiles uint64

	// Hostname inside the sandbox. Empty means DefaultHostname.
	Hostname string

	// HostUID and HostGID are the host ids the sandbox's user maps to.
	// Zero means: the caller's own ids when the caller is not root, and
	// 65534 (nobody) when it is, so sandboxed code never owns host root's
	// files. A caller that is not root can map only its own ids, so its
	// sandbox maps to them, gid 0 too where that is its primary group (a
	// container run with a uid and no gid): the sandbox then holds group 0
	// as the caller does, and may write what group 0 may in a writable
	// Bind or host Workspace.
	HostUID, HostGID int

	// Memory caps the run's memory (its processes' RAM, page cache and
	// kernel memory charged to its cgroup; tmpfs files count too), in
	// bytes. Swap is turned off for the run. Zero means DefaultMemory; a
	// negative value means no limit; New refuses a limit below
	// MinMemory. When the kernel OOM-kills inside the run, the Result's
	// Outcome is OutOfMemory. On cgroup v2 an OOM kill
	// ends the whole run (memory.oom.group); on v1 it kills the largest
	// process. In a live sandbox (Live) it kills one process on both, the
	// calls' processes before the sandbox's init.
	Memory int64
	// CPUs caps CPU time as a number of CPUs: 0.25 is a quarter of one
	// CPU, 2 is two whole CPUs (cgroup CPU quota over a 100 ms period).
	// Zero means DefaultCPUs; a negative value means no limit. With
	// NetworkAllow it also sets the egress proxy's CPU budget for the run
	// (see NetworkAllow).
	CPUs float64
	// Pids caps the run's processes and threads together. Zero means
	// DefaultPids; a negative value means no limit. Result.PidsLimitHit
	// says when a fork failed at the limit.
	Pids int64
	// CgroupParent is the cgroup (a path as /proc/self/cgroup shows it)
	// beneath which each run's cgroup is made. Empty means the cgroup of
	// the process that starts sandboxes (the spawner's, which is the
	// caller's). On cgroup v2, a parent holding processes cannot offer
	// controllers to its children; its processes are then moved to a
	// "sandbox-host" leaf beneath it, once, before the first run.
	CgroupParent string
	// LimitPolicy says what Run does where no writable cgroup exists (an
	// unprivileged caller without a delegated cgroup, or on a cgroup v1
	// host): the zero value, EnforceLimits, makes Run refuse with an error
	// matching ErrNotSupported; BestEffortLimits runs anyway with rlimits
	// standing in (RLIMIT_DATA for memory, RLIMIT_NPROC for pids; CPU is
	// then not limited) and Result.Limits says what was enforced and how.
	LimitPolicy LimitPolicy
	// IOReadBPS and IOWriteBPS cap, in bytes per second, what the run
	// reads from and writes to the disks under Workspace and the writable
	// Binds (cgroup v2 io.max, v1 blkio throttling; on v1 only direct IO
	// is throttled, as page-cache writeback is not charged to a v1
	// cgroup). Zero means no cap. The sandbox's own /tmp and tmpfs
	// /workspace are in memory and bounded by Memory instead. Where no
	// disk backs those paths, Result.Limits says io is not limited.
	IOReadBPS, IOWriteBPS int64

	// MaxFileSize caps the size of any one file the program writes
	// (RLIMIT_FSIZE), in bytes: it is what bounds files in a host
	// Workspace and writable Binds, while /tmp and the tmpfs /workspace
	// are bounded by their sizes first. Zero means DefaultMaxFileSize, or
	// the larger of TmpSize and WorkspaceSize where that is larger, so
	// that a tmpfs is filled before the cap applies; a negative value
	// means no limit. A write past it fails with EFBIG ("File too
	// large"), and one past a tmpfs's size with ENOSPC: the program starts
	// with SIGXFSZ ignored, so neither kills it.
	MaxFileSize int64

	// InProcess starts each sandbox directly from the calling process
	// instead of through the shared spawner process. It saves a process
	// start for small short-lived programs such as the command-line tool.
	// The sandbox is built the same way either way; on amd64 its init
	// shares the caller's memory until it execs, so a large caller costs
	// no more, while elsewhere the kernel copies the caller's page tables
	// for each start, which services should avoid. The sandbox is killed
	// when the OS thread that started it exits, as with os/exec's
	// Pdeathsig: do not call Run from a goroutine that locked its thread
	// and then returns. A caller killed outright (SIGKILL) takes its
	// sandboxes with it, but leaves their emptied run cgroups, which the
	// next process on the host to start a sandbox removes; through the
	// spawner, the spawner removes them itself.
	InProcess bool

	// Pool, if positive, keeps that many sandboxes of this Sandbox
	// prepared ahead in the spawner: namespaces made, root built and
	// pivoted into, cgroup made and limits set, waiting only for the
	// program. A Run takes one, hands it the program and its stdio, and
	// starts the program in it; each prepared sandbox serves exactly one
	// Run and is destroyed with it, as a cold one is, and a new one is
	// prepared in the background. A pooled Run is as isolated as a cold
	// one; it only starts sooner. When the pool is empty a Run starts
	// cold. The prepared sandboxes hold their cgroup's memory and pids
	// until used or until Close. Not with InProcess (the pool lives in the
	// spawner), NetworkAllow (each run's proxy is made at its start) or a
	// Bind beneath the session's /workspace (which a run is given only at
	// its start).
	Pool int

	// Live keeps one sandbox running for all of the Sandbox's calls: its
	// namespaces, root, /tmp, /workspace and processes last from the
	// first call until Close, IdleTimeout or MaxLifetime. Each Run or
	// Start enters it as a new process (see Sandbox.Start), and a
	// process still running when its call returns, started in the
	// background or with Start, keeps running. The cgroup limits
	// (Memory, CPUs, Pids) bound everything alive in it together.
	// Processes, Signal and DialContext see and reach what runs in it.
	// Its calls and their processes share one sandbox user: one an
	// earlier call left running can read a later call's environment
	// (see the package doc's Live sandboxes), so keep credentials in
	// Secrets. Should its init end, killed or with its spawner, the
	// Sandbox closes, and its later calls fail with an error matching
	// ErrClosed that says why. Off by default: every Run then gets a
	// sandbox of its own. Not with InProcess (the running sandbox is
	// held by the spawner).
	Live bool
	// IdleTimeout ends a live sandbox, and closes the Sandbox, once no
	// call has been in progress for this long (0: DefaultIdleTimeout;
	// negative: never): a Run until it returns, a Start until the process
	// runs, a Process's Wait while it waits, Processes, Signal and
	// DialContext. A process left running, in the background or by
	// Start, does not hold it off. Its calls then fail with an error
	// matching ErrExpired.
	IdleTimeout time.Duration
	// MaxLifetime ends a live sandbox, and closes the Sandbox, this long
	// after it started, whatever runs in it (0: no limit).
	MaxLifetime time.Duration

	// Seccomp is the syscall filter of every run; nil means
	// DefaultSeccompPolicy(). New compiles it once, and refuses one that
	// would stop the sandbox's init after it is loaded: the init then
	// closes its fds, execs the exec shim (execveat), which marks its
	// report fd close-on-exec (fcntl) and execs the program (execve), and
	// a policy that notifies also needs sendmsg.
	Seccomp *SeccompPolicy
	// NoSeccomp runs without any syscall filter, leaving the whole kernel
	// interface to the program ("unconfined"). Only for programs you trust.
	NoSeccomp bool
	// SeccompKill ends the run at the first syscall the policy refuses
	// with an ActNotify action (every refusal of the default policy):
	// the Result's Outcome is SeccompKilled and Violation names the
	// syscall. Without it, a refused syscall fails with its errno and the
	// run goes on; Result.Denials counts the refusals either way.
	SeccompKill bool

	// Network is what the run can reach: NetworkNone (the zero value,
	// loopback only), NetworkAllow (the hosts in Egress, through a proxy)
	// or NetworkHostUnsafe. See Network.
	Network Network
	// Egress is the allowlist of NetworkAllow, one entry a host:
	//
	//	"pypi.org"                an exact name, on ports 80 and 443
	//	"*.pythonhosted.org"      names under the suffix (not the suffix itself)
	//	"api.example.com:8443"    one port; "example.com:8000-8100" a range
	//	"10.1.2.0/24:5432"        an IP range: literal addresses in it, and,
	//	                          for names too, the opening of a refused range
	//	"[fd00::/8]:443"          an IPv6 range with a port
	//
	// Names resolving into loopback, private, link-local (169.254.169.254,
	// the metadata service), unique-local, multicast and the other special
	// ranges are refused unless a range entry lies inside that range; the
	// metadata address itself opens only with an entry for exactly it. An
	// entry allows one port or range; list a host twice for two. It is an
	// error with any other Network mode, and empty with NetworkAllow.
	Egress []string
	// EgressResolver resolves the names Egress allows; nil means
	// net.DefaultResolver. Tests point it at their own servers.
	EgressResolver Resolver

	// Secrets are values the program never holds (see Secret and
	// "Secrets" in the package documentation): its environment holds a
	// placeholder for each, and the egress proxy puts the value in the
	// headers of requests to the secret's Hosts, terminating HTTPS to
	// them with a certificate authority made for the Sandbox, which the
	// trust store includes. They need Network: NetworkAllow, and every
	// host must be allowed by Egress. Nil means none.
	Secrets []Secret

	// Logger, if set, receives the library's own events: each run's start
	// and end (at Debug), a spawner that died or was restarted, pool
	// preparations that failed and cleanup that could not be finished (at
	// Warn). Nil means no output. Nothing of a run's output is logged.
	Logger *slog.Logger

	// Audit, if set, receives every event of the Sandbox's audit trail,
	// in order, as slog records at slog.LevelInfo: each run's start and
	// end, each connection of its egress proxy, each syscall its filter
	// refused, each workspace change (with TrackChanges), each program
	// executed (with AuditExec), and a live sandbox's start and end; "Audit trail" in the package
	// documentation lists the events and their attributes. For JSON
	// lines, give it slog.NewJSONHandler(w, nil). The handler is called
	// from one goroutine of the Sandbox's own, never from a run's path:
	// a slow one costs queued events (AuditQueue), which are counted,
	// not the run's time. New refuses a handler not enabled at Info.
	// Nil means no trail.
	Audit slog.Handler
	// AuditExec adds to the audit trail each program a run executes
	// (every execve and execveat, of the program and what it starts),
	// with its path and pid: the filter hands each exec to the
	// supervisor, which records it and lets it run. The path is read
	// from the process's memory before the exec, so a hostile
	// multi-threaded program can make the record name another path than
	// what ran (see "Audit trail" in the package documentation). It costs
	// each exec a round trip to the supervisor, about 0.3 ms here, a
	// third more than a shell's fork and exec of /bin/true
	// (BenchmarkAuditExec): so it is off by default. It needs Audit, a filter (not NoSeccomp), and a policy
	// that allows execve and execveat whatever their arguments, as the
	// default does; New reports an *OptionError otherwise.
	AuditExec bool
}

// LimitPolicy says what to do when the resource limits cannot be put in
// place with a cgroup.
type LimitPolicy int

const (
	// EnforceLimits refuses to run without a cgroup for the limits.
	EnforceLimits LimitPolicy = iota
	// BestEffortLimits runs with rlimits standing in, and reports in
	// Result.Limits which limits were enforced and how.
	BestEffortLimits
)

// Bind is a host path made visible inside the sandbox.
type Bind struct {
	Source   string // absolute host path
	Target   string // absolute path inside the sandbox; empty means Source
	Writable bool   // read-only unless set
}

// Cmd is a program to run in a sandbox, shaped like os/exec.Cmd. A Cmd
// cannot be reused after its first Run or Start.
type Cmd struct {
	// Path is the program: a name looked up in the sandbox's PATH, or a
	// path inside the sandbox.
	Path string
	// Args holds the command-line arguments, including the program as
	// Args[0], as in os/exec.
	Args []string
	// Env is added to Options.Env for this run. In a live sandbox
	// (Options.Live) a process an earlier call left running can read it
	// in /proc/PID/environ once the program has exec'd: credentials
	// belong in Options.Secrets.
	Env []string
	// Dir is the working directory inside the sandbox; empty means
	// /workspace, or the WorkingDir of Options.Image's config where it
	// sets one.
	Dir string
	// Stdin is the program's standard input; nil means /dev/null.
	// Whatever it is, the program reads it from a pipe (or, with a
	// Terminal, its pty) that Run copies Stdin into: an *os.File is read
	// by Run, never handed to the program, so nothing the program does to
	// its descriptors changes the caller's. StdinPipe gives a pipe to
	// write it through instead, while the program runs.
	Stdin io.Reader
	// Stdout and Stderr, if set, receive the program's output as it is
	// written, through pipes Run copies. When nil, output is captured
	// into the Result.
	Stdout io.Writer
	Stderr io.Writer

	// Terminal, when set, runs the program on a terminal of its own: a
	// pty made in the sandbox's devpts, its controlling terminal in a
	// session of its own, as its stdin, stdout and stderr. Run copies
	// Stdin into the pty and what the program writes (on stdout and
	// stderr alike, as on any terminal) to Stdout, or into
	// Result.Stdout under Options.OutputLimit; Stderr is not used and
	// Result.Stderr stays empty. The end of Stdin is not passed on (a
	// terminal has none: send its EOF character, ^D, to end a read). Set
	// TERM in Env for programs that look at it. Resize changes the
	// window size while the program runs. A Sandbox with Options.Pool
	// starts a run with a Terminal cold.
	//
	// The program is pid 1 of its sandbox, and the kernel ignores the
	// signals it sends a namespace's init that the init does not handle:
	// the interrupt character (Ctrl-C) would not end a program that
	// leaves SIGINT to its default action, as it does on the host. When
	// Stdin sends it to such a program in the foreground, Run takes the
	// default action itself: it ends the run, with Outcome Signaled and
	// Signal SIGINT. A shell's foreground jobs, and programs that handle
	// SIGINT, get the signal as usual.
	Terminal *Terminal

	used bool
	// hold makes the Cmd a live sandbox's init (wire.Program.Hold).
	hold bool
	tty  ttyState
	// The program's end of a StdinPipe, and the caller's, closed once
	// the run is over.
	stdinPipe  *os.File
	stdinPipeW *closeOnce
}

// Command returns a Cmd that runs name with the given arguments, like
// os/exec.Command. The name is looked up inside the sandbox, not on the host.
func Command(name string, args ...string) *Cmd {
	return &Cmd{Path: name, Args: append([]string{name}, args...)}
}

// Sandbox runs commands in fresh sandboxes built from its Options. It is
// safe for concurrent use; close it when done.
//
// A Sandbox is a session: its Runs share one /workspace, and nothing else.
// Each Run still gets new namespaces, processes, /tmp and cgroup; only the
// files under /workspace carry over from one Run to the next. With
// Options.Live they share one running sandbox instead, processes and all
// (see the package doc's "Live sandboxes"). The session's
// workspace is, by default, a tmpfs of Options.WorkspaceSize bytes that the
// session holds in a small helper process of its own (started at the first
// Run or file operation) until Close. Options.Workspace makes it a host
// directory instead, and Options.FreshWorkspace gives every Run its own
// empty one, as for unrelated programs.
//
// Concurrent use: Runs and file operations may overlap; they see each
// other's changes to the workspace as they happen, as two processes sharing
// a directory would. Snapshot, Restore and Reset wait for the Runs and file
// operations in flight and hold off new ones until they are done. Close
// waits likewise, then removes everything the session made; later calls
// return an error matching ErrClosed.
type Sandbox struct {
	ws     *session
	image  *imageRoot   // with Options.Image
	live   *liveSandbox // with Options.Live
	opts   Options
	err    error           // the Options' first problem, returned by every Run
	filter *compiledFilter // nil with NoSeccomp
	egress *egress.Rules   // the parsed Options.Egress; nil unless NetworkAllow
	log    *slog.Logger    // Options.Logger, or one that discards
	audit  *auditor        // Options.Audit's trail; nil without one

	// secrets holds Options.Secrets, their placeholders and the proxy's
	// authority; nil without secrets.
	secrets *secretSet
}

// New returns a Sandbox for opts. It checks opts at once; if they are wrong,
// Err and every Run return an error that names the option.
func New(opts Options) *Sandbox {
	s := &Sandbox{opts: opts, ws: newSession(), log: opts.logger()}
	if opts.Live {
		s.live = newLiveSandbox()
	}
	if opts.Image != nil {
		// The caller's Image may change after New; the Sandbox keeps the
		// one it was given.
		im := *opts.Image
		im.Mirrors = cloneMirrors(im.Mirrors)
		s.opts.Image = &im
		s.image = newImageRoot()
	}
	s.ws.logTo(opts.Logger)
	// A Sandbox dropped without Close still ends its session.
	runtime.AddCleanup(s, func(ss *session) { ss.close() }, s.ws)
	s.err = s.opts.validate()
	if s.err == nil {
		s.egress, s.err = s.opts.checkNetwork()
	}
	if s.err == nil {
		s.secrets, s.err = s.opts.checkSecrets(s.egress)
	}
	if s.err == nil {
		s.filter, s.err = opts.seccompFilter()
	}
	if s.err == nil && opts.Live && s.filter != nil {
		s.err = s.filter.holdsLive(opts.seccompOption())
	}
	if s.err == nil {
		if s.audit, s.err = newAuditor(&s.opts, s.log); s.audit != nil {
			runtime.AddCleanup(s, (*auditor).stop, s.audit)
		}
	}
	if s.err == nil && opts.Pool > 0 {
		// Prepared ahead, so that even the first Run finds one; a
		// failure here shows in the Runs, which then start cold.
		s.ws.teardown.Add(1) // Close waits for it
		go func() {
			defer s.ws.teardown.Done()
			s.fillPool() // failures are logged by the spawner, or by fillPool
		}()
	}
	return s
}

// Err returns the problem New found in the Options, or nil.
func (s *Sandbox) Err() error { return s.err }

// Run runs cmd in a new sandbox and waits for every process of it to end.
//
// The error is nil when the program ran, however it ended: its exit
// status, a signal, the OOM killer, or ctx's deadline or cancellation
// (Outcome Timeout or Canceled, with the output written until then); the
// Result says how. The error is non-nil when the sandbox could not be built
// or a protection could not be put in place (an *UnsupportedError,
// *SetupError naming the step, or *OptionError), when the program was not
// found (ErrNotFound, with a Result whose ExitCode is 127), and when ctx
// ended before the sandbox was handed its program (then it matches
// ctx.Err()). Result.Err turns every end but exit status 0 into an error,
// for callers who want one.
//
// Run is Start then Wait.
func (s *Sandbox) Run(ctx context.Context, cmd *Cmd) (*Result, error) {
	p, err := s.start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}
