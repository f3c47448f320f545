package validate

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDockerContainer runs the sandbox CLI inside Docker containers of a
// dockerd of its own, with the settings deploy/README.md documents for
// "docker run", as root and as uid 1000 with gid 0 (a pod's runAsUser
// without runAsGroup): "sandbox run --best-effort -- echo hi" prints hi, and
// the library with its default Options (a session whose workspace a keeper
// process holds) runs programs and takes files in and out. Without
// seccomp=unconfined (Docker's default profile) and without
// systempaths=unconfined (a masked /proc) the run is refused with the
// setting that fixes it in the message. The image is a root directory made
// here (the CLI and the root package's test binary built static, echo, sh
// and cat and their libraries), imported from a tar: no registry.
// --best-effort because this host's cgroups are v1, which a container gets
// read-only.
func TestDockerContainer(t *testing.T) {
	began := time.Now()
	documented := documentedDockerOpts(t)
	for _, need := range []string{"seccomp=unconfined", "systempaths=unconfined"} {
		if !slices.Contains(documented, need) {
			t.Fatalf("README.md's docker run has no --security-opt %s (it has %q); the sandbox needs it", need, documented)
		}
	}
	d := startDockerd(t)
	started := time.Now()
	image := d.importImage(t, imageRoot(t))
	imported := time.Now()

	without := func(opt string) []string {
		return slices.DeleteFunc(slices.Clone(documented), func(o string) bool { return o == opt })
	}
	for _, user := range []string{"0:0", "1000:0"} {
		code, out, errOut := d.run(t, user, documented, nil, image, "/sandbox", "run", "--best-effort", "--", "echo", "hi")
		if code != 0 || out != "hi\n" {
			t.Errorf("as %s with the documented settings %q: exit %d, stdout %q, stderr %q; want exit 0 and hi", user, documented, code, out, errOut)
		}
		// The library with its default Options, whose session workspace
		// lives in a keeper process: the root package's test helper
		// "echo" runs a sandbox from both launchers (spawner, in process) and a
		// session that takes files in and gives them back.
		code, out, errOut = d.run(t, user, documented, []string{"-e", "SBXTEST_HELPER=echo"}, image, "/sandbox.test")
		for _, want := range []string{`inprocess=false exit=0 out="hi\n"`, `inprocess=true exit=0 out="hi\n"`,
			`session out="from the caller\n" file="from the caller\nfrom the run\n"`} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("as %s, the library with default Options: exit %d, stdout:\n%s\nstderr %q; want %s", user, code, out, errOut, want)
			}
		}
		for _, c := range []struct {
			name        string
			opts, extra []string
			fix         []string // in the message's first line
		}{
			{"Docker's default seccomp profile", without("seccomp=unconfined"), nil, []string{"seccomp=unconfined", "user namespace"}},
			{"a masked /proc", without("systempaths=unconfined"), nil, []string{"systempaths=unconfined", "procMount: Unmasked"}},
			// Root needs CAP_SETUID and CAP_SETGID to map its sandboxes
			// to nobody; a uid that is not root needs no capability.
			{"--cap-drop ALL", documented, []string{"--cap-drop", "ALL"}, map[string][]string{
				"0:0": {"--cap-add SETUID --cap-add SETGID"}, "1000:0": nil}[user]},
		} {
			code, out, errOut := d.run(t, user, c.opts, c.extra, image, "/sandbox", "run", "--best-effort", "--", "echo", "hi")
			if c.fix == nil {
				if code != 0 || out != "hi\n" {
					t.Errorf("as %s with %s (%q): exit %d, stdout %q, stderr %q; want exit 0 and hi", user, c.name, c.opts, code, out, errOut)
				}
				continue
			}
			first, _, _ := strings.Cut(errOut, "\n")
			for _, f := range c.fix {
				if code == 0 || out != "" || !strings.Contains(first, f) {
					t.Errorf("as %s with %s (%q): exit %d, stdout %q, stderr %q; want a refusal naming %q", user, c.name, c.opts, code, out, errOut, f)
					break
				}
			}
		}
	}
	ran := time.Now()
	d.stop(t)
	t.Logf("dockerd started in %v, image built and imported in %v, 10 containers ran in %v, dockerd stopped and cleaned up in %v; %v in all",
		started.Sub(began).Round(time.Millisecond), imported.Sub(started).Round(time.Millisecond),
		ran.Sub(imported).Round(time.Millisecond), time.Since(ran).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// documentedDockerOpts are the --security-opt values of the "docker run"
// command in README.md.
func documentedDockerOpts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The first fenced block that runs docker run, continuation lines and
	// all.
	var block, cur []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !strings.HasPrefix(line, "```"):
			cur = append(cur, line)
			continue
		case !inBlock:
			inBlock, cur = true, nil
			continue
		}
		inBlock = false
		if strings.Contains(strings.Join(cur, "\n"), "docker run ") {
			block = cur
			break
		}
	}
	if block == nil {
		t.Fatal("README.md has no fenced block with a docker run command")
	}
	var opts []string
	for _, m := range regexp.MustCompile(`--security-opt[= ]+(\S+)`).FindAllStringSubmatch(strings.Join(block, "\n"), -1) {
		opts = append(opts, m[1])
	}
	return opts
}

// dockerd is a Docker daemon of the test's own: every path of it in a
// temporary directory, in a mount namespace of its own whose /run is a
// tmpfs (containerd puts its shims' sockets and dockerd its plugin
// directory there, whatever their roots), with no networking of its own and
// its containers' cgroups beneath this process's.
type dockerd struct {
	dir, sock, client, cgroupParent string
	cmd                             *exec.Cmd
	exited                          chan error
	stopped                         bool
}

func startDockerd(t *testing.T) *dockerd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("dockerd needs root, and this runs as uid %d", os.Geteuid())
	}
	bin, err := exec.LookPath("dockerd")
	if err != nil {
		t.Skip("dockerd is not installed (Debian's docker.io package; make test installs it as root)")
	}
	// The client of dockerd's own package, where it is beside it.
	client := filepath.Join(filepath.Dir(filepath.Dir(bin)), "bin", "docker")
	if _, err := os.Stat(client); err != nil {
		if client, err = exec.LookPath("docker"); err != nil {
			t.Skip("the docker client is not installed (Debian's docker.io package)")
		}
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is missing: it gives dockerd a mount namespace of its own")
	}
	d := &dockerd{dir: t.TempDir(), client: client, exited: make(chan error, 1)}
	d.sock = filepath.Join(d.dir, "docker.sock")
	// A name no other test run uses; relative, so that runc makes each
	// container's cgroup beneath its own, which is this process's.
	d.cgroupParent = fmt.Sprintf("sandbox-docker-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	// The daemon's key file (else in /etc/docker) in the directory too.
	config := filepath.Join(d.dir, "daemon.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"deprecated-key-path": %q}`, filepath.Join(d.dir, "key.json"))), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(d.dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// unshare makes the namespace's mounts private, so nothing mounted in
	// it (the tmpfs, dockerd's bind of its data root, the containers')
	// reaches the host's, and it all goes with the namespace's last
	// process; sh mounts the tmpfs and becomes dockerd.
	d.cmd = exec.Command(unshare, "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", `mount -t tmpfs -o mode=0755,size=16m sandbox-docker-test /run && exec "$@"`, "sh",
		bin, "--config-file", config,
		"--data-root", filepath.Join(d.dir, "data"), "--exec-root", filepath.Join(d.dir, "exec"),
		"--pidfile", filepath.Join(d.dir, "dockerd.pid"), "-H", "unix://"+d.sock,
		"--iptables=false", "--ip6tables=false", "--bridge=none", "--ip-forward=false", "--ip-masq=false",
		// vfs: plain directories, so no overlay mounts to leave behind,
		// and it works on any file system the temporary directory is on.
		"--storage-driver=vfs", "--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", d.cgroupParent)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		t.Skipf("dockerd could not start: %v", err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := d.docker("version", "--format", "{{.Server.Version}}").CombinedOutput()
		if err == nil {
			break
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			t.Skipf("dockerd could not start: %v\n%s", err, d.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Skipf("dockerd did not answer within 30s: %v: %s\n%s", err, out, d.logTail())
		}
	}
	return d
}

// docker is a client command against this daemon, with a configuration
// directory of its own.
func (d *dockerd) docker(args ...string) *exec.Cmd {
	cmd := exec.Command(d.client, append([]string{"-H", "unix://" + d.sock}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+filepath.Join(d.dir, "client"))
	return cmd
}

func (d *dockerd) logTail() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// importImage makes an image of root with docker import: no registry.
func (d *dockerd) importImage(t *testing.T, root string) string {
	t.Helper()
	const name = "sandbox-docker-test:latest"
	tar := exec.Command("tar", "-C", root, "--numeric-owner", "--owner=0", "--group=0", "-cf", "-", ".")
	imp := d.docker("import", "-", name)
	pipe, err := tar.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var tarErr bytes.Buffer
	tar.Stderr = &tarErr
	if err := tar.Start(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	out, err := imp.CombinedOutput()
	if werr := tar.Wait(); werr != nil {
		t.Fatalf("tar: %v\n%s", werr, tarErr.String())
	}
	if err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	return name
}

// run runs args in a new container of image as user, with --security-opt
// opts, the docker run flags extra and no network, and removes it
// afterwards.
func (d *dockerd) run(t *testing.T, user string, opts, extra []string, image string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cargs := append([]string{"run", "--rm", "--network", "none", "--user", user}, extra...)
	for _, o := range opts {
		cargs = append(cargs, "--security-opt", o)
	}
	cmd := d.docker(append(append(cargs, image), args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("docker %q: %v", cargs, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// stop removes any container left, stops dockerd by its pid, and checks
// that nothing of it is left: no process, no mount, no cgroup.
func (d *dockerd) stop(t *testing.T) {
	t.Helper()
	if d.stopped {
		return
	}
	d.stopped = true
	if ids, err := d.docker("ps", "-aq").Output(); err == nil && len(bytes.TrimSpace(ids)) > 0 {
		t.Errorf("containers left running: %s", ids)
		_ = d.docker(append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("dockerd (pid %d) did not stop within 30s of SIGTERM; killing it\n%s", d.cmd.Process.Pid, d.logTail())
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	// containerd and its shims go with dockerd; wait a moment for them,
	// then end any still there (they are this daemon's: they name its
	// directory).
	var left []int
	for i := 0; i < 50; i++ {
		if left = processesNaming(d.dir); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range left {
		t.Errorf("process %d of dockerd outlived it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), d.dir) {
		t.Errorf("mounts left beneath %s:\n%s", d.dir, b)
	}
	for _, dir := range cgroupDirs(d.cgroupParent) {
		if err := removeCgroupTree(dir); err != nil {
			t.Errorf("cgroup %s left: %v", dir, err)
		}
	}
}

// processesNaming lists the processes whose command line holds s.
func processesNaming(s string) []int {
	var pids []int
	des, _ := os.ReadDir("/proc")
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", de.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupDirs lists the directories named name beneath this process's
// cgroup in each hierarchy mounted under /sys/fs/cgroup.
func cgroupDirs(name string) []string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	var own []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if parts := strings.SplitN(sc.Text(), ":", 3); len(parts) == 3 && !slices.Contains(own, parts[2]) {
			own = append(own, parts[2])
		}
	}
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	var dirs []string
	for _, m := range append(mounts, "/sys/fs/cgroup") {
		for _, o := range own {
			if dir := filepath.Join(m, o, name); isDir(dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	return dirs
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// removeCgroupTree removes a cgroup and the cgroups beneath it, deepest
// first: a cgroup directory goes only with rmdir, when empty of cgroups.
func removeCgroupTree(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if de.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, de.Name())); err != nil {
				return err
			}
		}
	}
	return syscall.Rmdir(dir)
}

// imageRoot makes the container's root: the CLI built static at /sandbox
// and the root package's test binary at /sandbox.test (outside the system
// directories a sandbox binds), echo, sh and cat with the shared libraries
// they need (the sandbox binds the container's /bin and /lib*), and a /tmp.
func imageRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	for _, args := range [][]string{
		{"build", "-o", filepath.Join(root, "sandbox"), "./cmd/sandbox"},
		{"test", "-c", "-o", filepath.Join(root, "sandbox.test"), "."},
	} {
		build := exec.Command("go", args...)
		build.Dir = repoRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("CGO_ENABLED=0 go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/bin/echo", "/bin/sh", "/bin/cat"} {
		if err := copyProgram(root, p); err != nil {
			t.Skipf("cannot put %s in the image: %v", p, err)
		}
	}
	return root
}

// copyProgram copies the ELF program at path into root at the same path,
// with its interpreter and the shared libraries it needs, found in the
// usual directories, each at the path the dynamic loader looks at.
func copyProgram(root, path string) error {
	done := map[string]bool{}
	var add func(src, dst string) error
	add = func(src, dst string) error {
		if done[dst] {
			return nil
		}
		done[dst] = true
		if err := copyFile(src, filepath.Join(root, dst)); err != nil {
			return err
		}
		f, err := elf.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return err
			}
			interp := string(bytes.TrimRight(b, "\x00"))
			if err := add(interp, interp); err != nil {
				return err
			}
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return err
		}
		for _, lib := range libs {
			found := false
			dirs, _ := filepath.Glob("/lib/*-linux-gnu")
			for _, dir := range append(dirs, "/lib64", "/lib", "/usr/lib64", "/usr/lib") {
				if p := filepath.Join(dir, lib); isFile(p) {
					if err := add(p, p); err != nil {
						return err
					}
					found = true
					break
				}
			}
			if !found {
				return fmt.Errorf("%s needs %s, which is in none of the usual directories", src, lib)
			}
		}
		return nil
	}
	return add(path, path)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// copyFile copies src's content (through symlinks) to dst, with its mode.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
