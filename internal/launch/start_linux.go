//go:build linux

package launch

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// startInit clones the init of cfg with the namespaces in flags, writes
// its id maps, puts it in grp, and lets it go; for a prepared init, it
// returns the way to give it its program. A config that cannot be built
// fails here, before anything is started.
func startInit(cfg *wire.Config, stdio [3]*os.File, conn *os.File, extra Files, grp cgroup.Group, flags uintptr) (*os.Process, *forkplan.Plan, *programSender, *wire.SetupError) {
	// The sync socket: the child says on it that it runs, and waits on it
	// for its id maps, and a prepared one then for its program, which
	// comes as one message.
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, &wire.SetupError{Stage: "start", Op: "socketpair", Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	syncP, syncC := os.NewFile(uintptr(sp[0]), "sync-parent"), os.NewFile(uintptr(sp[1]), "sync-child")
	keepSync := false
	defer func() {
		if !keepSync {
			syncP.Close()
		}
	}()
	fds := recipe.Fds{Conn: int(conn.Fd()), Sync: int(syncC.Fd()), Workspace: -1, Proxy: -1, Shim: -1}
	shim, err := recipe.ShimFile()
	if err != nil {
		syncC.Close()
		return nil, nil, nil, &wire.SetupError{Stage: "start", Op: "make exec shim", Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	if shim != nil {
		fds.Shim = int(shim.Fd())
	}
	for i, f := range stdio {
		fds.Stdio[i] = int(f.Fd())
	}
	if extra.Workspace != nil {
		fds.Workspace = int(extra.Workspace.Fd())
	}
	if extra.ProxyChan != nil {
		fds.Proxy = int(extra.ProxyChan.Fd())
	}
	// Where the clone cannot place the init in its cgroup, the init
	// joins it itself when it can (cgroup v1); else it is added below.
	var join []string
	if grp != nil && grp.CloneFD() < 0 {
		join = grp.JoinFiles()
	}
	plan, block, se := recipe.Compile(cfg, fds, join)
	if se != nil {
		syncC.Close()
		return nil, nil, nil, se
	}
	var pidTo int32
	// A child that resets the oom_score_adj it inherited gets memory of
	// its own: the kernel applies a write of it to every process sharing
	// the writer's memory, which would reset the launcher's too.
	clone := forkplan.Clone{Flags: uint64(flags), CgroupFD: -1, Shared: !cfg.ResetOOMScore, PidTo: &pidTo}
	if grp != nil {
		clone.CgroupFD = grp.CloneFD()
	}
	// A shared child's Start returns once it has exec'd, so it is served
	// from here meanwhile, and the result waits in started.
	type result struct {
		pid int
		err error
	}
	started := make(chan result, 1)
	go func() {
		pid, err := plan.Start(clone)
		// The child has its copies of the fds by now, or there is no
		// child: without our end of sync, its reader sees EOF then.
		syncC.Close()
		runtime.KeepAlive(stdio)
		runtime.KeepAlive(conn)
		runtime.KeepAlive(extra)
		runtime.KeepAlive(shim)
		started <- result{pid, err}
	}()
	// The child's first byte: it runs, with its copies of the fds, so
	// ours of its end go now too (a shared child's Start has not returned
	// yet), before the run can end. EOF instead: the clone failed, or the
	// child failed before, and its failure record is on conn.
	runs := readByte(syncP)
	if runs {
		syncC.Close() // *os.File: the goroutine's second Close is harmless
	}
	if !runs {
		res := <-started
		if res.err != nil {
			return nil, nil, nil, &wire.SetupError{Stage: "clone", Op: "start init", Errno: sysutil.ErrnoOf(res.err), Text: res.err.Error()}
		}
		proc, se := findProcess(res.pid)
		return proc, plan, nil, se
	}
	pid := int(atomic.LoadInt32(&pidTo))
	proc, se := findProcess(pid)
	if se != nil {
		unix.Kill(pid, unix.SIGKILL)
		return nil, nil, nil, se
	}
	abort := func(se *wire.SetupError) (*os.Process, *forkplan.Plan, *programSender, *wire.SetupError) {
		proc.Kill()
		proc.Wait()
		return nil, nil, nil, se
	}
	if err := writeIDMaps(pid, cfg.HostUID, cfg.HostGID, os.Geteuid() == 0); err != nil {
		return abort(&wire.SetupError{Stage: "clone", Op: "write id maps", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
	}
	if grp != nil && clone.CgroupFD < 0 && len(join) == 0 {
		if err := grp.Add(pid); err != nil {
			return abort(&wire.SetupError{Stage: "cgroup", Op: "add init", Path: grp.Path(), Errno: sysutil.ErrnoOf(err), Text: err.Error()})
		}
	}
	if _, err := syncP.Write([]byte{1}); err != nil {
		return abort(&wire.SetupError{Stage: "clone", Op: "start init", Errno: sysutil.ErrnoOf(err), Text: err.Error()})
	}
	if block == nil {
		return proc, plan, nil, nil
	}
	keepSync = true
	return proc, plan, &programSender{sock: syncP, block: block}, nil
}

// readByte reads one byte from f, and says whether there was one.
func readByte(f *os.File) bool {
	_, err := io.ReadFull(f, make([]byte, 1))
	return err == nil
}

// findProcess is the child with pid, which this process has not yet
// waited for.
func findProcess(pid int) (*os.Process, *wire.SetupError) {
	proc, err := os.FindProcess(pid)
	if err != nil { // not on Linux: the pid is only looked up
		return nil, &wire.SetupError{Stage: "clone", Op: "find init", Text: err.Error()}
	}
	return proc, nil
}

// writeIDMaps maps the sandbox user and group of the user namespace of pid
// to hostUID and hostGID. A root launcher allows setgroups, so that the
// init can drop root's groups; any other must deny it to map its gid.
func writeIDMaps(pid, hostUID, hostGID int, root bool) error {
	setgroups := "deny"
	if root {
		setgroups = "allow"
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, f := range []struct{ name, content string }{
		{"uid_map", fmt.Sprintf("%d %d 1\n", wire.SandboxUID, hostUID)},
		{"setgroups", setgroups},
		{"gid_map", fmt.Sprintf("%d %d 1\n", wire.SandboxGID, hostGID)},
	} {
		if err := os.WriteFile(dir+f.name, []byte(f.content), 0); err != nil {
			return err
		}
	}
	return nil
}
