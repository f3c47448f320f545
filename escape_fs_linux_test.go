//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/attack"
	"golang.org/x/sys/unix"
)

// The escape suite's filesystem and kernel-interface attacks: the host
// binary (exe), leaked fds and working directories (fds), the root and
// its mounts (root, swap), cgroup v1 release_agent (cgroup) and terminal
// injection (tiocsti). See internal/testsupport/attack for what each one tries.

// fileHash is the SHA-256 of the file at p.
func fileHash(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// fileIdentity is p's "dev:ino", as the exe attack compares them.
func fileIdentity(p string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// hostBinaryIDs lists the identities of the caller's binary and of every
// sealed copy of it that this process and the spawner hold: what a program
// must never reach from inside.
func hostBinaryIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	add := func(p string) {
		if id, err := fileIdentity(p); err == nil && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	add(self)
	add("/proc/self/exe")
	procs := []string{"self"}
	if pid := spawnerPID(); pid != 0 {
		procs = append(procs, strconv.Itoa(pid))
		add(fmt.Sprintf("/proc/%d/exe", pid))
	}
	for _, p := range procs {
		des, _ := os.ReadDir("/proc/" + p + "/fd")
		for _, de := range des {
			fd := "/proc/" + p + "/fd/" + de.Name()
			if l, err := os.Readlink(fd); err == nil && strings.Contains(l, "sandbox-self") {
				add(fd)
			}
		}
	}
	return ids
}

// TestEscapeExeOverwrite models CVE-2019-5736, runc's binary overwritten
// through /proc/self/exe: from inside, every exe and mapped file /proc
// names is opened for writing (directly, and O_PATH first and then again
// through /proc/self/fd), and the host binary and its sealed copies are
// looked for by identity. What stops it: the program replaced the init by
// exec, so no host binary runs in the sandbox (the spawner re-execs a
// sealed memfd copy, never a path); the program's own binary is a
// read-only bind (EROFS) and busy (ETXTBSY). From the host, the caller's
// binary and the bound copy hash the same before and after.
func TestEscapeExeOverwrite(t *testing.T) {
	requireSandbox(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bind := helperBind(t)
	before := [2][32]byte{fileHash(t, self), fileHash(t, bind.Source)}
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("InProcess=%v", inProcess), func(t *testing.T) {
			forEachRoot(t, func(t *testing.T, root escapeRoot) {
				s := newTest(t, attackOpts(t, root, Options{Start: inProcessIf(inProcess)}))
				// A first run starts the spawner, whose copy is then listed too.
				if _, err := s.Run(context.Background(), Command("true")); err != nil {
					t.Fatal(err)
				}
				ids := hostBinaryIDs(t)
				t.Logf("host binary identities: %v", ids)
				_, rep := runAttack(t, s, "exe", ids...)
				if rep == nil {
					t.Fatal("attack exe printed no report")
				}
				requireBlocked(t, rep, 12)
				for _, what := range []string{"open /proc/self/exe O_WRONLY", "open /proc/1/exe O_RDWR",
					"reopen /proc/self/exe through", "find the host binary among the mappings", "open " + helperPath + " O_WRONLY"} {
					if _, ok := rep.Find(what); !ok {
						t.Errorf("attack exe made no attempt %q", what)
					}
				}
				// The program is pid 1 and is the bound helper itself: the
				// init that ran before it is gone.
				if got := rep.Seen["readlink /proc/1/exe"]; got != helperPath {
					t.Errorf("/proc/1/exe = %q, want %s", got, helperPath)
				}
			})
		})
	}
	if after := [2][32]byte{fileHash(t, self), fileHash(t, bind.Source)}; after != before {
		t.Errorf("the caller's binary or the bound copy changed: before %x, after %x", before, after)
	}
}

// TestEscapeLeakedFds models CVE-2024-21626 (runc "Leaky Vessels"): runc
// leaked a directory fd of the host into the container, and a working
// directory of /proc/self/fd/7 put the program in the host's tree. The
// caller here holds a host directory and a host file open without
// close-on-exec and runs from a host directory; inside, the attack must
// find only fds 0-2, and ".." from its working directory and from every
// directory fd must end at the sandbox's own root. What stops it: the init
// closes every fd above 2 before the exec (close_range), pivot_root
// detaches the old root, and Cmd.Dir is checked to lie inside the new root
// (a Dir of /proc/self/fd/N fails the run).
func TestEscapeLeakedFds(t *testing.T) {
	requireSandbox(t)
	// Raw opens without O_CLOEXEC: inherited by every process this test
	// process starts, as a careless caller's would be.
	dirfd, err := unix.Open(os.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	filefd, err := unix.Open("/etc/passwd", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(filefd)
	if wd, _ := os.Getwd(); !strings.HasPrefix(wd, "/") {
		t.Fatalf("working directory %q", wd)
	}
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		for _, inProcess := range []bool{false, true} {
			t.Run(fmt.Sprintf("InProcess=%v", inProcess), func(t *testing.T) {
				_, rep := mustReport(t, root, Options{Start: inProcessIf(inProcess)}, "fds")
				// The leaked-fd attempts count as worked; no other attempt
				// may have been needed to fail this.
				requireBlocked(t, rep, 4)
				if got := rep.Seen["inherited fds"]; got != "[0 1 2]" {
					t.Errorf("fds inherited inside: %s, want [0 1 2] (%v)", got, rep.Seen)
				}
				if got := rep.Seen["getcwd"]; got != DefaultDir {
					t.Errorf("working directory inside: %q, want %s", got, DefaultDir)
				}
			})
		}
		// The runc exploit's working directory: an fd the init might hold
		// while it changes to Cmd.Dir. The run must fail, or run inside.
		s := newTest(t, attackOpts(t, root, Options{}))
		for fd := 3; fd <= 12; fd++ {
			cmd := helperCmd("attack", "fds")
			cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", fd)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := s.Run(ctx, cmd)
			cancel()
			if err != nil {
				var se *SetupError
				if !errors.As(err, &se) {
					t.Errorf("Dir %s: %v, want a *SetupError", cmd.Dir, err)
				} else if fd == 3 {
					t.Logf("Dir %s: %v", cmd.Dir, err)
				}
				continue
			}
			rep, perr := attack.Parse(res.Stdout)
			if perr != nil {
				t.Errorf("Dir %s: ran without a report: %v\n%s", cmd.Dir, perr, res.Stderr)
				continue
			}
			t.Logf("Dir %s ran, in %s", cmd.Dir, rep.Seen["getcwd"])
			requireRan(t, s, rep)
			requireBlocked(t, rep, 4)
		}
	})
}

// TestEscapeRoot tries the ways out of a root: "/..", the chroot-twice
// escape, an fd kept from before a chroot, pivot_root, symlinks to "/" and
// "../../..", mount(2) of proc, tmpfs, sysfs and a bind of "/", read-write
// remounts, unmounting the /proc masks, and the fd-based mount API
// (fsopen, fspick, open_tree, move_mount, mount_setattr). What stops it:
// the root is a pivot_root'ed tmpfs with the old root detached, so ".."
// ends at the sandbox's "/"; the seccomp policy refuses every mount and
// root-changing call (reported in Denials), and the program holds no
// capability (which would refuse them again).
func TestEscapeRoot(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		res, rep := mustReport(t, root, Options{}, "root")
		requireBlocked(t, rep, 35)
		for _, what := range []string{"chroot /tmp/sbxtest-jail", "pivot_root", "mount proc", "bind /",
			"remount /usr read-write", "umount2 /proc/keys", "fsopen tmpfs", "fspick /usr", "open_tree clone /",
			"move_mount the mask", "mount_setattr clear read-only on /usr"} {
			requireRefusedBy(t, rep, what, "EPERM")
		}
		requireDenied(t, res, "mount", "umount2", "chroot", "pivot_root", "fsopen", "fspick", "open_tree",
			"move_mount", "mount_setattr")
	})
}

// TestEscapeBindSymlinkRace models CVE-2021-30465: runc resolved a mount
// target inside the container's rootfs by path and then mounted by path,
// and a container sharing a volume swapped a path component for a symlink
// in between, so the mount landed on the host. Here one Run of a session
// swaps /workspace/a (in the workspace every Run shares) between a
// directory and symlinks to "/", "/etc", "../../../.." and a /proc magic
// link, while other Runs of the same session start with a bind of a host
// directory at /workspace/a/var. Each of them must either fail with a
// setup error, or run with the bind mounted at one place inside its root
// where the path led: /workspace/a/var, or /var and /etc/var through
// the symlinks (the program can so move a caller's bind within its own
// root, which shows it nothing new). The host's mount tables (this
// process's and the spawner's) must gain no mount of the test's
// (testMounts): none of the bound directory, none at the init's staging
// point. What stops it: the init resolves every target beneath the new
// root with openat2 RESOLVE_IN_ROOT and mounts on the fd it got
// (move_mount), in its own mount namespace.
//
// The swapped component is the target's parent, not the target: in the
// swapping Run's own namespace the target is a mount point (its own copy
// of the bind), which cannot be renamed.
func TestEscapeBindSymlinkRace(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		src := sharedTempDir(t)
		marker := fmt.Sprintf("sbxtest-marker-%d", time.Now().UnixNano())
		if err := os.WriteFile(filepath.Join(src, marker), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The bind's root as mountinfo shows it; on the host it lies under
		// /tmp, which inside is the sandbox's own tmpfs, so seeing the
		// marker's host path inside means a host tree was mounted there.
		srcRoot, err := filepath.EvalSymlinks(src)
		if err != nil {
			t.Fatal(err)
		}
		hostOnly := filepath.Join(srcRoot, marker)
		// The target's last name exists on hosts (/var) but not in the
		// sandbox's root: a target resolved against the host's tree would
		// find it and mount there, out of the sandbox's sight, where a target
		// resolved inside the root makes a new /var.
		s := newTest(t, attackOpts(t, root, Options{Binds: []Bind{{Source: src, Target: "/workspace/a/var"}}}))
		landed := func() (*Result, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return s.Run(ctx, helperCmd("attack", "landed", srcRoot, marker, hostOnly,
				"/workspace/a/var", "/var", "/etc/var", "/", "/etc", "/workspace", "/workspace/a", "/tmp"))
		}
		// A first run, undisturbed: the bind is where it was asked for.
		res, err := landed()
		if err != nil {
			t.Fatal(err)
		}
		rep, err := attack.Parse(res.Stdout)
		if err != nil {
			t.Fatalf("%v\n%s", err, res.Stderr)
		}
		requireRan(t, s, rep)
		if rep.Seen["mounted at"] != "/workspace/a/var" || rep.Seen["marker in"] != "/workspace/a/var" {
			t.Fatalf("undisturbed bind: %v", rep.Seen)
		}
		pid := spawnerPID()
		if pid == 0 {
			t.Fatal("no spawner")
		}
		spawnerMounts := fmt.Sprintf("/proc/%d/mountinfo", pid)
		hostBefore, spawnerBefore := testMounts(t, "/proc/self/mountinfo"), testMounts(t, spawnerMounts)

		swapCtx, stopSwap := context.WithTimeout(context.Background(), 90*time.Second)
		defer stopSwap()
		var swapRes *Result
		var swapErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			swapRes, swapErr = s.Run(swapCtx, helperCmd("attack", "swap", "/workspace/a", "/workspace/stop", "60s"))
		}()
		// Let the swapping start before the first victim.
		if !waitFor(func() bool {
			es, err := s.ReadDir(DefaultDir)
			return err == nil && slices.ContainsFunc(es, func(e WorkspaceEntry) bool { return strings.HasPrefix(e.Name, ".a-link") })
		}) {
			t.Fatal("the swapping run never started")
		}

		const runs, parallel = 60, 3
		var mu sync.Mutex
		outcomes := map[string]int{}
		sem := make(chan struct{}, parallel)
		var vg sync.WaitGroup
		for i := 0; i < runs; i++ {
			vg.Add(1)
			sem <- struct{}{}
			go func() {
				defer vg.Done()
				defer func() { <-sem }()
				res, err := landed()
				var outcome string
				switch {
				case err != nil:
					var se *SetupError
					if !errors.As(err, &se) {
						t.Errorf("victim run: %v, want success or a *SetupError", err)
					}
					outcome = "setup error"
					if se != nil {
						outcome += ": " + se.Op
					}
				default:
					rep, perr := attack.Parse(res.Stdout)
					if perr != nil {
						t.Errorf("victim run without a report: %v %v\n%s", res.Err(), perr, res.Stderr)
						return
					}
					for _, a := range rep.Worked() {
						t.Errorf("victim run: %q worked (%v)", a.What, rep.Seen)
					}
					// The directory that was /workspace/a may have been
					// renamed since (the swapping goes on), and the mount
					// moved with it: only /var and /etc/var stay put.
					at := rep.Seen["mounted at"]
					switch {
					case at == "/var" || at == "/etc/var":
						if rep.Seen["marker through mount point"] != at {
							t.Errorf("bind mounted at %s, but the marker is not seen there: %v", at, rep.Seen)
						}
					case workspaceMount.MatchString(at):
						at = "the workspace"
					default:
						t.Errorf("bind mounted at %q: want one place, /workspace/a/var or where a symlink led (%v)", at, rep.Seen)
					}
					outcome = "mounted at " + at
				}
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			}()
		}
		vg.Wait()
		if err := s.WriteFile("/workspace/stop", nil, 0o644); err != nil {
			t.Error(err)
		}
		wg.Wait()
		t.Logf("victim runs: %v", outcomes)
		if swapErr != nil {
			t.Fatalf("swapping run: %v", swapErr)
		}
		swapRep, err := attack.Parse(swapRes.Stdout)
		if err != nil {
			t.Fatalf("swapping run: %v\n%s", err, swapRes.Stderr)
		}
		t.Logf("swapping run: %v", swapRep.Seen)
		if n, _ := strconv.Atoi(swapRep.Seen["swaps"]); n == 0 {
			t.Errorf("no swaps made: %v", swapRep.Seen)
		}
		// The race must have been run for real: some victims met a symlink.
		if outcomes["mounted at the workspace"] == runs {
			t.Errorf("every victim run found the directory: the race was never met (%v)", outcomes)
		}

		for name, tab := range map[string]struct {
			path, before string
		}{"this process": {"/proc/self/mountinfo", hostBefore}, "the spawner": {spawnerMounts, spawnerBefore}} {
			before := strings.Split(tab.before, "\n")
			for l := range strings.SplitSeq(testMounts(t, tab.path), "\n") {
				if l != "" && !slices.Contains(before, l) {
					t.Errorf("new mount in %s's mount table: %s", name, l)
				}
			}
		}
	})
}

// workspaceMount is where a bind at /workspace/a/var is after the
// directory a was renamed to one of the swap attack's link names.
var workspaceMount = regexp.MustCompile(`^/workspace/(a|\.a-link[0-9]+)/var$`)

// cgroupLimitFiles are the files holding a run's memory and pids limits,
// per controller, for v1 and v2.
var cgroupLimitFiles = map[string][]string{
	"memory": {"memory.limit_in_bytes", "memory.max"},
	"pids":   {"pids.max"},
}

// hostCgroupLimits reads, from the host, the memory and pids limits of the
// cgroups process pid is in.
func hostCgroupLimits(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, ctl := range append(strings.Split(f[1], ","), "") {
			dir := filepath.Join("/sys/fs/cgroup", ctl, f[2])
			if f[1] == "" {
				dir = filepath.Join("/sys/fs/cgroup/unified", f[2])
				if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
					dir = filepath.Join("/sys/fs/cgroup", f[2])
				}
			}
			for name, files := range cgroupLimitFiles {
				for _, file := range files {
					if v, err := os.ReadFile(filepath.Join(dir, file)); err == nil && got[name] == "" {
						if s := strings.TrimSpace(string(v)); s != "max" && s != "9223372036854771712" {
							got[name] = s
						}
					}
				}
			}
		}
	}
	return got
}

// releaseAgents reads every cgroup v1 hierarchy's release_agent.
func releaseAgents() map[string]string {
	m := map[string]string{}
	paths, _ := filepath.Glob("/sys/fs/cgroup/*/release_agent")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			m[p] = "error: " + err.Error()
		} else {
			m[p] = string(b)
		}
	}
	return m
}

// readyWriter collects what is written to it and closes ready at the
// first "ready" line.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Contains(w.buf.Bytes(), []byte("ready\n")) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *readyWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.buf.Bytes())
}

// TestEscapeCgroup models CVE-2022-0492, the cgroup v1 release_agent
// escape: mount a v1 hierarchy (after new user, mount and cgroup
// namespaces) and write release_agent, which the host kernel runs as root.
// The attack also tries every cgroup control file it can find for writing,
// to lift its limits or leave its cgroup. What stops it: no cgroup
// filesystem is mounted in the sandbox, the seccomp policy refuses mount,
// fsopen, unshare and clone with namespace flags, and the program holds no
// capability. From the host: the run's memory and pids limits are in
// force in its cgroup after every attempt, and every release_agent of the
// host is unchanged.
func TestEscapeCgroup(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		agents := releaseAgents()
		const memory, pids = 128 << 20, 64
		s := newTest(t, attackOpts(t, root, Options{Limits: Limits{Memory: memory, Pids: pids}}))
		mark := fmt.Sprintf("sbxtest-cgroup-%d", time.Now().UnixNano())
		stdin, hold, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		defer hold.Close()
		out := &readyWriter{ready: make(chan struct{})}
		cmd := helperCmd("attack", "cgroup", "wait", mark)
		cmd.Stdin, cmd.Stdout = stdin, out
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		type ran struct {
			res *Result
			err error
		}
		done := make(chan ran, 1)
		go func() {
			res, err := s.Run(ctx, cmd)
			done <- ran{res, err}
		}()
		select {
		case <-out.ready:
		case r := <-done:
			t.Fatalf("attack cgroup ended before it was ready: %v %v\n%s", r.err, r.res, out.bytes())
		}
		// Every attempt is made; the run's cgroup still holds its limits.
		if cgroupErr() == nil {
			pidsOf := hostProcesses(mark)
			if len(pidsOf) != 1 {
				t.Fatalf("host processes of the attack: %v", pidsOf)
			}
			got := hostCgroupLimits(t, pidsOf[0])
			t.Logf("the run's cgroup limits, read from the host after the attack: %v", got)
			if want := map[string]string{"memory": strconv.Itoa(memory), "pids": strconv.Itoa(pids)}; got["memory"] != want["memory"] || got["pids"] != want["pids"] {
				t.Errorf("the run's cgroup limits after the attack: %v, want %v", got, want)
			}
		} else {
			t.Logf("no cgroup for runs here (%v): checking the rlimits that stand in", cgroupErr())
		}
		hold.Close()
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		rep, err := attack.Parse(out.bytes())
		if err != nil {
			t.Fatalf("%v\n%s", err, r.res.Stderr)
		}
		requireRan(t, s, rep)
		requireBlocked(t, rep, 10)
		for _, what := range []string{"mount cgroup -o none,name=sbxtest,release_agent", "fsopen cgroup",
			"clone new user+mount+cgroup namespaces", "unshare user+mount+cgroup namespaces"} {
			requireRefusedBy(t, rep, what, "EPERM")
		}
		requireDenied(t, r.res, "mount", "fsopen", "clone", "unshare")
		for _, l := range r.res.Limits {
			if (l.Name == "memory" || l.Name == "pids") && !l.Enforced {
				t.Errorf("limit %s not enforced: %+v", l.Name, l)
			}
		}
		if after := releaseAgents(); !maps.Equal(agents, after) {
			t.Errorf("host release_agent files changed: before %v, after %v", agents, after)
		}
		t.Logf("release_agent files checked: %d; seen inside: %v", len(agents), rep.Seen)
	})
}

// openPty opens a new pseudo-terminal pair on the host and returns the
// master (non-blocking) and the slave, with canonical mode off so that
// injected bytes are readable at once, and echo on so that they show on
// the master too.
func openPty(t *testing.T) (master int, slave *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { unix.Close(m) })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	sfd, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON
	tio.Lflag |= unix.ECHO
	if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	slave = os.NewFile(uintptr(sfd), "pty")
	t.Cleanup(func() { slave.Close() })
	return m, slave
}

// drain reads what is waiting on fd without blocking: the slave's input
// queue, or the master's output.
func drain(fd int) string {
	unix.SetNonblock(fd, true)
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			return string(got)
		}
		got = append(got, buf[:n]...)
	}
}

// tiocstiRun runs the tiocsti attack in root with the slave of a new pty as
// its Cmd.Stdin, on a terminal of its own when terminal is set, and returns
// the run's result, the attack's report and what arrived on the caller's
// terminal: the slave's input queue (what a shell reading the terminal
// would get) and the master's side (echo). Output is captured, for the
// report.
func tiocstiRun(t *testing.T, root escapeRoot, opts Options, text string, terminal bool) (*Result, *attack.Report, string) {
	t.Helper()
	master, slave := openPty(t)
	cmd := helperCmd("attack", "tiocsti", text)
	cmd.Stdin = slave
	var s *Sandbox
	if terminal {
		cmd.Terminal = &Terminal{}
		// A run with a terminal always starts cold: no pool to check.
		s = New(testOpts(attackOpts(t, root, opts)))
		t.Cleanup(func() { s.Close() })
	} else {
		s = newTest(t, attackOpts(t, root, opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Run(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := attack.Parse(res.Stdout)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	requireRan(t, s, rep)
	arrived := drain(int(slave.Fd())) + drain(master)
	return res, rep, arrived
}

// TestEscapeTIOCSTI models CVE-2017-5226: bubblewrap's sandboxed program
// shared the caller's terminal session and pushed a command into the
// terminal's input with ioctl(TIOCSTI), which the caller's shell ran once
// the sandbox exited. The test gives the program a new pty as its
// Cmd.Stdin, and runs it once with pipes and once on a terminal of its
// own; the attack takes what terminal it finds as its controlling
// terminal and injects a marker with TIOCSTI (plain, and with high
// request bits) and TIOCLINUX on fds 0-2 and /dev/tty. The marker must not
// arrive on the caller's terminal, and Denials must list ioctl. Two things
// stop it: the program never holds a descriptor of the caller's terminal
// (Run copies stdin through a pipe or the sandbox's own pty), and the
// seccomp policy refuses TIOCSTI and TIOCLINUX on the request's low 32
// bits. The subtest without seccomp shows the first alone: the program
// finds no terminal on its pipes, and on its own terminal the injection
// works (unless the kernel refuses it: dev.tty.legacy_tiocsti=0, from
// 6.2) and lands there, not on the caller's.
func TestEscapeTIOCSTI(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		legacy, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti")
		t.Logf("dev.tty.legacy_tiocsti = %q (%v)", strings.TrimSpace(string(legacy)), err)
		marker := fmt.Sprintf("sbxtest-injected-%d", time.Now().UnixNano())
		for _, terminal := range []bool{false, true} {
			// A newline ends the echo of the injection on the program's
			// own terminal before its report.
			res, rep, arrived := tiocstiRun(t, root, Options{}, marker+"\n", terminal)
			requireBlocked(t, rep, 9)
			for _, fd := range []string{"0", "1", "2"} {
				requireRefusedBy(t, rep, "TIOCSTI on fd "+fd, "EPERM")
				requireRefusedBy(t, rep, "TIOCSTI with high request bits on fd "+fd, "EPERM")
				requireRefusedBy(t, rep, "TIOCLINUX paste selection on fd "+fd, "EPERM")
			}
			requireDenied(t, res, "ioctl")
			if arrived != "" {
				t.Errorf("terminal %v: the caller's terminal got %q: the injection arrived", terminal, arrived)
			}
			t.Logf("terminal %v: seen inside: %v; on the caller's terminal: %q", terminal, rep.Seen, arrived)
		}

		t.Run("NoSeccomp", func(t *testing.T) {
			_, rep, arrived := tiocstiRun(t, root, Options{Seccomp: Unconfined{}}, marker+"\n", false)
			if a, _ := rep.Find("TIOCSTI on fd 0"); a.Worked || rep.Seen["fd 0 is a terminal"] != "ENOTTY" || strings.Contains(arrived, marker) {
				t.Errorf("with pipes the program found a terminal: attempt %+v, seen %v, the caller's terminal got %q", a, rep.Seen, arrived)
			}
			res, rep, arrived := tiocstiRun(t, root, Options{Seccomp: Unconfined{}}, marker+"\n", true)
			a, _ := rep.Find("TIOCSTI on fd 0")
			switch {
			case strings.Contains(arrived, marker):
				t.Errorf("the injection into the program's own terminal reached the caller's: %q", arrived)
			case strings.TrimSpace(string(legacy)) == "0":
				t.Logf("the kernel refuses TIOCSTI itself (dev.tty.legacy_tiocsti=0): %+v; the detector is not exercised", a)
			case !a.Worked || !strings.Contains(string(res.Stdout), marker):
				t.Errorf("without seccomp the injection into the program's own terminal should work and echo there: attempt %+v, output %q", a, res.Stdout)
			default:
				t.Logf("without seccomp the marker went into the program's own terminal only: the detector works")
			}
		})
	})
}

// TestEscapeEtcCopies: the host's /etc files a sandbox shows are copies
// in its own root, written from bytes the launcher holds for every run of
// the process. One run tries to change them every way a program can
// (write, truncate, replace, remove, chmod, through /proc/self/root), and
// the next run of the same Sandbox, and of another, must show the host's
// bytes: nothing of one run's /etc reaches the next.
func TestEscapeEtcCopies(t *testing.T) {
	requireSandbox(t)
	files := []string{"/etc/services", "/etc/protocols", "/etc/ld.so.cache", "/etc/host.conf"}
	var present []string
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o004 != 0 {
			present = append(present, f)
		}
	}
	if len(present) == 0 {
		t.Skip("the host has none of the /etc files a sandbox copies:", files)
	}
	list := strings.Join(present, " ")
	attack := `for f in ` + list + `; do
		echo evil >> "$f"; true > "$f"; echo evil > /proc/self/root"$f"
		rm -f "$f"; mv "$f" /tmp/x; chmod 777 "$f"; ln -sf /tmp/evil "$f"
		cat /proc/self/mountinfo > "$f"
	done 2>/dev/null
	for f in ` + list + `; do sha256sum "$f"; done`
	check := `for f in ` + list + `; do sha256sum "$f"; done`
	var want strings.Builder
	for _, f := range present {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "%x  %s\n", sha256.Sum256(b), f)
	}
	sb := newTest(t, Options{})
	defer sb.Close()
	for i, script := range []string{attack, check} {
		res, err := sb.Run(context.Background(), Command("/bin/sh", "-c", script))
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if got := string(res.Stdout); got != want.String() {
			t.Errorf("run %d of one Sandbox (%s): /etc shows\n%s\nwant the host's\n%s\nstderr: %s", i,
				[]string{"attacking", "after the attack"}[i], got, want.String(), res.Stderr)
		}
	}
	if got := sh(t, Options{}, check); got != want.String() {
		t.Errorf("another Sandbox after the attack: /etc shows\n%s\nwant the host's\n%s", got, want.String())
	}
}
