//go:build linux

package launch

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// Probe clones a probe (recipe.CompileProbe) into the namespaces in
// flags, maps its user to hostUID and hostGID as an init's is, lets it go
// and waits for it; given layers, the probe mounts their overlay. It
// returns nil when every step went well, else what failed: the clone or
// the id maps (Stage "clone"), or the probe's own step, with its errno.
// It runs in whichever process asks; the probe is a copy of that process
// that never runs Go code, as an init is.
func Probe(flags uintptr, layers []string, hostUID, hostGID int) *wire.SetupError {
	fail := func(op string, err error) *wire.SetupError {
		return &wire.SetupError{Stage: "clone", Op: op, Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	var conns, syncs [2]int
	if err := socketpairs(&conns, &syncs); err != nil {
		return fail("socketpair", err)
	}
	defer unix.Close(conns[0])
	defer unix.Close(syncs[0])
	plan, se := recipe.CompileProbe(conns[1], syncs[1], layers)
	if se != nil {
		unix.Close(conns[1])
		unix.Close(syncs[1])
		return se
	}
	// A child sharing this process's memory spares a large caller the
	// copy of its page tables and the faults after it, as an init's does;
	// its Start returns once it has exited, so it is served from here
	// meanwhile.
	var pidTo int32
	type result struct {
		pid int
		err error
	}
	started := make(chan result, 1)
	go func() {
		pid, err := plan.Start(forkplan.Clone{Flags: uint64(flags), CgroupFD: -1, Shared: true, PidTo: &pidTo})
		// The child has its copies, or there is no child: without ours,
		// its ends read as EOF once it is gone.
		unix.Close(conns[1])
		unix.Close(syncs[1])
		started <- result{pid, err}
	}()
	// Its first byte: it runs, and waits for its maps. EOF instead: the
	// clone failed, or the probe failed before, and said why on conn.
	if n, _ := unix.Read(syncs[0], make([]byte, 1)); n == 1 {
		pid := int(atomic.LoadInt32(&pidTo))
		if err := writeIDMaps(pid, hostUID, hostGID, os.Geteuid() == 0); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			<-started
			reap(pid)
			return fail("write id maps", err)
		}
		unix.Write(syncs[0], []byte{1}) // a probe gone meanwhile has said why on conn
	}
	res := <-started
	if res.err != nil {
		return fail("start probe", res.err)
	}
	ws := reap(res.pid)
	// Every end of conn but ours is closed once the probe is gone: a
	// read returns its failure record, or nothing.
	buf := make([]byte, forkplan.FailureLen)
	n, _ := unix.Read(conns[0], buf)
	if n > 0 {
		f, err := plan.ParseFailure(buf[:n])
		if err != nil {
			return &wire.SetupError{Stage: "probe", Op: "read the probe's report", Text: err.Error()}
		}
		return &wire.SetupError{Stage: f.Where.Stage, Op: f.Where.Op, Path: f.Where.Path, Errno: int(f.Errno)}
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return &wire.SetupError{Stage: "probe", Op: wire.OpInitDied, Text: fmt.Sprintf("the probe ended without a report: wait status %#x", uint32(ws))}
	}
	return nil
}

// socketpairs makes a close-on-exec packet socket pair in each of pairs.
func socketpairs(pairs ...*[2]int) error {
	for i, p := range pairs {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			for _, q := range pairs[:i] {
				unix.Close(q[0])
				unix.Close(q[1])
			}
			return err
		}
		*p = [2]int(fds)
	}
	return nil
}

// reap waits for the child pid and returns how it ended.
func reap(pid int) unix.WaitStatus {
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			return ws
		}
	}
}
