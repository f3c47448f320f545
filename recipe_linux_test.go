//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/recipe"
	"golang.org/x/sys/unix"
)

// One recipe (internal/recipe) builds every sandbox,
// whether the spawner clones its init or the caller does (InProcess). These
// tests look at what it builds from inside, for both launchers.

// launcherName names runBothLaunchers' results in order.
var launcherName = []string{"spawned", "in process"}

// runBothLaunchers runs cmd with opts through the spawner and in process,
// and returns their results and errors.
func runBothLaunchers(t *testing.T, opts Options, cmd func() *Cmd) (spawned, inProc *Result, errSpawned, errInProc error) {
	t.Helper()
	for _, inProcess := range []bool{false, true} {
		o := opts
		o.Start = inProcessIf(inProcess)
		// Cold: a pooled sandbox mounts its workspace later, which the comparison would see.
		s := newColdTest(t, o)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := s.Run(ctx, cmd())
		cancel()
		s.Close()
		if inProcess {
			inProc, errInProc = res, err
		} else {
			spawned, errSpawned = res, err
		}
	}
	return
}

// TestRecipeSandbox: what a program sees of its sandbox, the same from both
// launchers: its ids, capabilities, filter, hostname, generated /etc, the
// top of its root, its mounts' flags, binds read-only or writable as asked.
func TestRecipeSandbox(t *testing.T) {
	requireSandbox(t)
	data := sharedTempDir(t)
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := "RECIPE_MARK=" + t.Name()
	opts := Options{Env: []string{marker}, Binds: []Bind{{Source: data, Target: "/opt/recipe/data"}, {Source: data, Target: "/srv/rw", Writable: true},
		{Source: data, Target: "/etc/recipe"}}, TrustedCAs: newTestCA(t, "recipe").pem}
	script := `id -u; id -g; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; hostname; cat /etc/hostname
echo top $(ls -A /); echo etc $(ls -A /etc); cat /opt/recipe/data/f /etc/recipe/f
touch /opt/recipe/data/x 2>/dev/null || echo ro-bind-refused; touch /srv/rw/y && echo rw-bind-wrote
touch /usr/x 2>/dev/null || echo usr-refused; touch /x 2>/dev/null || echo root-refused; touch /tmp/x /workspace/x && echo tmp-workspace-wrote
awk '$5 == "/" || $5 == "/usr" || $5 == "/tmp" || $5 == "/workspace" || $5 == "/proc" {print $5, $6}' /proc/self/mountinfo
cat /proc/1/cmdline | tr '\0' ' '; echo; pwd; ls /proc/self/fd`
	cmd := func() *Cmd { return Command("/bin/sh", "-c", script) }
	spawned, inProc, errS, errI := runBothLaunchers(t, opts, cmd)
	if errS != nil || errI != nil {
		t.Fatalf("spawned: %v; in process: %v", errS, errI)
	}
	if string(spawned.Stdout) != string(inProc.Stdout) || string(spawned.Stderr) != string(inProc.Stderr) {
		t.Errorf("the two launchers built different sandboxes:\nspawned:\n%s%s\nin process:\n%s%s", spawned.Stdout, spawned.Stderr, inProc.Stdout, inProc.Stderr)
	}
	var top []string
	for _, name := range recipe.HostSystemDirs {
		if _, err := os.Lstat("/" + name); err == nil {
			top = append(top, name)
		}
	}
	top = append(top, "dev", "etc", "opt", "proc", "srv", "tmp", "workspace")
	slices.Sort(top)
	want := []string{
		fmt.Sprintf("%d\n%d\n", SandboxUID, SandboxGID),
		"CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n",
		"NoNewPrivs:\t1\nSeccomp:\t2\n",
		DefaultHostname + "\n" + DefaultHostname + "\n",
		"top " + strings.Join(top, " ") + "\n",
		"bound\nbound\nro-bind-refused\nrw-bind-wrote\nusr-refused\nroot-refused\ntmp-workspace-wrote\n",
		"/ ro,", "/usr ro,", "/tmp rw,", "/workspace rw,", "/proc rw,",
		"/bin/sh -c ", DefaultDir + "\n", "0\n1\n2\n3\n",
	}
	out := string(spawned.Stdout)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the sandbox's view lacks %q:\n%s%s", w, out, spawned.Stderr)
		}
	}
	for _, name := range []string{"passwd", "group", "hosts", "hostname", "nsswitch.conf", "recipe", "ssl"} {
		if !strings.Contains(out, "etc ") || !slices.Contains(strings.Fields(lineWith(out, "etc ")), name) {
			t.Errorf("/etc lacks %s: %q", name, lineWith(out, "etc "))
		}
	}
	if _, err := os.Stat(filepath.Join(data, "y")); err != nil {
		t.Errorf("the writable bind did not reach the host: %v", err)
	}
	requireNothingLeft(t, marker)
}

// lineWith is the first line of out that starts with prefix.
func lineWith(out, prefix string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestRecipeFailures: a sandbox that cannot be built, or a program that
// cannot run in it, fails Run with an error naming the option, path or
// step, and the same from both launchers.
func TestRecipeFailures(t *testing.T) {
	requireSandbox(t)
	marker := "RECIPE_MARK=" + t.Name()
	file := filepath.Join(sharedTempDir(t), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type check func(err error) bool
	is := func(target error) check { return func(err error) bool { return errors.Is(err, target) } }
	says := func(parts ...string) check {
		return func(err error) bool {
			for _, p := range parts {
				if !strings.Contains(err.Error(), p) {
					return false
				}
			}
			return true
		}
	}
	cases := []struct {
		name string
		opts Options
		cmd  func() *Cmd
		want []check
		exit int // the Result's exit code, when Run returns one
	}{
		{"missing program", Options{}, func() *Cmd { return Command("no-such-program-xyz") }, []check{is(ErrNotFound), says("no-such-program-xyz", "PATH")}, 127},
		{"missing program by path", Options{}, func() *Cmd { return Command("/usr/bin/no-such-program-xyz") }, []check{is(ErrNotFound)}, 127},
		{"not executable", Options{}, func() *Cmd { return Command("/etc/passwd") }, []check{is(os.ErrPermission), says("/etc/passwd", "not executable")}, 126},
		{"a directory", Options{}, func() *Cmd { return Command("/usr/bin") }, []check{is(os.ErrPermission), says("/usr/bin")}, 126},
		{"missing Cmd.Dir", Options{}, func() *Cmd { c := Command("true"); c.Dir = "/no/such/dir"; return c }, []check{is(unix.ENOENT), says("Cmd.Dir", "/no/such/dir")}, 0},
		{"Cmd.Dir outside the root", Options{}, func() *Cmd { c := Command("true"); c.Dir = "/proc/self/fd/1"; return c }, []check{says("Cmd.Dir")}, 0},
		{"missing bind source", Options{Binds: []Bind{{Source: "/no/such/source", Target: "/data"}}}, func() *Cmd { return Command("true") },
			[]check{is(ErrInvalidOption), says("Options.Binds[0]", "/no/such/source", "no such file")}, 0},
		{"missing rootfs", Options{Root: RootDir("/no/such/rootfs")}, func() *Cmd { return Command("true") },
			[]check{is(ErrInvalidOption), says("Options.Root (RootDir)", "/no/such/rootfs", "no such file")}, 0},
		{"workspace not a directory", Options{Workspace: HostWorkspace{Dir: file}}, func() *Cmd { return Command("true") },
			[]check{is(ErrInvalidOption), says("Options.Workspace (HostWorkspace.Dir)", file, "not a directory")}, 0},
		{"bind target in a read-only host tree", Options{Binds: []Bind{{Source: file, Target: "/usr/no-such-dir/f"}}}, func() *Cmd { return Command("true") },
			[]check{is(unix.EROFS), says("create target", "/usr/no-such-dir")}, 0},
	}
	if os.Getuid() == 0 {
		dir := t.TempDir() // its parent is 0700 root: the sandbox uid cannot reach it
		cases = append(cases, struct {
			name string
			opts Options
			cmd  func() *Cmd
			want []check
			exit int
		}{"bind source unreachable", Options{Binds: []Bind{{Source: dir, Target: "/data"}}}, func() *Cmd { return Command("true") },
			[]check{is(os.ErrPermission), says("Options.Binds[0]", dir)}, 0})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Env = []string{marker}
			spawned, inProc, errS, errI := runBothLaunchers(t, c.opts, c.cmd)
			if errS == nil || errI == nil {
				t.Fatalf("spawned: %v; in process: %v; want both to fail", errS, errI)
			}
			if errS.Error() != errI.Error() {
				t.Errorf("spawned: %v\nin process: %v\nwant the same error", errS, errI)
			}
			for i, ok := range c.want {
				if !ok(errS) {
					t.Errorf("check %d fails on %v", i, errS)
				}
			}
			if (spawned == nil) != (inProc == nil) || spawned != nil && (spawned.ExitCode != c.exit || inProc.ExitCode != c.exit) {
				t.Errorf("results: spawned %+v, in process %+v; want exit %d", spawned, inProc, c.exit)
			}
			t.Logf("%v", errS)
		})
	}
	requireNothingLeft(t, marker)
}

// TestRecipeTargetsBeneathTrees: a bind's target may lie beneath what the
// sandbox takes from elsewhere: a directory the host's /usr has, the
// workspace (where the missing parents are made), another bind, a
// symlink at the top of the root (merged-/usr hosts).
func TestRecipeTargetsBeneathTrees(t *testing.T) {
	requireSandbox(t)
	data := sharedTempDir(t)
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory inside the host's /usr that the shell and cat do not
	// need (bin, lib...), which the bind hides.
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
	binds := []Bind{{Source: data, Target: under}, {Source: data, Target: "/srv/outer", Writable: true},
		{Source: data, Target: "/srv/outer/inner/deeper"}, {Source: data, Target: DefaultDir + "/a/b"}}
	script := fmt.Sprintf("cat %s/f /srv/outer/inner/deeper/f %s/a/b/f", under, DefaultDir)
	if st, err := os.Lstat("/lib"); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if target, err := os.Readlink("/lib"); err == nil && strings.HasPrefix(strings.TrimPrefix(target, "/"), "usr/lib") {
			if des, _ := os.ReadDir("/usr/lib"); len(des) > 0 {
				// Beneath the /lib link: it resolves inside the root.
				for _, de := range des {
					if de.IsDir() && !strings.HasPrefix(de.Name(), "x86_64") && !strings.HasPrefix(de.Name(), "aarch64") && de.Name() != "locale" {
						binds = append(binds, Bind{Source: data, Target: "/lib/" + de.Name()})
						script += " /usr/lib/" + de.Name() + "/f"
						break
					}
				}
			}
		}
	}
	spawned, inProc, errS, errI := runBothLaunchers(t, Options{Binds: binds}, func() *Cmd { return Command("/bin/sh", "-c", script) })
	for _, r := range []struct {
		name string
		res  *Result
		err  error
	}{{"spawned", spawned, errS}, {"in process", inProc, errI}} {
		want := strings.Repeat("bound\n", strings.Count(script, "/f"))
		if r.err != nil || !r.res.Success() || string(r.res.Stdout) != want {
			t.Errorf("%s: %v, stdout %q, stderr %q; want %q", r.name, r.err, r.res.Stdout, r.res.Stderr, want)
		}
	}
	// The missing parents of /srv/outer/inner/deeper were made in the
	// writable bind, on the host: that is where the target is.
	if st, err := os.Stat(filepath.Join(data, "inner", "deeper")); err != nil || !st.IsDir() {
		t.Errorf("the target beneath a writable bind: %v", err)
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
		s := New(testOpts(Options{Start: Pool{Size: pool}}))
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
