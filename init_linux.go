//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// The in-sandbox init: pid 1 of the new namespaces, running as the sandbox
// user with initCaps (inside its user namespace only). It builds the
// filesystem, pivots into it, sets the hostname, brings loopback up, resets
// the inherited process state, drops every capability, sets no_new_privs and
// execs the program in its own place.
//
// This Go init is the caller's binary re-exec'd. Most runs do not need it:
// the spawner compiles the same steps into a plan that the cloned child
// runs with raw system calls (planned_linux.go). It remains for what a plan
// cannot decide ahead, and for pooled and InProcess runs.
//
// The init does not stay as pid 1 to fork the program: the program becomes
// pid 1. Measured on the CI machine, keeping a Go init as reaper brought no
// gain in start latency (research/perf-anchors.md, "full-init") and would
// leave a privileged-looking Go process beside untrusted code. With the
// program as pid 1, its exit makes the kernel kill everything else in the
// namespace at once, and the host binary is gone from the sandbox the moment
// the program starts. The cost: signals the program sends itself without a
// handler are ignored, as for any pid 1, and orphans are reaped only when it
// exits.

// initError is a failed step of the init, sent to the parent as a
// wire.SetupError.
type initError struct {
	Stage, Op, Path string
	Err             error
}

func (e *initError) Error() string {
	return e.Stage + ": " + e.Op + " " + e.Path + ": " + e.Err.Error()
}

// initConnFd is the init's end of its socket pair with the parent.
const initConnFd = 3

// initMain never returns.
func initMain() {
	conn := os.NewFile(initConnFd, "init-conn")
	var cfg wire.Config
	data, _, err := readFrame(conn, false)
	if err == nil {
		err = json.Unmarshal(data, &cfg)
	}
	if err != nil {
		initFail(conn, &initError{Stage: "config", Op: "read", Err: err})
	}
	// First, so that nothing the launcher sent is left unread when a step
	// fails: the init's close would then reset the socket, and the
	// launcher would read that instead of the error.
	if !cfg.Prepare {
		if err := awaitGo(conn); err != nil {
			initFail(conn, err)
		}
	}
	err = prepareSandbox(&cfg)
	if err == nil && cfg.Prepare {
		err = awaitProgram(conn, &cfg)
	}
	var prog string
	if err == nil {
		prog, err = finishSandbox(&cfg)
	}
	if err == nil {
		err = loadFilter(&cfg)
	}
	if err != nil {
		initFail(conn, err)
	}
	err = unix.Exec(prog, cfg.Args, cfg.Env)
	initFail(conn, &initError{Stage: "exec", Op: "execve", Path: prog, Err: err})
}

// awaitGo waits for the launcher's wire.GoMark, which it sends once it has
// seen this init started: the config may have been waiting in the socket
// before the clone, so it says nothing of whether the launcher outlived
// the arming of the parent-death signal. EOF says it did not.
func awaitGo(conn *os.File) error {
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return &initError{Stage: "start", Op: "wait for the launcher", Err: err}
	}
	if b[0] != wire.GoMark {
		return &initError{Stage: "start", Op: "wait for the launcher", Err: fmt.Errorf("got %q, want the go mark", b[0])}
	}
	return nil
}

// initFail reports err to the parent and exits.
func initFail(conn *os.File, err error) {
	se := &wire.SetupError{Stage: "init", Text: err.Error()}
	var ie *initError
	if errors.As(err, &ie) {
		se = &wire.SetupError{Stage: ie.Stage, Op: ie.Op, Path: ie.Path, Errno: errnoOf(ie.Err), Text: ie.Err.Error()}
	}
	msg, _ := json.Marshal(se)
	conn.Write(msg)
	os.Exit(125)
}

// prepareSandbox builds the sandbox up to what depends on the program:
// a prepared init (cfg.Prepare) stops here until it is given one.
func prepareSandbox(cfg *wire.Config) error {
	// Before dumpable is cleared: afterwards /proc/self belongs to root.
	if cfg.ResetOOMScore {
		if err := resetOOMScore(); err != nil {
			return err
		}
	}
	// Non-dumpable: nothing may ptrace the init or open its /proc files.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return &initError{Stage: "process", Op: "prctl PR_SET_DUMPABLE", Err: err}
	}
	if err := buildRoot(cfg); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return &initError{Stage: "hostname", Op: "sethostname", Path: cfg.Hostname, Err: err}
	}
	if !cfg.HostNetwork {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if cfg.ProxyPort != 0 {
		if err := handOverProxyListener(cfg.ProxyPort); err != nil {
			return err
		}
	}
	return setRlimits(cfg)
}

// finishSandbox does the steps that depend on the program and returns
// its path inside the sandbox.
func finishSandbox(cfg *wire.Config) (string, error) {
	if err := enterDir(cfg.Dir); err != nil {
		return "", err
	}
	prog, err := lookPath(cfg.Path, cfg.Env)
	if err != nil {
		return "", err
	}
	if cfg.Terminal != nil {
		if err := makeTerminal(cfg.Terminal); err != nil {
			return "", err
		}
	}
	if err := dropPrivileges(); err != nil {
		return "", err
	}
	// Only 0-2 may reach the program; the parent socket closes on exec,
	// which tells the parent the program runs.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return "", &initError{Stage: "process", Op: "close_range", Err: err}
	}
	return prog, nil
}

// loadFilter installs the run's seccomp filter on every thread, last of
// all, so that nothing of the setup runs under it, and hands its
// notification fd (when the policy reports) to the parent ahead of any
// setup error. Policies are checked in New to allow what follows here:
// sendmsg, close and execve.
func loadFilter(cfg *wire.Config) error {
	if cfg.Seccomp == nil || !cfg.SeccompListen {
		// No listener to mark the end of setup: the exec mark does.
		if _, err := unix.SendmsgN(initConnFd, []byte{execMark}, nil, nil, unix.MSG_NOSIGNAL); err != nil {
			return &initError{Stage: "start", Op: "send exec mark", Err: err}
		}
	}
	if cfg.Seccomp == nil {
		return nil
	}
	lfd, err := seccomp.Install(cfg.Seccomp, cfg.SeccompListen)
	if err != nil {
		return &initError{Stage: "seccomp", Op: "load filter", Err: err}
	}
	if lfd < 0 {
		return nil
	}
	err = unix.Sendmsg(initConnFd, []byte{listenerMark}, unix.UnixRights(lfd), nil, 0)
	unix.Close(lfd)
	if err != nil {
		return &initError{Stage: "seccomp", Op: "send listener", Err: err}
	}
	return nil
}

// ptmxPath is the sandbox's own devpts instance's multiplexer: a pty made
// there has nothing to do with the host's ptys.
const ptmxPath = "/dev/pts/ptmx"

// makeTerminal makes a pty in the sandbox's devpts, sized ws, makes its
// peer the controlling terminal of this session (the init is its leader,
// without one) and the program's 0, 1 and 2, and sends the master to the
// launcher (wire.TerminalMark).
func makeTerminal(ws *wire.Winsize) error {
	fail := func(op string, err error) error {
		return &initError{Stage: "terminal", Op: op, Path: ptmxPath, Err: err}
	}
	m, err := unix.Open(ptmxPath, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open", err)
	}
	defer unix.Close(m)
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fail("ioctl TIOCSPTLCK", err)
	}
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols}); err != nil {
		return fail("ioctl TIOCSWINSZ", err)
	}
	p, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fail("ioctl TIOCGPTPEER", errno)
	}
	defer unix.Close(int(p))
	if err := unix.IoctlSetInt(int(p), unix.TIOCSCTTY, 0); err != nil {
		return fail("ioctl TIOCSCTTY", err)
	}
	for fd := range 3 {
		if err := unix.Dup3(int(p), fd, 0); err != nil {
			return fail("dup3", err)
		}
	}
	if err := unix.Sendmsg(initConnFd, []byte{wire.TerminalMark}, unix.UnixRights(m), nil, 0); err != nil {
		return fail("send master", err)
	}
	return nil
}

// listenerMark is the byte that carries the listener fd to the parent,
// ahead of anything else the init sends.
const listenerMark = 'L'

// execMark is the byte an init without a listener to send sends instead,
// before its filter and execve: an init that ends without either mark died
// during setup.
const execMark = 'X'

// resetOOMScore undoes a negative oom_score_adj inherited from a supervisor
// (-1000 would make the sandbox unkillable by the OOM killer).
func resetOOMScore() error {
	const p = "/proc/self/oom_score_adj"
	b, err := os.ReadFile(p)
	if err != nil {
		return &initError{Stage: "process", Op: "read", Path: p, Err: err}
	}
	if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v >= 0 {
		return nil
	}
	if err := os.WriteFile(p, []byte("0"), 0); err != nil {
		return &initError{Stage: "process", Op: "write", Path: p, Err: err}
	}
	return nil
}

// loopbackUp sets IFF_UP on lo, the only interface of the new network
// namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &initError{Stage: "network", Op: "socket", Err: err}
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	}
	if err == nil {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	if err != nil {
		return &initError{Stage: "network", Op: "bring lo up", Err: err}
	}
	return nil
}

// rlimit is one resource limit the init sets.
type rlimit struct {
	name     string
	resource int
	value    uint64
}

// rlimitsOf lists the limits to set: no core files, then what cfg limits,
// RLIMIT_NOFILE last.
func rlimitsOf(cfg *wire.Config) []rlimit {
	l := []rlimit{{"RLIMIT_CORE", unix.RLIMIT_CORE, 0}}
	for _, r := range []rlimit{
		{"RLIMIT_FSIZE (Options.MaxFileSize)", unix.RLIMIT_FSIZE, uint64(cfg.MaxFileSize)},
		{"RLIMIT_DATA (Options.Memory, best effort)", unix.RLIMIT_DATA, cfg.RlimitData},
		{"RLIMIT_NPROC (Options.Pids, best effort)", unix.RLIMIT_NPROC, cfg.RlimitNproc},
	} {
		if r.value != 0 { // 0: not limited
			l = append(l, r)
		}
	}
	return append(l, rlimit{"RLIMIT_NOFILE (Options.MaxOpenFiles)", unix.RLIMIT_NOFILE, cfg.NoFile})
}

// ignoredSignals start ignored in the program, and an ignored signal stays
// ignored across execve. SIGXFSZ: a write past RLIMIT_FSIZE then fails
// with EFBIG, which a program reports, instead of killing it without a
// word.
var ignoredSignals = []unix.Signal{unix.SIGXFSZ}

func setRlimits(cfg *wire.Config) error {
	for _, sig := range ignoredSignals {
		signal.Ignore(sig)
	}
	for _, l := range rlimitsOf(cfg) {
		var err error
		if l.resource == unix.RLIMIT_NOFILE {
			// syscall.Setrlimit, not unix's: it also stops the Go
			// runtime from restoring its saved soft limit on exec.
			err = syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: l.value, Max: l.value})
		} else {
			err = unix.Setrlimit(l.resource, &unix.Rlimit{Cur: l.value, Max: l.value})
		}
		if err != nil {
			return &initError{Stage: "rlimit", Op: l.name, Path: strconv.FormatUint(l.value, 10), Err: err}
		}
	}
	return nil
}

// enterDir changes to the working directory and checks that it lies inside
// the new root (a path outside it reads back as "(unreachable)/...").
func enterDir(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return &initError{Stage: "chdir", Op: "chdir (Cmd.Dir)", Path: dir, Err: err}
	}
	wd, err := unix.Getwd()
	if err != nil || !path.IsAbs(wd) {
		return &initError{Stage: "chdir", Op: "check Cmd.Dir inside the root", Path: dir, Err: unix.EXDEV}
	}
	return nil
}

// lookPath finds the program inside the sandbox: a name with a slash as is,
// otherwise the first executable regular file of that name in PATH. ENOENT
// means not found, EACCES found but not executable.
func lookPath(name string, env []string) (string, error) {
	candidates := programCandidates(name, env)
	errno := unix.ENOENT
	for _, c := range candidates {
		var st unix.Stat_t
		if unix.Stat(c, &st) != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || unix.Access(c, unix.X_OK) != nil {
			errno = unix.EACCES
			continue
		}
		return c, nil
	}
	return "", &initError{Stage: "exec", Op: "look up program", Path: name, Err: errno}
}

// programCandidates are the paths where name may be found: name itself
// if it has a slash, else name in each directory of env's PATH.
func programCandidates(name string, env []string) []string {
	if strings.Contains(name, "/") {
		return []string{name}
	}
	var candidates []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range strings.Split(v, ":") {
				if dir == "" {
					dir = "."
				}
				candidates = append(candidates, path.Join(dir, name))
			}
		}
	}
	return candidates
}

// dropPrivileges empties every capability set of this thread (the one
// that execs), sets no_new_privs, and re-arms the parent-death signal.
func dropPrivileges() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return &initError{Stage: "capabilities", Op: "drop bounding set", Path: strconv.Itoa(c), Err: err}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return &initError{Stage: "capabilities", Op: "clear ambient set", Err: err}
	}
	var data [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return &initError{Stage: "capabilities", Op: "capset", Err: err}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return &initError{Stage: "capabilities", Op: "prctl PR_SET_NO_NEW_PRIVS", Err: err}
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return &initError{Stage: "process", Op: "prctl PR_SET_PDEATHSIG", Err: err}
	}
	return nil
}

func lastCap() (int, error) {
	const p = "/proc/sys/kernel/cap_last_cap"
	b, err := os.ReadFile(p)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n, nil
		}
	}
	return 0, &initError{Stage: "capabilities", Op: "read", Path: p, Err: err}
}
