//go:build linux

package recipe

import (
	"os"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// CompileProbe compiles the steps of a probe: a child the launcher clones
// into new namespaces, as it clones an init, to learn whether this host
// lets a sandbox be made there. It takes the sandbox's ids and
// capabilities by the init's own steps (identity); given layers, it then
// mounts their read-only overlay by the steps an init mounts an image's
// root with (mountLayers) and reads the overlay's top directory. Then it
// exits 0. It execs nothing and builds no root.
//
// It starts from conn, where a failing step is reported (a
// forkplan.Failure record), and sync, on which it tells the launcher it
// runs and waits for its id maps, as an init does (wire's init.go).
func CompileProbe(conn, sync int, layers []string) (*forkplan.Plan, *wire.SetupError) {
	cfg := &wire.Config{Spec: wire.Spec{RootfsLayers: layers}}
	b := &planner{p: forkplan.New(planConnFd), cfg: cfg, facts: &hostFacts{root: os.Geteuid() == 0}}
	// Nothing is written to stdio: conn stands in for it.
	b.placeFds(Fds{Stdio: [3]int{conn, conn, conn}, Conn: conn, Sync: sync, Workspace: -1, Proxy: -1, Shim: -1})
	b.identity()
	if len(layers) > 0 {
		b.readOverlay(b.mountLayers())
	}
	b.call(forkplan.Where{Stage: "probe", Op: "exit"}, unix.SYS_EXIT_GROUP, forkplan.Val(0))
	if b.err != nil {
		return nil, b.err
	}
	return b.p, nil
}

// readOverlay adds the steps that read the first entries of the top
// directory of the mount in slot m: a mount that succeeds may still be
// one whose layers the sandbox's user cannot read.
func (b *planner) readOverlay(m forkplan.Slot) {
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "mount", Op: op} }
	// A mount's fd is an O_PATH one: its directory is opened to be read.
	dir := b.slot()
	b.call(w("open the overlay"), unix.SYS_OPENAT, forkplan.In(m), forkplan.Str("."),
		forkplan.Val(unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)).Save(dir)
	buf := make([]byte, 4096)
	b.call(w("read the overlay"), unix.SYS_GETDENTS64, forkplan.In(dir), forkplan.Buf(buf), forkplan.Val(len(buf)))
	b.close(dir)
	b.close(m)
}
