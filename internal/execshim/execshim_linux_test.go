package execshim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shimRunner writes the shim for goarch to a file and returns how to run
// it: directly on this machine's architecture, under qemu-user for the
// other (the programs it execs are then this machine's, which qemu runs
// natively).
func shimRunner(t *testing.T, goarch string) (path string, prefix []string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "shim-"+goarch)
	if err := os.WriteFile(path, ImageFor(goarch, 3), 0o755); err != nil {
		t.Fatal(err)
	}
	if Image(3) != nil && bytes.Equal(Image(3), ImageFor(goarch, 3)) {
		return path, nil
	}
	qemu := map[string]string{"arm64": "qemu-aarch64-static", "amd64": "qemu-x86_64-static"}[goarch]
	q, err := exec.LookPath(qemu)
	if err != nil {
		t.Skipf("the %s shim needs %s to run here (Debian: qemu-user-static): %v", goarch, qemu, err)
	}
	return path, []string{q}
}

type outcome struct {
	stdout, stderr string
	report         []byte
	code           int
}

// shimCommand is the command that runs the shim at path with argv, with
// prefix as shimRunner returned it, fd 3 the report fd w.
func shimCommand(path string, prefix, argv []string, w *os.File) *exec.Cmd {
	var cmd *exec.Cmd
	if prefix == nil {
		cmd = &exec.Cmd{Path: path, Args: argv}
	} else {
		// qemu-user's -0 sets the guest's argv[0].
		cmd = exec.Command(prefix[0], append([]string{"-0", argv[0], path}, argv[1:]...)...)
	}
	cmd.Env = []string{"SHIMTEST=env-reached"}
	cmd.ExtraFiles = []*os.File{w}
	return cmd
}

// reportWait bounds a wait for the shim: to close or write its report
// fd, or to exit. A shim that does neither would otherwise hang the test.
// It is far beyond any shim's start; nothing here measures speed.
const reportWait = 10 * time.Second

// runShim runs the shim with argv, fd 3 the write end of a pipe whose
// contents it returns as the report. wrap, when set, changes the command
// before it starts.
func runShim(t *testing.T, path string, prefix, argv []string, wrap ...func(*exec.Cmd) *exec.Cmd) outcome {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := shimCommand(path, prefix, argv, w)
	for _, f := range wrap {
		cmd = f(cmd)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	report := new(bytes.Buffer)
	r.SetReadDeadline(time.Now().Add(reportWait))
	if _, err := report.ReadFrom(r); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%q: the report fd neither reached EOF nor failed: %v (report so far %q)", argv, err, report.Bytes())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(reportWait):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("%q: the shim closed its report fd (report %q) but did not exit", argv, report.Bytes())
	}
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), report: report.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o
}

func record(step, errno uint32) []byte {
	b := []byte{failMark, 0, 0, 0}
	b = binary.NativeEndian.AppendUint32(b, step)
	return binary.NativeEndian.AppendUint32(b, errno)
}

func TestShim(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "noexec")
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte("\x01\x02 not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The program shows its argv, its environment, and whether it has
	// the report fd.
	show := []string{"sh", "-c", `echo "$0|$1|$2|$SHIMTEST"; [ -e /proc/self/fd/3 ] && echo has-fd-3; exit 0`, "zero", "a b", ""}
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			path, prefix := shimRunner(t, goarch)
			cases := []struct {
				name   string
				argv   []string
				stdout string
				report []byte
				code   int
			}{
				{"runs the first place that exists", Args(7, []string{dir + "/missing", dir + "/missing/x", "/bin/sh", "/bin/false"}, show),
					"zero|a b||env-reached\n", nil, 0},
				{"no place exists", Args(42, []string{dir + "/missing", noExec + "/x"}, show), "", record(42, uint32(syscall.ENOENT)), ExitFailed},
				{"one is not executable", Args(1234567, []string{noExec, dir + "/missing"}, show), "", record(1234567, uint32(syscall.EACCES)), ExitFailed},
				{"another error ends the search", Args(9, []string{garbage, "/bin/sh"}, show), "", record(9, uint32(syscall.ENOEXEC)), ExitFailed},
			}
			for _, c := range cases {
				o := runShim(t, path, prefix, c.argv)
				if o.stdout != c.stdout || !bytes.Equal(o.report, c.report) || o.code != c.code || o.stderr != "" {
					t.Errorf("%s: stdout %q, stderr %q, report %q, exit %d; want stdout %q, report %q, exit %d",
						c.name, o.stdout, o.stderr, o.report, o.code, c.stdout, c.report, c.code)
				}
			}
			// Anything but the init's argv: one line on fd 2, exit 126,
			// nothing run, nothing reported.
			refused := []struct {
				name string
				argv []string
			}{
				{"argv[0] an interpreter path", append([]string{"/proc/self/exe"}, Args(1, []string{"/bin/sh"}, show)[1:]...)},
				{"argv[0] longer than Magic", append([]string{Magic + "x"}, Args(1, []string{"/bin/sh"}, show)[1:]...)},
				{"argv[0] Magic cut short", append([]string{Magic[:6]}, Args(1, []string{"/bin/sh"}, show)[1:]...)},
				{"no empty string after the places", []string{Magic, "1", "/bin/sh", "-c", "echo ran"}},
				{"too few arguments", []string{Magic, "1"}},
				{"argv[0] only", []string{"x"}},
			}
			for _, c := range refused {
				o := runShim(t, path, prefix, c.argv)
				if o.code != ExitRefused || o.stderr != refusal || o.stdout != "" || len(o.report) != 0 {
					t.Errorf("%s: stdout %q, stderr %q, report %q, exit %d; want only the refusal and exit %d",
						c.name, o.stdout, o.stderr, o.report, o.code, ExitRefused)
				}
			}
		})
	}
}

// The shim reached as a script's interpreter, as a script run from it
// would reach it through /proc/self/exe, refuses: the kernel puts the
// interpreter's path, which cannot hold Magic, in its argv[0].
func TestShimAsInterpreter(t *testing.T) {
	if Image(3) == nil {
		t.Skip("no shim for this architecture")
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "shim")
	if err := os.WriteFile(shim, Image(3), 0o755); err != nil {
		t.Fatal(err)
	}
	// Every form a "#!" line can take: the path alone, with an
	// argument, and with the argument made to look like the init's.
	for _, line := range []string{"#!" + shim, "#!" + shim + " 1", "#! " + shim + "\t" + Magic} {
		script := filepath.Join(dir, "script")
		if err := os.WriteFile(script, []byte(line+"\necho ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(script, "", "/bin/sh", "-c", "echo ran")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitRefused || string(out) != refusal {
			t.Errorf("%q: err %v, output %q; want exit %d and the refusal", line, err, out, ExitRefused)
		}
	}
}

func TestMagicCannotBeAnInterpreterPath(t *testing.T) {
	if !strings.ContainsAny(Magic, " \t\n") || len(Magic) != 7 || strings.IndexByte(Magic, 0) >= 0 {
		t.Fatalf("Magic %q must be 7 bytes, hold a blank or newline, and no NUL", Magic)
	}
}
