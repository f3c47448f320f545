//go:build linux

package launch

import (
	"fmt"
	"io"
	"os"

	"github.com/fumehood/sandbox/internal/sysutil"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
)

// A prepared init (wire.Config.Prepare) has built the whole sandbox with
// /dev/null as stdio and no program; it tells its launcher so, then waits
// for its wire.Program with the run's stdio and, for a session, its
// workspace mount. From there on it is a cold init: it enters the working
// directory, finds the program, drops its privileges, loads the filter and
// execs. Nothing of the program's runs in the sandbox before this point,
// and nothing of the preparation stays open past it.
//
// The init waits in its plan (internal/recipe's awaitProgram). The pool
// (internal/spawner) holds prepared sandboxes as Handles and uses the
// methods here: AwaitPrepared, then Take and Start, or Destroy.

// awaitPrepared waits for a prepared init to report its sandbox built, or
// the failure record of the step of plan it failed at.
func awaitPrepared(conn *os.File, plan *forkplan.Plan) *wire.SetupError {
	var b [1]byte
	n, err := conn.Read(b[:])
	switch {
	case n == 1 && b[0] == wire.PreparedMark:
		return nil
	case n == 1:
		rest, _ := io.ReadAll(conn)
		f, err := plan.ParseFailure(append(b[:], rest...))
		if err != nil {
			return &wire.SetupError{Stage: "pool", Op: "prepare", Text: err.Error()}
		}
		return &wire.SetupError{Stage: f.Where.Stage, Op: f.Where.Op, Path: f.Where.Path, Errno: int(f.Errno)}
	}
	return &wire.SetupError{Stage: "pool", Op: "prepare", Text: fmt.Sprintf("the init ended before it was prepared: %v", err), Errno: sysutil.ErrnoOf(err)}
}

// giveProgram waits for the program of a prepared init and hands it over
// with send, which gets it and its files' fds, and returns it, also when
// send fails (the start was served, and failed). A closed h.program means
// the prepared sandbox is not wanted: the init is killed, as it is when
// send fails, and the program is nil.
func giveProgram(h *Handle, init *os.Process, send func(p wire.Program, fds []int) error) (*wire.Program, *wire.SetupError) {
	pf, ok := <-h.program
	if !ok {
		init.Kill()
		return nil, &wire.SetupError{Stage: "pool", Op: "destroy", Text: "prepared sandbox destroyed unused"}
	}
	defer sysutil.CloseFiles(pf.files)
	fds := make([]int, len(pf.files))
	for i, f := range pf.files {
		fds[i] = int(f.Fd())
	}
	if err := send(pf.p, fds); err != nil {
		init.Kill()
		return &pf.p, &wire.SetupError{Stage: "pool", Op: "send program", Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	return &pf.p, nil
}

// Prepare launches an init that prepares cfg with /dev/null as
// its stdio.
func Prepare(cfg *wire.Config, teardown *sysutil.Tracker, warn func(string)) (*Handle, *wire.SetupError) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, &wire.SetupError{Stage: "pool", Op: "open " + os.DevNull, Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	defer null.Close()
	c := *cfg // Launch may set fields of its config
	return Launch(&c, [3]*os.File{null, null, null}, Files{}, false, teardown, warn)
}

// AwaitPrepared waits until the prepared sandbox of h is built (nil) or
// failed.
func (h *Handle) AwaitPrepared() *wire.SetupError { return <-h.prepared }

// Take readies the prepared sandbox of h for p, and says whether p fits
// it: a program too large for the init's block (recipe.ProgramBlock) runs
// cold, and h stays for another.
func (h *Handle) Take(p wire.Program) bool {
	if h.block == nil {
		return false
	}
	msg, ok := h.block.Encode(p)
	if ok {
		h.msg = msg
	}
	return ok
}

// Start hands the prepared sandbox of h the program Take readied it for,
// and its files (stdio, then the workspace mount if any), which it takes
// over. The Handle then reports the run as a cold one's does.
func (h *Handle) Start(p wire.Program, files []*os.File) {
	if p.Hold {
		// Before the init has its program: Enter reads it once the
		// caller hears the program runs.
		h.makeLive()
	}
	h.program <- programFiles{p: p, files: files}
}

// Destroy kills the prepared sandbox of h, unused.
func (h *Handle) Destroy() { close(h.program) }
