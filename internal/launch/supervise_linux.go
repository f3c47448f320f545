//go:build linux

package launch

import (
	"bytes"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/report"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// The seccomp supervisor of one run. The policy's ActNotify actions make
// the kernel stop the syscall and queue it on the filter's listener; the
// supervisor, in the process that started the run, takes each one, answers
// it with the errno the policy gives, and counts it. It decides nothing by
// itself: the answer comes from running the installed filter over the
// syscall's number and arguments, which the kernel copied when it stopped
// the call (never from the program's memory, which could change under us),
// and it is always a refusal. With SeccompKill the first refusal kills the
// run instead, while the syscall is still stopped.
//
// The one notification that is not a refusal is an audited exec
// (seccomp.ContinueErrno, which no policy's refusal may carry): the
// supervisor reads the path from the process's memory, checks that the
// notification is still pending (so that the pid read was the caller's),
// and lets the syscall run (SECCOMP_USER_NOTIF_FLAG_CONTINUE). What it
// read is what the memory held then: another thread of the process may
// change it before the kernel reads it to exec, so the path is a record of
// what was asked, not proof of what ran.
//
// With Spec.SeccompEvents each refusal and exec is also sent, as it
// happens, on the run's Handle.Events, up to wire.MaxEvents of each; past
// them, or while that channel is full, they are only counted.
//
// Why user notification: it is the one way to learn, per syscall, what the
// filter refused without tracing the program. SECCOMP_RET_LOG writes to the
// kernel's audit log, which an unprivileged caller cannot read and a busy
// host rate-limits; ptrace would cost every syscall, not just the refused.
type supervisor struct {
	l      *seccomp.Listener
	prog   []byte
	kill   func()            // ends the run; nil unless SeccompKill
	events chan<- wire.Event // nil without Spec.SeccompEvents

	mu        sync.Mutex
	counts    map[uint32]*report.Denial
	violation string
	execs     int  // execs of the program
	shim      bool // the first exec, the init's of the exec shim, was seen
	sent      [2]int
	unsent    int
	done      chan struct{}
}

// eventsBuffer is how many events a Handle's Events holds: they wait there
// while whoever reports them (the spawner's report, or the caller's run)
// is busy.
const eventsBuffer = 256

// supervise serves l until the run ends and stop is called; events, if
// set, hears of each refusal and exec.
func supervise(l *seccomp.Listener, prog []byte, kill func(), events chan<- wire.Event) *supervisor {
	s := &supervisor{l: l, prog: prog, kill: kill, events: events, counts: map[uint32]*report.Denial{}, done: make(chan struct{})}
	go s.serve()
	return s
}

func (s *supervisor) serve() {
	defer close(s.done)
	var ev *seccomp.Evaluator
	for {
		n, err := s.l.Receive()
		if err != nil {
			return
		}
		errno := syscall.EPERM
		if ev == nil {
			ev, _ = seccomp.NewEvaluator(s.prog)
		}
		if ev != nil {
			if a, err := ev.Decide(n.Data); err == nil && a&^0xffff == seccomp.UserNotif && a&0xffff != 0 {
				errno = syscall.Errno(a & 0xffff)
			}
		}
		if errno == seccomp.ContinueErrno {
			s.exec(n)
			continue
		}
		// Its pid inside, read while the syscall waits: once answered,
		// the process may exit before anything looks.
		pid := 0
		if s.wants(0) {
			pid = innerPid(int(n.Pid))
		}
		if s.kill != nil {
			s.count(n, errno, pid, true)
			s.kill() // the stopped syscall dies with its process
			continue
		}
		// A refusal that was not delivered (ENOENT) is a syscall that a
		// signal interrupted before we took it; the kernel restarts it as
		// a new notification, which is counted then. Once taken, only a
		// fatal signal interrupts it (WAIT_KILLABLE_RECV, see Install), so
		// an accepted refusal is a delivered one. Before Linux 5.19 a
		// signal in that window can still make one call count twice.
		if s.l.Refuse(n.ID, errno) == nil {
			s.count(n, errno, pid, false)
		}
	}
}

// exec records an audited exec and lets it run.
func (s *supervisor) exec(n seccomp.Notification) {
	s.mu.Lock()
	first := !s.shim
	s.shim = true
	s.mu.Unlock()
	if first {
		// The init's (or entrant's) exec of the exec shim, ours.
		s.l.Continue(n.ID)
		return
	}
	e := wire.Event{Exec: true, Syscall: seccomp.Name(n.Data.Nr), Time: time.Now().UnixNano()}
	ptr := n.Data.Args[0]
	if e.Syscall == "execveat" {
		ptr, e.Dirfd = n.Data.Args[1], int(int32(n.Data.Args[0]))
	}
	e.Path = readString(int(n.Pid), ptr, wire.MaxEventPath)
	// A shell searching PATH tries each directory in turn: only the
	// attempt that finds a file runs a program.
	found := execFound(int(n.Pid), e.Dirfd, e.Syscall == "execveat", e.Path)
	if found && s.wants(1) {
		e.Pid = innerPid(int(n.Pid))
	}
	// Read while the syscall waited: the pid and memory were its
	// caller's only if it still does.
	valid := s.l.Valid(n.ID)
	if s.l.Continue(n.ID) != nil || !valid || !found {
		return
	}
	s.mu.Lock()
	s.execs++
	s.mu.Unlock()
	s.send(1, e)
}

// execFound says whether path names a regular file as process pid would
// resolve it for its exec: from its root, its working directory, or, for
// an execveat, its descriptor dirfd. Only a filter of attempts that
// cannot run: the process may change what its path names once looked at.
// Where the kernel cannot say (no openat2, before Linux 5.6), it says yes.
func execFound(pid, dirfd int, at bool, path string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC}
	var base string
	switch {
	case path == "":
		return at // execveat of dirfd itself (AT_EMPTY_PATH)
	case path[0] == '/':
		base, how.Resolve = proc+"/root", unix.RESOLVE_IN_ROOT
	case !at || dirfd == unix.AT_FDCWD:
		base = proc + "/cwd"
	default:
		base = proc + "/fd/" + strconv.Itoa(dirfd)
	}
	dir, err := unix.Open(base, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, path, &how)
	if err == unix.ENOSYS {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// wants says whether an event of kind (0 refusal, 1 exec) would be sent.
func (s *supervisor) wants(kind int) bool {
	if s.events == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[kind] < wire.MaxEvents
}

// send sends e, an event of kind, or counts it as unsent.
func (s *supervisor) send(kind int, e wire.Event) {
	if s.events == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent[kind] < wire.MaxEvents && e.Time != 0 {
		select {
		case s.events <- e:
			s.sent[kind]++
			return
		default:
		}
	}
	s.unsent++
}

// count adds one refusal of n; with violation, the first one ends the run.
func (s *supervisor) count(n seccomp.Notification, errno syscall.Errno, pid int, violation bool) {
	nr := n.Data.Nr
	var e wire.Event
	if s.wants(0) {
		e = wire.Event{Errno: int(errno), Pid: pid, Time: time.Now().UnixNano()}
	}
	s.mu.Lock()
	d := s.counts[nr]
	if d == nil {
		d = &report.Denial{Syscall: seccomp.Name(nr), Errno: errno}
		s.counts[nr] = d
	}
	d.Count++
	if violation && s.violation == "" {
		s.violation = d.Syscall
	}
	e.Syscall = d.Syscall
	s.mu.Unlock()
	s.send(0, e)
}

// stop ends the supervisor once the run's processes are gone, and fills
// exit with what it saw; every event it sent is on the channel by then.
func (s *supervisor) stop(exit *wire.Exit) {
	s.l.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.counts {
		exit.Denials = append(exit.Denials, *d)
	}
	sort.Slice(exit.Denials, func(i, j int) bool { return exit.Denials[i].Syscall < exit.Denials[j].Syscall })
	exit.Violation = s.violation
	exit.Execs, exit.EventsUnsent = s.execs, s.unsent
}

// readString reads a NUL-terminated string of at most max bytes at addr
// in the memory of process pid; what it could not read is left out.
func readString(pid int, addr uint64, max int) string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, max+1)
	n := 0
	// Page by page: a read that crosses into an unmapped page fails
	// whole.
	for n < len(buf) {
		chunk := min(len(buf)-n, int(unix.Getpagesize()-int((addr+uint64(n))%uint64(unix.Getpagesize()))))
		m, err := f.ReadAt(buf[n:n+chunk], int64(addr)+int64(n))
		n += m
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return string(buf[:i])
		}
		if err != nil || m == 0 {
			break
		}
	}
	return string(buf[:min(n, max)])
}
