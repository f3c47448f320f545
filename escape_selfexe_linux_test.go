//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The caller's binary must never run in a sandbox, not even as a script's
// interpreter: an execve resolves the interpreter line in the process
// that execs, and the init was a clone of the caller's binary (or of its
// sealed copy) until its last exec, so "#!/proc/self/exe" or
// "#!/proc/1/exe" named that binary. What stops it: the init execs the
// exec shim (internal/execshim), which execs the program; the program's
// interpreter is then resolved where /proc/self/exe and /proc/1/exe are
// the shim, which refuses to run as an interpreter (one line on stderr,
// exit 126).

// selfExeCanary is what the caller's binary prints, and the file it
// writes in the directory it is given, if it ever runs inside: the
// helper the test binary becomes when it finds selfExeCanaryEnv.
const (
	selfExeCanary    = "SELFEXE-CANARY: the caller's binary ran in the sandbox"
	selfExeCanaryDir = "/opt/selfexe"
)

func init() {
	helpers["selfexe-canary"] = func(args []string) int {
		fmt.Println(selfExeCanary, args)
		os.WriteFile(filepath.Join(selfExeCanaryDir, "ran"), []byte(fmt.Sprint(args)), 0o666)
		return 0
	}
}

func TestEscapeSelfExeInterpreter(t *testing.T) {
	requireSandbox(t)
	dir := sharedTempDir(t)
	in := func(name string) string { return selfExeCanaryDir + "/" + name }
	scripts := map[string]string{
		"self.sh":  "#!/proc/self/exe\n",
		"one.sh":   "#!/proc/1/exe\n",
		"outer.sh": "#!" + in("self.sh") + "\n", // an interpreter that is itself a script
		"arg.sh":   "#!/proc/self/exe -test.run=^$\n",
	}
	for fd := range 10 {
		scripts[fmt.Sprintf("fd%d.sh", fd)] = fmt.Sprintf("#!/proc/self/fd/%d\n", fd)
	}
	for name, content := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	type tc struct {
		name    string
		args    []string
		refused bool // the shim must be what refused
	}
	cases := []tc{
		{"script #!/proc/self/exe", []string{in("self.sh"), "arg"}, true},
		{"script #!/proc/self/exe with an argument", []string{in("arg.sh")}, true},
		{"script #!/proc/1/exe", []string{in("one.sh")}, true},
		{"script whose interpreter is such a script", []string{in("outer.sh")}, true},
		{"program /proc/self/exe", []string{"/proc/self/exe", "-test.run=^$"}, true},
		{"program /proc/1/exe", []string{"/proc/1/exe"}, true},
	}
	// A program's own execs resolve /proc/self/exe to the program: bash,
	// here, which runs the script as a bash script. The escape suite's
	// image has bash where the host has it.
	if _, err := os.Stat("/bin/bash"); err == nil {
		cases = append(cases, tc{"bash runs a script #!/proc/self/exe", []string{"/bin/bash", "-c", in("self.sh") + "; " + in("one.sh") + "; exec /proc/self/exe -c 'echo bash-exec'"}, false})
	} else {
		t.Log("the host has no /bin/bash: the case of a script run by bash is left out")
	}
	for fd := range 10 {
		cases = append(cases, tc{fmt.Sprintf("script #!/proc/self/fd/%d", fd), []string{in(fmt.Sprintf("fd%d.sh", fd))}, false})
	}
	for _, mode := range []struct {
		name string
		opts Options
	}{{"cold", Options{}}, {"pooled", Options{Start: Pool{Size: 1}}}, {"in process", Options{Start: InProcess{}}}, {"egress proxy", Options{Network: &Egress{Allow: []string{"example.test"}}}}} {
		t.Run(mode.name, func(t *testing.T) {
			forEachRoot(t, func(t *testing.T, root escapeRoot) {
				opts := mode.opts
				opts.Binds = []Bind{{Source: dir, Target: selfExeCanaryDir, Writable: true}}
				s := newTest(t, root.with(opts))
				for _, c := range cases {
					os.Remove(filepath.Join(dir, "ran"))
					cmd := Command(c.args[0], c.args[1:]...)
					cmd.Env = []string{helperEnv + "=selfexe-canary", "PATH=/usr/bin:/bin"}
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					res, err := s.Run(ctx, cmd)
					cancel()
					var stdout, stderr string
					if res != nil {
						stdout, stderr = string(res.Stdout), string(res.Stderr)
					}
					// Inside: what the program printed.
					if strings.Contains(stdout, selfExeCanary) {
						t.Errorf("%s: the caller's binary ran inside: %q", c.name, stdout)
					}
					// Outside: what it would have left on the host.
					if b, err := os.ReadFile(filepath.Join(dir, "ran")); err == nil {
						t.Errorf("%s: the caller's binary ran inside, and wrote %q", c.name, b)
					}
					if c.refused && (err != nil || res.ExitCode != 126 || !strings.Contains(stderr, "sandbox exec shim: refused")) {
						t.Errorf("%s: err %v, stdout %q, stderr %q; want exit 126 and the exec shim's refusal", c.name, err, stdout, stderr)
					}
					if strings.Contains(c.name, "bash") && (err != nil || !res.Success() || stdout != "bash-exec\n") {
						t.Errorf("%s: err %v, stdout %q, stderr %q; want bash to run the scripts and print bash-exec", c.name, err, stdout, stderr)
					}
					code := -1
					if res != nil {
						code = res.ExitCode
					}
					t.Logf("%s: exit %d, err %v, stderr %q", c.name, code, err, stderr)
				}
			})
		})
	}
}
