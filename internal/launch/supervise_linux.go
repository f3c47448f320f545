//go:build linux

package launch

import (
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/wire"
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
// Why user notification: it is the one way to learn, per syscall, what the
// filter refused without tracing the program. SECCOMP_RET_LOG writes to the
// kernel's audit log, which an unprivileged caller cannot read and a busy
// host rate-limits; ptrace would cost every syscall, not just the refused.
type supervisor struct {
	l    *seccomp.Listener
	prog []byte
	kill func() // ends the run; nil unless SeccompKill
	// listed: each refusal is also listed one by one (Spec.SeccompEvents)
	listed bool

	mu            sync.Mutex
	counts        map[uint32]*wire.Denial
	events        []wire.DenialEvent
	eventsDropped int
	violation     string
	done          chan struct{}
}

// supervise serves l until the run ends and stop is called; with listed,
// it lists every refusal as well as counting it.
func supervise(l *seccomp.Listener, prog []byte, kill func(), listed bool) *supervisor {
	s := &supervisor{l: l, prog: prog, kill: kill, listed: listed, counts: map[uint32]*wire.Denial{}, done: make(chan struct{})}
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
		if s.kill != nil {
			s.count(n, errno, true)
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
			s.count(n, errno, false)
		}
	}
}

// count adds one refusal of n; with violation, the first one ends the run.
func (s *supervisor) count(n seccomp.Notification, errno syscall.Errno, violation bool) {
	nr := n.Data.Nr
	var ev wire.DenialEvent
	if s.listed && len(s.events) < wire.MaxDenialEvents {
		// Read outside the lock; the list is the serving goroutine's
		// alone until stop.
		ev = wire.DenialEvent{int64(nr), int64(errno), int64(innerPid(int(n.Pid))), time.Now().UnixNano()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.counts[nr]
	if d == nil {
		d = &wire.Denial{Syscall: seccomp.Name(nr), Errno: int(errno)}
		s.counts[nr] = d
	}
	d.Count++
	switch {
	case !s.listed:
	case ev[3] != 0:
		s.events = append(s.events, ev)
	default:
		s.eventsDropped++
	}
	if violation && s.violation == "" {
		s.violation = d.Syscall
	}
}

// stop ends the supervisor once the run's processes are gone, and fills
// exit with what it saw.
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
	exit.DenialEvents, exit.DenialEventsDropped = s.events, s.eventsDropped
}
