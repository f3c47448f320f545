package sandboxtest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fumehood/sandbox"
)

// ProgramDir is where Go, GoFile and Binary put the programs they run,
// inside the sandbox: a read-only bind of a host directory of the test's,
// each program in a directory of its own.
const ProgramDir = "/sandboxtest"

// programs holds the host directory bound at ProgramDir and the sandbox
// with that bind; the plain one has none, so that Run and Shell see
// exactly what the Options ask for.
type programs struct {
	dir string
	sb  *sandbox.Sandbox
	n   atomic.Int64 // programs placed so far, naming their directories
}

// Go builds src, a Go main package in one file that imports only the
// standard library, and runs it with args. See GoFile.
func (s *Sandbox) Go(src string, args ...string) *Result {
	s.tb.Helper()
	file := filepath.Join(s.tb.TempDir(), "snippet.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		s.tb.Fatalf("sandboxtest: %v", err)
		return &Result{tb: s.tb}
	}
	return s.GoFile(file, args...)
}

// GoFile builds the Go main package in the file at path (relative to the
// test's working directory, usually its package's) and runs it with args.
// It is built on the host with the go command on PATH, with CGO_ENABLED=0,
// in the module the file lies in, if any (so it may import that module's
// dependencies); compiling runs none of its code. The test is skipped when
// there is no go command, and ended when the build fails.
func (s *Sandbox) GoFile(path string, args ...string) *Result {
	s.tb.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		s.tb.Skipf("sandboxtest: no go command to build %s: %v", path, err)
		return &Result{tb: s.tb}
	}
	file, err := filepath.Abs(path)
	if err != nil {
		s.tb.Fatalf("sandboxtest: %v", err)
		return &Result{tb: s.tb}
	}
	p := s.programs()
	if p == nil {
		return &Result{tb: s.tb}
	}
	name := strings.TrimSuffix(filepath.Base(file), ".go")
	host, inside, err := p.place(name)
	if err != nil {
		s.tb.Fatalf("sandboxtest: %v", err)
		return &Result{tb: s.tb}
	}
	build := exec.CommandContext(s.tb.Context(), gocmd, "build", "-trimpath", "-o", host, file)
	build.Dir = filepath.Dir(file)
	// A static binary for this host, whatever the environment cross-
	// compiles for: the sandbox has the host's libraries but a cgo
	// binary would also need its C toolchain's.
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		s.tb.Fatalf("sandboxtest: go build %s: %v\n%s", path, err, out)
		return &Result{tb: s.tb}
	}
	return s.runIn(p.sb, sandbox.Command(inside, args...))
}

// Binary copies the host program at path into the sandbox and runs it
// with args. It needs what the sandbox has: a static binary, or one whose
// libraries are in the host's /lib* and /usr.
func (s *Sandbox) Binary(path string, args ...string) *Result {
	s.tb.Helper()
	p := s.programs()
	if p == nil {
		return &Result{tb: s.tb}
	}
	host, inside, err := p.place(filepath.Base(path))
	if err == nil {
		err = copyProgram(host, path)
	}
	if err != nil {
		s.tb.Fatalf("sandboxtest: %v", err)
		return &Result{tb: s.tb}
	}
	return s.runIn(p.sb, sandbox.Command(inside, args...))
}

// programs returns the sandbox that sees ProgramDir, made at the first
// call; nil if that failed, which ended the test.
func (s *Sandbox) programs() *programs {
	s.tb.Helper()
	s.progOnce.Do(func() { s.progs, s.progErr = newPrograms(s.tb, s.opts) })
	if s.progErr != nil {
		s.tb.Fatalf("sandboxtest: %v", s.progErr)
		return nil
	}
	return s.progs
}

func newPrograms(tb testing.TB, opts sandbox.Options) (*programs, error) {
	dir := tb.TempDir()
	// The sandbox's host uid, not the test's when the test is root, must
	// read and run the programs; workspaceDir let it pass through the
	// directory above.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	opts.Binds = append(slices.Clip(opts.Binds), sandbox.Bind{Source: dir, Target: ProgramDir})
	sb := sandbox.New(opts)
	if err := sb.Err(); err != nil {
		return nil, err
	}
	tb.Cleanup(func() { closeSandbox(tb, sb) })
	return &programs{dir: dir, sb: sb}, nil
}

// place makes a new directory for a program called name, and returns the
// program's host path and its path inside the sandbox.
func (p *programs) place(name string) (host, inside string, err error) {
	sub := strconv.FormatInt(p.n.Add(1), 10)
	if err := os.Mkdir(filepath.Join(p.dir, sub), 0o755); err != nil {
		return "", "", err
	}
	return filepath.Join(p.dir, sub, name), path.Join(ProgramDir, sub, name), nil
}

// copyProgram copies the program src to dst, executable by everyone.
func copyProgram(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
