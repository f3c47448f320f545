//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// A prepared init (wire.Config.Prepare) has built the whole sandbox with
// /dev/null as stdio and no program; it tells its launcher so, then waits
// for a wire.Program frame carrying the run's stdio and, for a session, its
// workspace mount. From there on it is a cold init: it enters the working
// directory, finds the program, drops its privileges, loads the filter and
// execs. Nothing of the program's runs in the sandbox before this point,
// and nothing of the preparation stays open past it.
//
// This is the Go init's side. Most prepared inits are planned ones, which
// wait the same way in their plan (planned_program_linux.go).

// awaitProgram reports the sandbox built and takes the program into cfg,
// its stdio onto 0-2 and its workspace onto /workspace.
func awaitProgram(conn *os.File, cfg *wire.Config) error {
	if _, err := conn.Write([]byte{wire.PreparedMark}); err != nil {
		return &initError{Stage: "pool", Op: "report prepared", Err: err}
	}
	data, files, err := readFrame(conn, true)
	if err != nil {
		return &initError{Stage: "pool", Op: "read program", Err: err}
	}
	defer closeFiles(files)
	var p wire.Program
	if err := json.Unmarshal(data, &p); err != nil {
		return &initError{Stage: "pool", Op: "read program", Err: err}
	}
	want := 3
	if cfg.WorkspaceMount {
		want++
	}
	if len(files) != want {
		return &initError{Stage: "pool", Op: "read program", Err: fmt.Errorf("got %d files, want %d", len(files), want)}
	}
	for i := range 3 {
		// dup3 without O_CLOEXEC: 0-2 are the program's.
		if err := unix.Dup3(int(files[i].Fd()), i, 0); err != nil {
			return &initError{Stage: "pool", Op: fmt.Sprintf("dup3 stdio %d", i), Err: err}
		}
	}
	if cfg.WorkspaceMount {
		if err := attachWorkspace(int(files[3].Fd())); err != nil {
			return err
		}
	}
	cfg.Path, cfg.Args, cfg.Env, cfg.Dir = p.Path, p.Args, p.Env, p.Dir
	return nil
}

// awaitPrepared waits for a prepared init to report its sandbox built, or
// the setup error it failed with: a planned init's failure record when
// plan is set, else the Go init's JSON.
func awaitPrepared(conn *os.File, plan *forkplan.Plan) *wire.SetupError {
	var b [1]byte
	n, err := conn.Read(b[:])
	switch {
	case n == 1 && b[0] == wire.PreparedMark:
		return nil
	case n == 1 && plan != nil:
		rest, _ := io.ReadAll(conn)
		f, err := plan.ParseFailure(append(b[:], rest...))
		if err != nil {
			return &wire.SetupError{Stage: "pool", Op: "prepare", Text: err.Error()}
		}
		return &wire.SetupError{Stage: f.Where.Stage, Op: f.Where.Op, Path: f.Where.Path, Errno: int(f.Errno)}
	case n == 1:
		// The first byte of a setup error; the rest follows, then EOF.
		rest, _ := io.ReadAll(conn)
		var se wire.SetupError
		if json.Unmarshal(append(b[:], rest...), &se) != nil {
			return &wire.SetupError{Stage: "pool", Op: "prepare", Text: "malformed reply: " + string(append(b[:], rest...))}
		}
		return &se
	}
	return &wire.SetupError{Stage: "pool", Op: "prepare", Text: fmt.Sprintf("the init ended before it was prepared: %v", err), Errno: errnoOf(err)}
}

// giveProgram waits for the program of a prepared init and hands it over
// with send, which gets it and its files' fds, and returns it, also when
// send fails (the start was served, and failed). A closed h.program means
// the prepared sandbox is not wanted: the init is killed, as it is when
// send fails, and the program is nil.
func giveProgram(h *handle, init *os.Process, send func(p wire.Program, fds []int) error) (*wire.Program, *wire.SetupError) {
	pf, ok := <-h.program
	if !ok {
		init.Kill()
		return nil, &wire.SetupError{Stage: "pool", Op: "destroy", Text: "prepared sandbox destroyed unused"}
	}
	defer closeFiles(pf.files)
	fds := make([]int, len(pf.files))
	for i, f := range pf.files {
		fds[i] = int(f.Fd())
	}
	if err := send(pf.p, fds); err != nil {
		init.Kill()
		return &pf.p, &wire.SetupError{Stage: "pool", Op: "send program", Errno: errnoOf(err), Text: err.Error()}
	}
	return &pf.p, nil
}

// sendProgramFrame is how a Go init is given its program: as a frame on
// conn, which then ends as for a cold init.
func sendProgramFrame(conn *os.File) func(p wire.Program, fds []int) error {
	return func(p wire.Program, fds []int) error {
		msg, err := json.Marshal(p)
		if err == nil {
			err = writeFrame(conn, msg, fds)
		}
		if err == nil {
			err = unix.Shutdown(int(conn.Fd()), unix.SHUT_WR)
		}
		return err
	}
}
