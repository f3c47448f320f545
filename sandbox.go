package sandbox

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
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
	// MinMemory is the smallest Options.Limits.Memory New accepts. Below it
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

// Options configure a Sandbox, grouped by concern: what the root is, what
// the workspace is, the limits, the network, the syscall filter, a live
// session and how sandboxes start. The zero value is a safe default: no
// network, host /usr, /bin, /sbin, /lib* read-only, a generated /etc, tmpfs
// /tmp and /workspace, and nothing else of the host. New checks every field;
// a field it cannot honour is an error that names it, never a silent no-op.
// New copies what it keeps: later changes to the Options, or to what they
// point to, do not reach the Sandbox.
type Options struct {
	// Root is the sandbox's root filesystem: a host directory (RootDir)
	// or a container image (*Image). Nil means the host's /usr, /bin,
	// /sbin and /lib* bound read-only.
	Root Root

	// Workspace is what /workspace is: the session's own tmpfs
	// (SessionWorkspace), a new one for every Run (FreshWorkspace) or a
	// host directory (HostWorkspace). Nil means SessionWorkspace{}.
	Workspace Workspace

	// Binds are extra bind mounts from the host, read-only unless Writable.
	// A target may lie in /etc (a host directory of configuration such as
	// /etc/apt), writable too, as anywhere else; it may not be /etc itself
	// nor a file the sandbox generates there (passwd, group, hosts,
	// hostname, resolv.conf, nsswitch.conf), which follow other options.
	// A Bind over a file of the trust store hides what TrustedCAs adds to it.
	Binds []Bind

	// Env is the environment every run starts from; Cmd.Env is added to
	// it and wins on conflicts. PATH, HOME and LANG get defaults when
	// neither sets them, and so does NODE_EXTRA_CA_CERTS, the trust
	// store's bundle, where the sandbox has one (Node reads no other
	// store). Nothing of the host's environment is passed on.
	Env []string

	// Hostname inside the sandbox. Empty means DefaultHostname.
	Hostname string

	// HostUID and HostGID are the host ids the sandbox's user maps to.
	// Zero means: the caller's own ids when the caller is not root, and
	// 65534 (nobody) when it is, so sandboxed code never owns host root's
	// files. A caller that is not root can map only its own ids, so its
	// sandbox maps to them, gid 0 too where that is its primary group (a
	// container run with a uid and no gid): the sandbox then holds group 0
	// as the caller does, and may write what group 0 may in a writable
	// Bind or host workspace.
	HostUID, HostGID int

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
	// its root (about 220 KiB for Debian's). With a Root, the
	// store is the root's (its /etc/ssl, /etc/pki, ...) and they are
	// added to its bundles the same way. Nil means the store as it is.
	TrustedCAs []byte

	// Limits bound each run's resources; the zero value is the defaults
	// (see Limits).
	Limits Limits

	// Network is what the run can reach: nil means loopback only (see
	// Network); *Egress the allowed hosts through a proxy;
	// HostNetworkUnsafe{} the host's network.
	Network Network

	// Seccomp is the syscall filter of every run: nil means
	// DefaultSeccompPolicy(), a *SeccompPolicy that policy, Unconfined{}
	// none (see Seccomp).
	Seccomp Seccomp

	// Live, if set, keeps one sandbox running for all of the Sandbox's
	// calls (see Live). Nil: every Run gets a sandbox of its own.
	Live *Live

	// Start is how sandboxes are started: nil means cold, each by the
	// shared spawner process; Pool prepares them ahead in it; InProcess
	// starts them from the calling process (see Start).
	Start Start

	// Logger, if set, receives the library's own events: each run's start
	// and end (at Debug), a spawner that died or was restarted, pool
	// preparations that failed and cleanup that could not be finished (at
	// Warn). Nil means no output. Nothing of a run's output is logged.
	Logger *slog.Logger

	// Audit, if set, is the Sandbox's audit trail (see Audit). Nil means
	// no trail.
	Audit *Audit
}

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
	// belong in Egress.Secrets.
	Env []string
	// Dir is the working directory inside the sandbox; empty means
	// /workspace, or the WorkingDir of Options.Root's config where it
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
	// Result.Stdout under Options.Limits.Output; Stderr is not used and
	// Result.Stderr stays empty. The end of Stdin is not passed on (a
	// terminal has none: send its EOF character, ^D, to end a read). Set
	// TERM in Env for programs that look at it. Resize changes the
	// window size while the program runs. A Sandbox with Pool
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
// workspace is, by default, a tmpfs of SessionWorkspace.Size bytes that the
// session holds in a small helper process of its own (started at the first
// Run or file operation) until Close. Options.Workspace makes it a host
// directory instead, and FreshWorkspace gives every Run its own
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
	image  *imageRoot      // with an *Image Root
	live   *liveSandbox    // with Options.Live
	cfg    resolved        // the Options, as New resolved them
	host   *rootView       // the root without an image, found in New
	err    error           // the Options' first problem, returned by every Run
	filter *compiledFilter // nil with Unconfined
	egress *egress.Rules   // the parsed Egress.Allow; nil without an *Egress
	log    *slog.Logger    // Options.Logger, or one that discards
	audit  *auditor        // Options.Audit's trail; nil without one

	// secrets holds Egress.Secrets, their placeholders and the proxy's
	// authority; nil without secrets.
	secrets *secretSet
}

// New returns a Sandbox for opts. It checks opts at once; if they are wrong,
// Err and every Run return an error that names the option.
func New(opts Options) *Sandbox {
	s := &Sandbox{cfg: resolve(opts), ws: newSession()}
	s.log = s.cfg.logger()
	if s.cfg.Live {
		s.live = newLiveSandbox()
	}
	if s.cfg.Image != nil {
		s.image = newImageRoot()
	}
	s.ws.logTo(s.cfg.Logger)
	// A Sandbox dropped without Close still ends its session.
	runtime.AddCleanup(s, func(ss *session) { ss.close() }, s.ws)
	s.err = s.cfg.validate()
	if s.err == nil {
		s.egress, s.err = s.cfg.checkNetwork()
	}
	if s.err == nil {
		s.secrets, s.err = s.cfg.checkSecrets(s.egress)
	}
	if s.err == nil {
		s.filter, s.err = s.cfg.seccompFilter()
	}
	if s.err == nil && s.cfg.Live && s.filter != nil {
		s.err = s.filter.holdsLive(s.cfg.seccompOption())
	}
	if s.err == nil {
		if s.audit, s.err = newAuditor(&s.cfg, s.log); s.audit != nil {
			runtime.AddCleanup(s, (*auditor).stop, s.audit)
		}
	}
	if s.err == nil && s.image == nil {
		s.host = newRootView(&s.cfg, s.cfg.Rootfs, nil)
	}
	if s.err == nil && s.cfg.Pool > 0 {
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

// root is what a run needs of the Sandbox's root; with an image, once
// resolveImage pulled it.
func (s *Sandbox) root() *rootView {
	if s.image == nil {
		return s.host
	}
	s.image.mu.Lock()
	defer s.image.mu.Unlock()
	return s.image.view
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
