//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The processes of a live sandbox are those in its init's PID namespace.
// The caller finds them in the host's /proc, where it may read what their
// own /proc would show (it owns their user namespace), and names them by
// their pids inside.

// hostProc is one process of the live sandbox, with its host pids.
type hostProc struct {
	pid, ppid int // on the host
	info      ProcessInfo
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ), 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// sandboxProcs lists the processes of l's sandbox: each one in /proc
// whose PID namespace is its init's. It is checked to be alive
// afterwards, so that its namespace's identity was not yet free to be
// another's.
func (l *liveSandbox) sandboxProcs() ([]hostProc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var procs []hostProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := nsOf(pid); err != nil || ns != l.pidNS {
			continue // gone, another's, or not ours to read
		}
		if p, ok := readHostProc(pid); ok {
			procs = append(procs, p)
		}
	}
	if !l.alive() {
		return nil, errors.New("the live sandbox ended")
	}
	return procs, nil
}

// readHostProc reads one process's status, times and command line.
func readHostProc(pid int) (hostProc, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		return hostProc{}, false
	}
	p := hostProc{pid: pid}
	for _, line := range strings.Split(string(status), "\n") {
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch key {
		case "NSpid":
			f := strings.Fields(val)
			if len(f) > 0 {
				p.info.Pid, _ = strconv.Atoi(f[len(f)-1])
			}
		case "PPid":
			p.ppid, _ = strconv.Atoi(val)
		case "State":
			if _, name, ok := strings.Cut(val, "("); ok {
				p.info.State = strings.TrimSuffix(name, ")")
			}
		case "VmRSS":
			kb, _ := strconv.ParseInt(strings.TrimSuffix(val, " kB"), 10, 64)
			p.info.RSS = kb << 10
		}
	}
	if stat, err := os.ReadFile(dir + "stat"); err == nil {
		// After the command's closing parenthesis: state is field 3,
		// utime and stime fields 14 and 15.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 12 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				p.info.CPU = time.Duration(ut+st) * clockTick
			}
		}
	}
	if cmdline, err := os.ReadFile(dir + "cmdline"); err == nil && len(cmdline) > 0 {
		p.info.Args = strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	}
	return p, p.info.Pid > 0
}

func (s *Sandbox) processes(ctx context.Context) ([]ProcessInfo, error) {
	l, release, err := s.live.beginCall(ctx, s)
	if err != nil {
		return nil, err
	}
	defer release()
	procs, err := l.sandboxProcs()
	if err != nil {
		return nil, l.explain(fmt.Errorf("sandbox: processes: %w", err))
	}
	inner := map[int]int{}
	for _, p := range procs {
		inner[p.pid] = p.info.Pid
	}
	out := make([]ProcessInfo, 0, len(procs))
	for _, p := range procs {
		if p.info.Pid == 1 {
			continue // the init, ours
		}
		// 0 for a parent outside, the spawner that started a call, as
		// the sandbox's own /proc says.
		p.info.PPid = inner[p.ppid]
		out = append(out, p.info)
	}
	slices.SortFunc(out, func(a, b ProcessInfo) int { return a.Pid - b.Pid })
	return out, nil
}

func (s *Sandbox) signalInside(pid int, sig os.Signal) error {
	ssig, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("sandbox: signal %v: %w", sig, optionErr("sig", sig.String(), "is not a syscall.Signal"))
	}
	if pid == 1 {
		return fmt.Errorf("sandbox: signal pid 1: %w", optionErr("pid", "1", "is the live sandbox's init, which holds it; Close ends it"))
	}
	l, release, err := s.live.beginCall(context.Background(), s)
	if err != nil {
		return err
	}
	defer release()
	procs, err := l.sandboxProcs()
	if err != nil {
		return l.explain(fmt.Errorf("sandbox: signal pid %d: %w", pid, err))
	}
	for _, p := range procs {
		if p.info.Pid != pid {
			continue
		}
		// A pidfd names this process alone; that it is still in the
		// sandbox once opened shows it is the one found.
		pidfd, err := unix.PidfdOpen(p.pid, 0)
		if err != nil {
			break
		}
		defer unix.Close(pidfd)
		if ns, err := nsOf(p.pid); err != nil || ns != l.pidNS {
			break
		}
		if err := unix.PidfdSendSignal(pidfd, ssig, nil, 0); err != nil {
			if err == unix.ESRCH {
				break
			}
			return fmt.Errorf("sandbox: signal pid %d: %w", pid, err)
		}
		return nil
	}
	return l.explain(fmt.Errorf("sandbox: signal pid %d: no such process in the live sandbox: %w", pid, os.ErrProcessDone))
}
