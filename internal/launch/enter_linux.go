//go:build linux

package launch

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/report"
	"github.com/fumehood/sandbox/internal/seccomp"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// makeLive makes h's init the init of a live sandbox, which processes
// enter later. Its cgroup's OOM kills then take one process, not the
// whole sandbox: the entrants raise their oom_score_adj above the
// init's, so the kernel takes them first and the init outlives them. A
// cgroup whose OOM setting cannot be written has no memory controller,
// so no OOM kill to spread either.
func (h *Handle) makeLive() {
	h.live = h.holdable
	if h.live.grp != nil {
		h.live.grp.OOMKillsOne()
	}
}

// liveInit is what the launcher keeps of a live sandbox's init (a
// Program with Hold) for the processes that enter it: a pidfd, which
// names that process and no other even once its pid is free again, and
// the cgroup everything in the sandbox is counted in.
type liveInit struct {
	mu    sync.RWMutex // read-held while an entrant is cloned with pidfd
	pidfd int          // -1 once the init has been reaped
	pid   int          // the init's, while pidfd is open
	grp   cgroup.Group

	hostNetwork bool           // the sandbox has the host's network namespace
	limits      []report.Limit // what its cgroup enforces, for every entrant's Exit

	// Counts of its cgroup's OOM kills: oomTold, the count entrants'
	// Exits have reported, so that a kill of a background process
	// between calls is told to the next call that ends
	// (Exit.OOMKillsBefore); oomAlive, the count at the last moment the
	// init was seen alive, so that the init's own Exit counts the kills
	// from then on, its own among them if the OOM killer took it.
	oomMu    sync.Mutex
	oomTold  uint64
	oomAlive uint64
}

// seenAlive records that the init was alive when its cgroup's count of
// OOM kills was now, or later.
func (l *liveInit) seenAlive(now uint64) {
	l.oomMu.Lock()
	defer l.oomMu.Unlock()
	l.oomAlive = max(l.oomAlive, now)
}

// killsSinceAlive is how many of the count of OOM kills now came after
// the init was last seen alive.
func (l *liveInit) killsSinceAlive(now uint64) uint64 {
	l.oomMu.Lock()
	defer l.oomMu.Unlock()
	return now - min(now, l.oomAlive)
}

// alive says whether the init has not begun to exit.
func (l *liveInit) alive() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.pidfd >= 0 && !sysutil.Exited(l.pidfd, l.pid)
}

// untoldOOMKills is how many of now, a count of its cgroup's OOM kills,
// no Exit has reported yet; with tell, they count as reported from here
// on.
func (l *liveInit) untoldOOMKills(now uint64, tell bool) uint64 {
	l.oomMu.Lock()
	defer l.oomMu.Unlock()
	if now <= l.oomTold {
		return 0
	}
	n := now - l.oomTold
	if tell {
		l.oomTold = now
	}
	return n
}

// close forgets the init once it is reaped: later entries fail.
func (l *liveInit) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pidfd >= 0 {
		unix.Close(l.pidfd)
		l.pidfd = -1
	}
}

// Live says whether h is a live sandbox's init, which processes can enter.
func (h *Handle) Live() bool { return h.live != nil }

// entrant is one process that entered a live sandbox, as its launcher
// sees it: its pid in the launcher's namespace, and whether it has been
// reaped, under mu, so that its pid and process group are signalled only
// while they are still its.
type entrant struct {
	mu     sync.Mutex
	pid    int
	reaped bool
}

// signal sends sig to the entrant, and with group to its process group
// too (its own, made at its setsid, with whatever it started there).
//
// The entrant leads a session of its own whose parent, the launcher, is in
// another: its process group is orphaned, and the kernel drops the stop
// signals of a terminal (SIGTSTP, SIGTTIN, SIGTTOU) sent to it. Where the
// program leaves one at its default action, SIGSTOP is sent instead, so
// that it stops as a child of the caller would, and as a sandbox's init
// does (signaler).
func (e *entrant) signal(sig unix.Signal, group bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reaped {
		return os.ErrProcessDone
	}
	switch sig {
	case unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		status, err := os.ReadFile("/proc/" + strconv.Itoa(e.pid) + "/status")
		if err == nil && sysutil.DefaultAction(string(status), int(sig)) {
			sig = unix.SIGSTOP
		}
	}
	err := unix.Kill(e.pid, sig)
	if group {
		unix.Kill(-e.pid, sig) // none yet before its setsid
	}
	return err
}

// Enter starts cfg's Program in the live sandbox of target, with stdio,
// as a process that enters it (recipe.CompileEntry). It returns once the
// entrant runs; Ready and Done report the rest, as for Launch. Kill kills
// the entrant and its process group; the rest of the sandbox lives on.
// Exit's figures are the entrant's own (its CPU and that of the children
// it reaped, its peak RSS); OOMKills and PidsMax count what the
// sandbox's cgroup saw while it ran.
func Enter(target *Handle, cfg *wire.Config, stdio [3]*os.File, teardown *sysutil.Tracker) (*Handle, *wire.SetupError) {
	li := target.live
	if li == nil {
		return nil, &wire.SetupError{Stage: "enter", Op: "find the live sandbox", Text: "the run entered is not a live sandbox"}
	}
	fail := func(op string, err error) (*Handle, *wire.SetupError) {
		return nil, &wire.SetupError{Stage: "enter", Op: op, Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	conn, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("socketpair", err)
	}
	parent, child := os.NewFile(uintptr(conn[0]), "enter-parent"), os.NewFile(uintptr(conn[1]), "enter-child")
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		parent.Close()
		child.Close()
		return fail("socketpair", err)
	}
	syncP, syncC := os.NewFile(uintptr(sp[0]), "enter-sync-parent"), os.NewFile(uintptr(sp[1]), "enter-sync-child")
	defer syncP.Close()
	defer child.Close()
	defer syncC.Close()
	closeParent := true
	defer func() {
		if closeParent {
			parent.Close()
		}
	}()
	// The entrant's pid, in this process's namespace, comes with its
	// first byte.
	if err := unix.SetsockoptInt(sp[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return fail("setsockopt SO_PASSCRED", err)
	}
	shim, err := recipe.ShimFile()
	if err != nil || shim == nil {
		if err == nil {
			err = unix.ENOEXEC
		}
		return fail("make exec shim", err)
	}
	fds := recipe.Fds{Conn: int(child.Fd()), Sync: int(syncC.Fd()), Workspace: -1, Proxy: -1, Shim: int(shim.Fd())}
	for i, f := range stdio {
		fds.Stdio[i] = int(f.Fd())
	}
	// The forker may share this process's memory: it never enters the
	// sandbox's PID namespace, and the entrant it forks has a copy.
	clone := forkplan.Clone{CgroupFD: -1, Shared: true}
	var join []string
	if li.grp != nil {
		if clone.CgroupFD = li.grp.CloneFD(); clone.CgroupFD < 0 {
			join = li.grp.JoinFiles()
		}
	}
	var before wire.Exit
	if li.grp != nil {
		usageOf(li.grp, &before)
	}
	// Kills from before this entrant that no call was told of: the
	// background's, since the last call ended.
	untold := li.untoldOOMKills(before.OOMKills, false)
	li.mu.RLock()
	if li.pidfd < 0 {
		li.mu.RUnlock()
		return nil, &wire.SetupError{Stage: "enter", Op: "find the live sandbox", Errno: int(unix.ESRCH), Text: "the live sandbox has ended"}
	}
	plan, se := recipe.CompileEntry(cfg, fds, li.pidfd, join)
	if se != nil {
		li.mu.RUnlock()
		return nil, se
	}
	forker, err := plan.Start(clone)
	li.mu.RUnlock()
	runtime.KeepAlive(stdio)
	runtime.KeepAlive(shim)
	if err != nil {
		return fail("clone", err)
	}
	syncC.Close()
	child.Close()
	// The forker exits once it has forked, or fails with a record on conn.
	var fws unix.WaitStatus
	for {
		if _, err := unix.Wait4(forker, &fws, 0, nil); err != unix.EINTR {
			break
		}
	}
	pid, ok := readEntrantPid(syncP)
	if !ok {
		_, _, se := readVerdict(parent, plan, nil)
		if se == nil || se.Op == wire.OpInitDied {
			se = &wire.SetupError{Stage: "enter", Op: wire.OpInitDied, Text: fmt.Sprintf("the process entering the live sandbox ended before it ran (wait status %#x)", uint32(fws))}
		}
		return nil, se
	}
	e := &entrant{pid: pid}
	// It entered the init's namespaces: the init was alive after the
	// count was read.
	li.seenAlive(before.OOMKills)
	abort := func(se *wire.SetupError) (*Handle, *wire.SetupError) {
		e.signal(unix.SIGKILL, false)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		return nil, se
	}
	if li.grp != nil && clone.CgroupFD < 0 && len(join) == 0 {
		if err := li.grp.Add(pid); err != nil {
			return abort(&wire.SetupError{Stage: "cgroup", Op: "add entrant", Path: li.grp.Path(), Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
	}
	if _, err := syncP.Write([]byte{1}); err != nil {
		return abort(&wire.SetupError{Stage: "enter", Op: "start entrant", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
	}
	h := NewHandle(func() { e.signal(unix.SIGKILL, true) })
	h.Pid = pid
	h.InnerPid = innerPid(pid)
	h.Signal = func(sig unix.Signal) error { return e.signal(sig, false) }
	if cfg.SeccompEvents {
		h.Events = make(chan wire.Event, eventsBuffer)
	}
	closeParent = false
	teardown.Add(1)
	go func() {
		defer teardown.Done()
		var sv *supervisor
		_, term, se := readVerdict(parent, plan, func(l *seccomp.Listener) {
			var kill func()
			if cfg.SeccompKill {
				kill = h.Kill
			}
			sv = supervise(l, cfg.Seccomp, kill, h.Events)
		})
		plan.Release()
		h.Term = term
		if se != nil {
			recipe.NameProgram(se, &cfg.Program)
		}
		h.Ready <- se
		parent.Close()
		exit := waitEntrant(e)
		if sv != nil {
			sv.stop(&exit)
		}
		if li.grp != nil {
			var after wire.Exit
			usageOf(li.grp, &after)
			exit.OOMKills = after.OOMKills - before.OOMKills
			exit.OOMKillsBefore = min(untold, li.untoldOOMKills(after.OOMKills, true))
			if li.alive() {
				li.seenAlive(after.OOMKills)
			}
			exit.PidsMax = after.PidsMax - before.PidsMax
		}
		exit.Limits = li.limits
		h.Done <- exit
		<-h.Reported
	}()
	return h, nil
}

// readEntrantPid reads the entrant's first byte from sync, and its pid
// from the credentials the kernel attached to it.
func readEntrantPid(sync *os.File) (int, bool) {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, _, _, err := unix.Recvmsg(int(sync.Fd()), buf, oob, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 {
			return 0, false
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return 0, false
		}
		for _, m := range msgs {
			if cred, err := unix.ParseUnixCredentials(&m); err == nil && cred.Pid > 0 {
				return int(cred.Pid), true
			}
		}
		return 0, false
	}
}

// waitEntrant waits for the entrant to end, marks it reaped before its
// pid can be anyone else's, and reaps it.
func waitEntrant(e *entrant) wire.Exit {
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, e.pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reaped = true
	var ws unix.WaitStatus
	var ru unix.Rusage
	for {
		if _, err := unix.Wait4(e.pid, &ws, 0, &ru); err != unix.EINTR {
			break
		}
	}
	return wire.Exit{Status: uint32(ws), UserNS: unix.TimevalToNsec(ru.Utime), SysNS: unix.TimevalToNsec(ru.Stime), MaxRSSKiB: ru.Maxrss}
}

// innerPid is the pid of process pid in its innermost PID namespace, from
// the last field of NSpid in its status; 0 if it cannot be read.
func innerPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
	}
	return 0
}
