//go:build linux

package launch

import (
	"os"
	"strconv"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/sysutil"
	"golang.org/x/sys/unix"
)

// The program runs as pid 1 of its sandbox's PID namespace (its init execs
// it in its own place), and the kernel drops every signal sent to a
// namespace's init from outside for which it has no handler, SIGKILL and
// SIGSTOP excepted: a SIGTERM would leave a "sleep 100" running where on
// the host it ends it. The launcher takes the default action itself
// instead, as termInput does for a terminal's interrupt: a signal whose
// default action ends a process kills the run and is recorded for the
// Exit (wire.Exit.DefaultSignal), one whose default action stops a
// process is sent as SIGSTOP, and any other is sent as it is, for the
// program to handle, ignore, or, if its default is to be ignored, for the
// kernel to drop.

// signaler delivers signals to one sandbox's init.
type signaler struct {
	init *os.Process
	kill func()
	// taken is the signal whose default action the launcher took by
	// killing the run; 0 if none.
	taken atomic.Int32
}

// signal delivers sig to the init, or takes its default action. It
// returns os.ErrProcessDone once the init has been reaped.
func (s *signaler) signal(sig unix.Signal) error {
	switch sig {
	case 0:
		// No signal: whether the init is still there.
		return s.init.Signal(sig)
	case unix.SIGKILL:
		// The cgroup's kill too, as for Kill.
		if err := s.init.Signal(unix.Signal(0)); err != nil {
			return err
		}
		s.kill()
		return nil
	case unix.SIGSTOP:
		return s.init.Signal(sig)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(s.init.Pid) + "/status")
	if err != nil || !sysutil.NSInitWithDefault(string(status), int(sig)) {
		// Gone (the pidfd says so), or it handles or ignores sig.
		return s.init.Signal(sig)
	}
	switch sig {
	case unix.SIGCHLD, unix.SIGCONT, unix.SIGURG, unix.SIGWINCH:
		// Ignored by default; SIGCONT still continues a stopped
		// process, as the kernel does on the way to dropping it.
		return s.init.Signal(sig)
	case unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return s.init.Signal(unix.SIGSTOP)
	}
	if err := s.init.Signal(unix.Signal(0)); err != nil {
		return err
	}
	s.taken.CompareAndSwap(0, int32(sig))
	s.kill()
	return nil
}
