//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"sync"

	"github.com/fumehood/sandbox/internal/keeper"
	"github.com/fumehood/sandbox/internal/spawner"
)

// roleEnv marks a re-exec of this binary as one of the sandbox's own
// processes. Its value says which role. None of them runs inside a
// sandbox; a sandbox's init, and a probe, are clones that never run Go
// code (internal/forkplan), not re-execs.
const roleEnv = "_FUMEHOOD_SANDBOX_ROLE"

// The roles, each with its entry in init below.
const (
	// roleSpawner builds sandboxes and keeps the pool (spawner.Main);
	// spawnerclient_linux.go starts it.
	roleSpawner = "spawner"
	// roleKeeper holds a session's workspace (keeper.Main);
	// keeperclient_linux.go starts it.
	roleKeeper = "keeper"
)

// roleEnviron is the whole environment of a re-exec as role, with extra.
// GORACE: a binary built with -race otherwise sleeps a second at every
// exit, which a keeper and a spawner both reach while someone waits; a
// binary built without it ignores the variable.
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
	case roleKeeper:
		keeper.Main()
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
