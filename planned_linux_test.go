//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The planned init (planned_linux.go) and the Go init must build the same
// sandbox and fail the same way. An InProcess Run always takes the Go init.

// runBoth runs cmd with opts under each init and returns their results and
// errors, checking that each took the init it was meant to.
func runBoth(t *testing.T, opts Options, cmd func() *Cmd) (planned, goInit *Result, errPlanned, errGo error) {
	t.Helper()
	for _, inProcess := range []bool{false, true} {
		o := opts
		o.InProcess = inProcess
		s := newTest(t, o)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := s.Run(ctx, cmd())
		cancel()
		s.Close()
		if inProcess {
			goInit, errGo = res, err
		} else {
			planned, errPlanned = res, err
		}
		if err == nil && res.planned == inProcess {
			t.Errorf("InProcess=%v: planned = %v", inProcess, res.planned)
		}
	}
	return
}

func TestPlannedInitBuildsTheSameSandbox(t *testing.T) {
	requireSandbox(t)
	data := sharedTempDir(t)
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := "PLANNED_MARK=" + t.Name()
	opts := Options{Env: []string{marker}, Binds: []Bind{{Source: data, Target: "/opt/planned/data"}, {Source: data, Target: "/srv/rw", Writable: true},
		{Source: data, Target: "/etc/planned"}}, TrustedCAs: newTestCA(t, "planned").pem}
	script := `id; grep -E '^(Cap|NoNewPrivs|Seccomp|Uid|Gid|Groups|SigIgn)' /proc/self/status; hostname; cat /etc/hostname /etc/passwd /etc/hosts
ls -AlL / /dev /etc /proc/1/fd >/tmp/ls; awk '{print $1, $3, $4}' /tmp/ls; ls -A / /dev /etc /etc/ssl /etc/pki /tmp /workspace; cat /opt/planned/data/f; touch /opt/planned/data/x 2>&1
readlink /etc/localtime /etc/mtab; cksum /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt 2>&1; python3 -c 'import os; print(os.openpty())'

cut -d' ' -f5,6,9 /proc/self/mountinfo; ulimit -a; pwd; cat /proc/net/dev | cut -c1-10; ls /proc/self/ns | wc -l; env | sort`
	cmd := func() *Cmd { return Command("/bin/sh", "-c", script) }
	planned, goInit, errP, errG := runBoth(t, opts, cmd)
	if errP != nil || errG != nil {
		t.Fatalf("planned: %v; Go init: %v", errP, errG)
	}
	if !planned.Success() || string(planned.Stdout) != string(goInit.Stdout) || string(planned.Stderr) != string(goInit.Stderr) {
		t.Errorf("the two inits built different sandboxes:\nplanned (%v):\n%s%s\nGo init (%v):\n%s%s",
			planned.Err(), planned.Stdout, planned.Stderr, goInit.Err(), goInit.Stdout, goInit.Stderr)
	}
	requireNothingLeft(t, marker)
}

func TestPlannedInitFailsTheSameWay(t *testing.T) {
	requireSandbox(t)
	marker := "PLANNED_MARK=" + t.Name()
	cases := []struct {
		name string
		opts Options
		cmd  func() *Cmd
	}{
		{"missing program", Options{}, func() *Cmd { return Command("no-such-program-xyz") }},
		{"missing program by path", Options{}, func() *Cmd { return Command("/usr/bin/no-such-program-xyz") }},
		{"not executable", Options{}, func() *Cmd { return Command("/etc/passwd") }},
		{"a directory", Options{}, func() *Cmd { return Command("/usr/bin") }},
		{"missing Cmd.Dir", Options{}, func() *Cmd { c := Command("true"); c.Dir = "/no/such/dir"; return c }},
		{"Cmd.Dir outside the root", Options{}, func() *Cmd { c := Command("true"); c.Dir = "/proc/self/fd/1"; return c }},
	}
	if os.Getuid() == 0 {
		dir := t.TempDir() // its parent is 0700 root: the sandbox uid cannot reach it
		cases = append(cases, struct {
			name string
			opts Options
			cmd  func() *Cmd
		}{"bind source unreachable", Options{Binds: []Bind{{Source: dir, Target: "/data"}}}, func() *Cmd { return Command("true") }})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Env = []string{marker}
			planned, goInit, errP, errG := runBoth(t, c.opts, c.cmd)
			if errP == nil || errG == nil {
				t.Fatalf("planned: %v; Go init: %v; want both to fail", errP, errG)
			}
			if errP.Error() != errG.Error() || errors.Is(errP, ErrNotFound) != errors.Is(errG, ErrNotFound) ||
				errors.Is(errP, os.ErrPermission) != errors.Is(errG, os.ErrPermission) {
				t.Errorf("planned: %v\nGo init: %v\nwant the same error", errP, errG)
			}
			if (planned == nil) != (goInit == nil) || planned != nil && planned.ExitCode != goInit.ExitCode {
				t.Errorf("results differ: planned %+v, Go init %+v", planned, goInit)
			}
			t.Logf("%v", errP)
		})
	}
	requireNothingLeft(t, marker)
}

// A config the plan cannot decide ahead goes to the Go init, and works.
func TestPlannedInitFallsBack(t *testing.T) {
	requireSandbox(t)
	data := sharedTempDir(t)
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory inside the host's /usr: the plan cannot know it is
	// there, the Go init looks and finds it. Not one the shell and cat
	// need (bin, lib...), which the bind would hide.
	var under string
	des, _ := os.ReadDir("/usr")
	for _, de := range des {
		if de.IsDir() && !strings.HasPrefix(de.Name(), "lib") && !strings.HasSuffix(de.Name(), "bin") {
			under = "/usr/" + de.Name()
			break
		}
	}
	if under == "" {
		t.Skip("the host's /usr has no directory besides bin, sbin and lib* to bind over")
	}
	res := run(t, Options{Binds: []Bind{{Source: data, Target: under}}}, Command("cat", under+"/f"))
	if !res.Success() || string(res.Stdout) != "bound\n" || res.planned {
		t.Errorf("bind over %s: %v, stdout %q, planned %v; want bound, from the Go init", under, res.Err(), res.Stdout, res.planned)
	}
	res = run(t, Options{Binds: []Bind{{Source: data, Target: "/srv/data"}}}, Command("cat", "/srv/data/f"))
	if !res.Success() || string(res.Stdout) != "bound\n" || !res.planned {
		t.Errorf("bind at /srv/data: %v, stdout %q, planned %v; want bound, from the plan", res.Err(), res.Stdout, res.planned)
	}
}

// TestMountNamespaceHeldUntilReported: the spawner holds a planned run's
// mount namespace by an fd while the run goes on, so that the program's
// exit does not unmount the tree on the way to the reply, and closes it
// once the run is reported: after Close, it holds none, cold or pooled.
func TestMountNamespaceHeldUntilReported(t *testing.T) {
	requireSandbox(t)
	mountNSFds := func() int {
		n := 0
		dir := fmt.Sprintf("/proc/%d/fd", spawnerPID())
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			if l, err := os.Readlink(dir + "/" + de.Name()); err == nil && strings.HasPrefix(l, "mnt:[") {
				n++
			}
		}
		return n
	}
	for _, pool := range []int{0, 2} {
		s := New(testOpts(Options{Pool: pool}))
		cmd := Command("/bin/sh", "-c", "read x")
		stdin, release := io.Pipe()
		cmd.Stdin = stdin
		done := make(chan error, 1)
		go func() {
			_, err := s.Run(context.Background(), cmd)
			done <- err
		}()
		// A cold run's is the only one; a pool's prepared sandboxes
		// hold theirs too.
		if !waitFor(func() bool { return pool == 0 && mountNSFds() == 1 || pool > 0 && mountNSFds() >= 1 }) {
			t.Errorf("Pool %d: the spawner holds %d mount namespaces while a run goes on, want its run's", pool, mountNSFds())
		}
		release.Close()
		if err := <-done; err != nil {
			t.Fatalf("Pool %d: %v", pool, err)
		}
		if pool == 0 && !waitFor(func() bool { return mountNSFds() == 0 }) {
			t.Errorf("the spawner still holds a mount namespace after the run was reported")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := mountNSFds(); n != 0 {
			t.Errorf("Pool %d: the spawner holds %d mount namespaces after Close, want none", pool, n)
		}
	}
}
