//go:build linux

package launch

import (
	"os"
	"syscall"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// readVerdict waits for the init: EOF alone means the program runs. The
// master of the run's pty, then a filter's listener, come first, each as
// one marked byte carrying the fd. A failure is a failure record of the
// step of plan that failed, after the mark that ends the setup (the
// listener's, or wire.ExecMark). An init that
// dies during setup without a word (the OOM killer at a tiny memory limit,
// a write of its report failing for want of memory) shows as a reset
// connection, or as EOF before a mark: that is a SetupError with Op
// wire.OpInitDied, which the caller explains with the init's exit.
//
// served, if set, is given the listener as soon as it arrives, to serve
// it: the init's exec of the exec shim, which comes before EOF, waits for
// an answer when the filter notifies execs (Spec.SeccompEvents).
func readVerdict(conn *os.File, plan *forkplan.Plan, served func(*seccomp.Listener)) (*seccomp.Listener, *os.File, *wire.SetupError) {
	var (
		marked   bool // the init sent the mark that ends its setup
		reply    []byte
		listener *seccomp.Listener
		term     *os.File
		buf      = make([]byte, 4096)
		oob      = make([]byte, unix.CmsgSpace(4))
	)
	fail := func(se *wire.SetupError) (*seccomp.Listener, *os.File, *wire.SetupError) {
		if listener != nil {
			listener.Close()
		}
		if term != nil {
			term.Close()
		}
		return nil, nil, se
	}
	for {
		n, oobn, _, _, err := unix.Recvmsg(int(conn.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECONNRESET && len(reply) == 0 {
			return fail(&wire.SetupError{Stage: "start", Op: wire.OpInitDied, Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
		if err != nil {
			return fail(&wire.SetupError{Stage: "start", Op: "read init status", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
		data := buf[:n]
		for _, f := range sysutil.ReceivedFiles(oob[:oobn]) {
			if term == nil && listener == nil && len(reply) == 0 && len(data) > 0 && data[0] == wire.TerminalMark {
				data, term = data[1:], f
				continue
			}
			if listener != nil || len(reply) > 0 || len(data) == 0 || data[0] != wire.ListenerMark {
				f.Close()
				continue
			}
			data, marked = data[1:], true
			// A copy, so the listener's file is made non-blocking
			// and lands in the runtime's poller.
			fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			f.Close()
			if err == nil {
				listener, err = seccomp.NewListener(fd)
			}
			if err != nil {
				return fail(&wire.SetupError{Stage: "seccomp", Op: "take listener", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
			}
			if served != nil {
				served(listener)
			}
		}
		if n == 0 {
			break
		}
		if !marked && len(data) > 0 && data[0] == wire.ExecMark {
			data, marked = data[1:], true
		}
		reply = append(reply, data...)
	}
	if !marked && len(reply) == 0 {
		return fail(&wire.SetupError{Stage: "start", Op: wire.OpInitDied, Text: "the init ended before its setup was done"})
	}
	if len(reply) == 0 {
		return listener, term, nil
	}
	f, err := plan.ParseFailure(reply)
	if err != nil {
		return fail(&wire.SetupError{Stage: "start", Op: "read init status", Text: err.Error()})
	}
	return fail(&wire.SetupError{Stage: f.Where.Stage, Op: f.Where.Op, Path: f.Where.Path, Errno: int(f.Errno)})
}

func exitOf(ps *os.ProcessState) wire.Exit {
	var e wire.Exit
	if ps == nil {
		return e
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		e.Status = uint32(ws)
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		e.UserNS = ru.Utime.Nano()
		e.SysNS = ru.Stime.Nano()
		e.MaxRSSKiB = ru.Maxrss
	}
	return e
}
