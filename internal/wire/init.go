package wire

// The launcher and an init talk over two socket pairs the init finds at
// fixed fds (internal/recipe places them): conn, a stream whose child end
// is close-on-exec, so that the program's execve closes it, and sync, a
// SOCK_SEQPACKET pair.
//
//	launcher                             init (pid 1 of the new namespaces)
//	plan + clone (forkplan)           →  places its fds, arms its parent-death signal
//	                                  ←  sync: one byte, "I run"
//	id maps (+ cgroup.procs on v1)
//	sync: one byte, "go on"           →  (EOF instead: exit) becomes the sandbox user,
//	                                     builds the sandbox
//	                                  ←  a prepared init (Config.Prepare): conn: PreparedMark,
//	                                     then it waits on sync
//	sync: the Program, laid out for   →  receives it into its block, takes the stdio
//	  its block (recipe.ProgramBlock)    (and the workspace mount), goes on as a cold init
//	  + SCM_RIGHTS(stdio[, workspace])   (EOF instead: it fails and exits)
//	                                  ←  with a terminal (Spec.Terminal): conn: TerminalMark
//	                                     + SCM_RIGHTS(the pty's master)
//	                                  ←  setup done: conn: ListenerMark + SCM_RIGHTS(the
//	                                     filter's listener), or without one ExecMark,
//	                                     just before the filter
//	                                  ←  on failure: conn: a forkplan failure record, exit 125
//	                                  ←  on success: nothing more; the program's execve
//	                                     closes conn (EOF)
//	                                     (EOF or a reset before a mark: the init died
//	                                     during setup, OpInitDied)
//	wait4 → Exit
//
// The launcher turns a failure record into a SetupError, which the caller
// turns into the sandbox package's errors.
//
// A process entering a live sandbox (an Enter request; recipe.CompileEntry)
// finds the same two sockets, and the live sandbox's init's pidfd:
//
//	launcher                             forker (no pid in the sandbox)    entrant (its fork)
//	plan + clone (forkplan)           →  joins the cgroup, then every
//	                                     namespace of the init (setns
//	                                     of the pidfd), forks (CLONE_PARENT) → non-dumpable
//	wait4 ←                              exits 0
//	                                  ←  sync: one byte, with its pid as SCM_CREDENTIALS (SO_PASSCRED)
//	(v2 without clone into cgroup:
//	 cgroup.procs)
//	sync: one byte, "go on"           →                                       becomes the sandbox user,
//	                                                                          the program's process
//	                                  ←  conn: TerminalMark, ListenerMark or ExecMark, as an init's
//	                                  ←  EOF at the program's execve, or a failure record
//	wait4 → Exit (the entrant's own figures)
//
// A dialer (a Dial request; recipe.CompileDial) finds conn and the pidfd:
//
//	launcher                             dialer (no pid in the sandbox)
//	plan + clone                      →  joins the network namespace (and for a
//	                                     Unix socket the mount namespace), connects
//	                                  ←  conn: DialMark + SCM_RIGHTS(the socket), or a failure record
//	wait4                             ←  exits
//
// A probe (sandbox.Probe, and the overlay probe of an image's layers;
// recipe.CompileProbe, launch.Probe) finds conn and sync, both packet
// pairs, and runs in the caller's process, which is its launcher:
//
//	launcher                             probe (in the new namespaces it tests)
//	plan + clone (forkplan)           →  places its fds, arms its parent-death signal
//	                                  ←  sync: one byte, "I run"
//	id maps
//	sync: one byte, "go on"           →  becomes the sandbox user, as an init does;
//	                                     with layers: mounts their overlay as an
//	                                     init does, reads its top directory
//	                                  ←  on failure: conn: a failure record, exit 125
//	wait4                             ←  exits 0

// TerminalMark is the byte that carries the master of a run's pty from its
// init to the launcher, as SCM_RIGHTS, after the sandbox is built and
// before the program's filter is loaded. The launcher passes it on to the
// caller with the Started reply (Reply.Terminal). The sequence, for a run
// with Spec.Terminal:
//
//	caller            spawner (launcher)               init
//	Request{Start,   →  launch                      →  builds the sandbox, pivots,
//	  Spec, Program}                                   opens /dev/pts/ptmx, unlocks it,
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

// SetupError is a failure inside the init, carried with its errno so the
// caller can rebuild an error that errors.Is matches to syscall.Errno values.
type SetupError struct {
	Stage string // which step: "mount", "pivot_root", "exec", ...
	Op    string // the system call or operation
	Path  string // the path involved, if any
	Errno int    // 0 when the error was not a system call's
	Text  string // the message when Errno is 0
}

// PreparedMark is the byte a prepared init sends when its sandbox is built.
// A setup error, JSON, never starts with it.
const PreparedMark = 'P'

// ListenerMark is the byte that carries the filter's listener from an
// init to its launcher, as SCM_RIGHTS, ahead of anything else the init
// sends but a TerminalMark.
const ListenerMark = 'L'

// ExecMark is the byte an init without a listener to send sends instead,
// before its filter and execve: an init that ends without either mark died
// during setup.
const ExecMark = 'X'

// DialMark is the byte that carries a dialer's connected socket to its
// launcher, as SCM_RIGHTS (a Dial request): the dialer is a copy of the
// launcher that joins a live sandbox's network namespace, connects, sends
// the socket with this mark on its report socket, and exits; a failure is
// a failure record there instead (recipe.CompileDial).
const DialMark = 'D'

// The SetupError Ops the caller tells apart from the rest.
const (
	// OpInitDied marks the SetupError of an init that died during setup
	// before it could report: Run tells why from its exit.
	OpInitDied = "init died during setup"
	// OpNoCgroup marks the SetupError of a host without a writable
	// cgroup, so the caller can tell it from other cgroup failures.
	OpNoCgroup = "no writable cgroup"
)
