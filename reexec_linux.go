//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/fumehood/sandbox/internal/keeper"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/spawner"
)

// roleEnv marks a re-exec of this binary as one of the sandbox's own
// processes. Its value says which: the spawner, the workspace keeper, or
// a probe. None of them runs inside a sandbox.
const roleEnv = "_FUMEHOOD_SANDBOX_ROLE"

const roleSpawner = "spawner"

// roleEnviron is the whole environment of a re-exec as role, with extra.
// GORACE: a binary built with -race otherwise sleeps a second at every
// exit, which a probe, a keeper and a spawner all reach while someone
// waits; a binary built without it ignores the variable.
func roleEnviron(role string, extra ...string) []string {
	return append([]string{roleEnv + "=" + role, "GORACE=atexit_sleep_ms=0"}, extra...)
}

// The re-exec hook. Importing this package installs it: when the process is
// one of the sandbox's own re-execs, this init takes it over and never
// returns, so the host program's main never runs there. Package inits of the
// program's other dependencies have already run; keep them cheap, they are
// paid on every sandbox start.
func init() {
	switch os.Getenv(roleEnv) {
	case roleSpawner:
		spawner.Main()
	case roleProbe:
		os.Exit(0)
	case roleKeeper:
		keeper.Main()
	case roleOverlayProbe:
		overlayProbeMain()
	}
}

// sysProcAttr describes how a probe's child is cloned: its ids map the
// sandbox's uid/gid (SandboxUID/SandboxGID inside) to one unprivileged
// host uid/gid, as a sandbox's do.
func sysProcAttr(hostUID, hostGID int, hostNetwork bool) *syscall.SysProcAttr {
	// A root caller may allow setgroups and so drop root's supplementary
	// groups; an unprivileged one must deny setgroups to map its gid.
	root := os.Geteuid() == 0
	return &syscall.SysProcAttr{
		Cloneflags:                 recipe.CloneFlags(hostNetwork),
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: SandboxUID, HostID: hostUID, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: SandboxGID, HostID: hostGID, Size: 1}},
		GidMappingsEnableSetgroups: root,
		Credential:                 &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, NoSetGroups: !root},
		Setsid:                     true,
		Pdeathsig:                  syscall.SIGKILL,
	}
}

// mappedStarts lets one child at a time be started with id maps. os/exec
// makes such a child wait, before anything else and before its parent-death
// signal is armed, for its parent to write the maps and then a pipe; and
// since Go 1.21 forks run concurrently, so a sibling forked in that moment
// holds a copy of the pipe's write end until it execs. If the process dies
// between two such forks and their maps, each of the two children holds
// the other's pipe open and both wait forever, with copies of every fd the
// process had (a killed caller's session keeper stayed alive on them). One
// at a time, no waiting child holds another's pipe.
var mappedStarts sync.Mutex

// startChild starts cmd; with id maps, through mappedStarts.
func startChild(cmd *exec.Cmd) error {
	if a := cmd.SysProcAttr; a != nil && (a.UidMappings != nil || a.GidMappings != nil) {
		mappedStarts.Lock()
		defer mappedStarts.Unlock()
	}
	return cmd.Start()
}
