//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/testsupport/attack"
)

// The escape suite's attacks on the host itself: its processes, its
// secrets, the kernel's writable files, its network, its resources, and
// the sandbox's lifetime. See internal/testsupport/attack's procs.go, secrets.go,
// writes.go, network.go, exhaust.go and survive.go for what each attack
// tries.

// randomToken is a string no file or process on the host holds by chance.
func randomToken(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// TestEscapeHostProcesses models the breakouts that go through a host
// process: signalling or tracing it (ptrace injection into a process
// outside, the basis of CVE-2019-5736's overwrite of runc through
// /proc/<pid>/exe), reading its memory or environment, and walking its
// /proc/<pid>/root or cwd out to the host's tree (CVE-2024-21626, runc's
// leaked working directory). The PID namespace hides every host process
// (ESRCH, ENOENT), and the seccomp policy refuses ptrace,
// process_vm_readv and pidfd_getfd even on the program's own child.
func TestEscapeHostProcesses(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		s := newTest(t, attackOpts(t, root, Options{}))
		if _, err := s.Run(context.Background(), Command("true")); err != nil { // start the spawner
			t.Fatal(err)
		}
		spid := spawnerPID()
		sentinel := exec.Command("/bin/sleep", "3600")
		if err := sentinel.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sentinel.Process.Kill()
			sentinel.Wait()
		})
		var args []string
		for _, p := range []int{sentinel.Process.Pid, os.Getpid(), spid, os.Getppid()} {
			// A parent that is the host's init (in the test VM) shares its
			// number with the program itself.
			if p > 16 {
				args = append(args, strconv.Itoa(p))
			}
		}
		res, rep := runAttack(t, s, "procs", args...)
		if rep == nil {
			t.Fatalf("no report: %v\n%s\n%s", res.Err(), res.Stdout, res.Stderr)
		}
		requireBlocked(t, rep, 30)
		sp := args[0]
		requireRefusedBy(t, rep, "kill SIGKILL host pid "+sp, "ESRCH")
		requireRefusedBy(t, rep, "kill 0 host pid "+strconv.Itoa(spid), "ESRCH")
		requireRefusedBy(t, rep, "pidfd_open host pid "+sp, "ESRCH")
		requireRefusedBy(t, rep, "ptrace attach host pid "+sp, "EPERM")
		requireRefusedBy(t, rep, "ptrace attach own child", "EPERM")
		requireRefusedBy(t, rep, "ptrace seize own child", "EPERM")
		requireRefusedBy(t, rep, "process_vm_readv own child", "EPERM")
		requireRefusedBy(t, rep, "pidfd_getfd own child", "EPERM")
		for _, w := range []string{"climb out of /proc/1/root", "climb out of /proc/1/cwd"} {
			if _, ok := rep.Find(w); !ok {
				t.Errorf("attack made no attempt %q; saw %v", w, rep.Seen)
			}
		}
		requireDenied(t, res, "ptrace", "process_vm_readv", "pidfd_getfd")
		// Only the program itself (pid 1) at the time it looked.
		if n, _ := strconv.Atoi(rep.Seen["npids"]); n < 1 || n > 3 {
			t.Errorf("the sandbox sees %s processes (%s), want only its own few", rep.Seen["npids"], rep.Seen["pids"])
		}
		for k, v := range rep.Seen {
			if strings.HasPrefix(k, "host pid ") {
				t.Errorf("%s %s: a host pid numbered like a process inside; the attempts on it were skipped", k, v)
			}
		}
		// From the host: the sentinel lives (a killed child of ours would be
		// a zombie until waited for).
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", sentinel.Process.Pid))
		if f := strings.Fields(string(stat)); err != nil || len(f) < 3 || f[2] == "Z" {
			t.Errorf("host sentinel %d is gone: %q %v", sentinel.Process.Pid, stat, err)
		}
	})
}

// TestEscapeSecrets models the reads that turn a sandbox into a data leak:
// /etc/shadow and keys in home directories, the kernel's memory and log
// (/proc/kcore, /proc/kmsg, syslog(2)), keyrings and scheduler dumps that
// name every host task, firmware tables, another process's environment
// (where the caller's tokens live), the host's interfaces and addresses,
// and a host file reached through /proc/<pid>/root. The attack dumps
// everything it can read; the test's secret, set in its own environment
// and in two host files, must be nowhere in it. The generated /etc, the
// masked /proc files, the absent /sys and host /dev, the seccomp refusal
// of syslog and the empty network namespace are what hold.
func TestEscapeSecrets(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		token := randomToken(t, "sbxsecret-")
		visible := randomToken(t, "sbxvisible-")
		t.Setenv("SBXTEST_SECRET_TOKEN", token)
		private := filepath.Join(t.TempDir(), "secret")
		shared := filepath.Join(sharedTempDir(t), "secret")
		for _, f := range []string{private, shared} {
			if err := os.WriteFile(f, []byte(token+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The dump is up to 4 MiB: keep all of it.
		opts := Options{Limits: Limits{Output: 16 << 20}, Env: []string{"SBXTEST_VISIBLE=" + visible}}
		res, rep := mustReport(t, root, opts, "secrets", private, shared)
		requireBlocked(t, rep, 30)
		if bytes.Contains(res.Stdout, []byte(token)) || bytes.Contains(res.Stderr, []byte(token)) {
			i := bytes.Index(res.Stdout, []byte(token))
			t.Errorf("the host's secret is in the attack's output, near:\n%q", res.Stdout[max(0, i-300):i])
		}
		// The dump works: it holds what the sandbox was given.
		if !bytes.Contains(res.Stdout, []byte(visible)) || !bytes.Contains(res.Stdout, []byte("==> /etc/passwd <==")) {
			t.Errorf("the dump (%s bytes) lacks the run's own environment or /etc/passwd", rep.Seen["dumped"])
		}
		host, _ := os.ReadFile("/etc/passwd")
		if p := rep.Seen["passwd"]; !strings.Contains(p, fmt.Sprintf("sandbox:x:%d:%d:", SandboxUID, SandboxGID)) ||
			p == string(host) || strings.Count(p, "\n") > 5 {
			t.Errorf("/etc/passwd inside is not the generated one:\n%s", p)
		}
		for _, w := range []string{"read /etc/shadow", "read /proc/kmsg", "read /dev/kmsg", "read /proc/kcore"} {
			if _, ok := rep.Find(w); !ok {
				t.Errorf("no attempt %q", w)
			}
		}
		requireRefusedBy(t, rep, "read /etc/shadow", "ENOENT")
		requireRefusedBy(t, rep, "syslog read all", "EPERM")
		requireDenied(t, res, "syslog")
		if rep.Seen["interfaces"] != "lo" || rep.Seen["proc net dev"] != "lo" {
			t.Errorf("interfaces inside: %q, /proc/net/dev: %q, want only lo", rep.Seen["interfaces"], rep.Seen["proc net dev"])
		}
		for _, a := range strings.Fields(rep.Seen["addrs"]) {
			if ip, _, err := net.ParseCIDR(a); err != nil || !ip.IsLoopback() {
				t.Errorf("address %s visible inside", a)
			}
		}
	})
}

// TestEscapeKernelWrites models the escapes through the kernel's own
// control files: a core_pattern or uevent_helper pipe the kernel runs as
// host root, sysrq-trigger, raw memory and disk devices made with mknod,
// the runtime's binary overwritten through /proc/self/exe (CVE-2019-5736)
// and setuid binaries (CVE-2021-4034). /proc/sys and sysrq-trigger are
// read-only mounts, /sys and the host's /dev are absent, the program
// holds no CAP_MKNOD and scratch mounts are nodev and nosuid, the root is
// read-only, and no_new_privs with the unmapped host root keeps setuid
// binaries from raising the effective uid. From the host, core_pattern
// and the hostname are unchanged.
func TestEscapeKernelWrites(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		before := hostKernelState()
		_, rep := mustReport(t, root, Options{}, "writes")
		requireBlocked(t, rep, 50)
		requireRefusedBy(t, rep, "mknod /tmp/sbxtest-sda", "EPERM")
		requireRefusedBy(t, rep, "write -1000 to /proc/self/oom_score_adj", "EACCES")
		if a, ok := rep.Find("setuid copy raises euid"); !ok || !strings.Contains(a.Err, "euid stayed 1000") {
			t.Errorf("setuid copy of the helper: %+v (found %v), want it run with euid 1000", a, ok)
		}
		// The image holds no mount: the store drops set-id bits, which
		// TestEscapeImage checks.
		if fi, err := os.Stat("/usr/bin/mount"); root.image == nil && err == nil && fi.Mode()&os.ModeSetuid != 0 {
			if _, ok := rep.Find("setuid /usr/bin/mount mounts a tmpfs"); !ok {
				t.Errorf("the host has a setuid mount, the attack did not try it; setuid files seen: %s", rep.Seen["setuid files"])
			}
		}
		if after := hostKernelState(); after != before {
			t.Errorf("host kernel state changed:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// hostKernelState is what the writes attack must not change, as the host
// sees it.
func hostKernelState() string {
	var s []string
	for _, f := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
		"/proc/sys/kernel/modprobe", "/proc/sys/kernel/sysrq", "/proc/sys/vm/overcommit_memory"} {
		b, _ := os.ReadFile(f)
		s = append(s, strings.TrimSpace(string(b)))
	}
	return strings.Join(s, " | ")
}

// udpCounter answers every datagram on a host address and counts them.
type udpCounter struct {
	net.PacketConn
	n atomic.Int64
}

func listenUDP(t *testing.T, addr string) (*udpCounter, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	u := &udpCounter{PacketConn: pc}
	go func() {
		buf := make([]byte, 256)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			u.n.Add(1)
			pc.WriteTo([]byte("pong"), from)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return u, nil
}

// TestEscapeNetwork goes beyond TestNetworkNone: with the default Options
// the attack tries every host listener the test can offer (TCP and UDP on
// both loopbacks and on the host's own addresses, an abstract and a
// pathname Unix socket), the metadata service, the addresses it can learn,
// raw and packet sockets (CVE-2020-14386, AF_PACKET to root), netlink
// families beyond NETLINK_ROUTE, and changing interfaces, addresses and
// routes. The run's empty network namespace, its own abstract socket
// namespace, the unbound host filesystem, the seccomp socket rules and the
// lack of CAP_NET_RAW and CAP_NET_ADMIN hold; from the host, no listener
// ever saw a connection or datagram.
func TestEscapeNetwork(t *testing.T) {
	requireSandbox(t)
	forEachRoot(t, func(t *testing.T, root escapeRoot) {
		type counted struct {
			name string
			n    func() int64
		}
		var counters []counted
		var args []string
		tcp := func(addr string) *countingListener {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Logf("no TCP listener on %s here: %v", addr, err)
				return nil
			}
			ln.Close()
			cl := listenCounting(t, "tcp", ln.Addr().String())
			counters = append(counters, counted{"tcp " + cl.Addr().String(), cl.n.Load})
			return cl
		}
		for _, a := range []string{"127.0.0.1:0", "[::1]:0"} {
			if cl := tcp(a); cl != nil {
				args = append(args, "tcp="+cl.Addr().String())
			}
		}
		// One listener on every host address: the attack is given the host's
		// non-loopback ones.
		var hostIPs []string
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				hostIPs = append(hostIPs, n.IP.String())
			}
		}
		if len(hostIPs) == 0 {
			t.Log("this host has no address but loopback: no listener on every address")
		} else if all := tcp(":0"); all != nil {
			port := strconv.Itoa(all.Addr().(*net.TCPAddr).Port)
			for _, ip := range hostIPs {
				args = append(args, "tcp="+net.JoinHostPort(ip, port))
			}
		}
		for _, a := range []string{"127.0.0.1:0", "[::1]:0"} {
			u, err := listenUDP(t, a)
			if err != nil {
				t.Logf("no UDP listener on %s here: %v", a, err)
				continue
			}
			counters = append(counters, counted{"udp " + u.LocalAddr().String(), u.n.Load})
			args = append(args, "udp="+u.LocalAddr().String())
		}
		abstract := "@" + randomToken(t, "sbxtest-")
		path := filepath.Join(sharedTempDir(t), "sock")
		for _, a := range []string{abstract, path} {
			cl := listenCounting(t, "unix", a)
			counters = append(counters, counted{"unix " + a, cl.n.Load})
			args = append(args, "unix="+a)
		}
		os.Chmod(path, 0o777)
		// The host side works: each listener counts a connection from here.
		for _, a := range args {
			kind, addr, _ := strings.Cut(a, "=")
			c, err := net.Dial(kind, addr)
			if err != nil {
				t.Fatalf("host-side dial %s: %v", a, err)
			}
			c.Write([]byte("ping"))
			c.Close()
		}
		// One count per dial; the listener on every address gets several.
		total := func() (n int64) {
			for _, c := range counters {
				n += c.n()
			}
			return n
		}
		waitFor(func() bool { return total() >= int64(len(args)) })
		base := make([]int64, len(counters))
		for i, c := range counters {
			if base[i] = c.n(); base[i] == 0 {
				t.Fatalf("host listener %s never counted the host's own connection", c.name)
			}
		}
		t.Logf("listeners: %v", args)

		res, rep := mustReport(t, root, Options{}, "net", args...)
		requireBlocked(t, rep, 30)
		time.Sleep(100 * time.Millisecond) // let a connection that got through be counted
		for i, c := range counters {
			if got := c.n(); got != base[i] {
				t.Errorf("host listener %s was reached from the sandbox: %d new", c.name, got-base[i])
			}
		}
		requireRefusedBy(t, rep, "connect tcp 169.254.169.254:80", "ENETUNREACH")
		requireRefusedBy(t, rep, "connect unix "+abstract, "ECONNREFUSED")
		requireRefusedBy(t, rep, "connect unix "+path, "ENOENT")
		requireRefusedBy(t, rep, "socket AF_INET SOCK_RAW ICMP", "EPERM")
		requireRefusedBy(t, rep, "socket AF_PACKET SOCK_RAW", "EPERM")
		requireRefusedBy(t, rep, "socket netlink NETFILTER", "EPERM")
		requireRefusedBy(t, rep, "RTM_NEWLINK add a dummy interface", "EPERM")
		requireRefusedBy(t, rep, "RTM_NEWADDR add 10.99.0.1/24 to lo", "EPERM")
		requireDenied(t, res, "socket")
	})
}

// requireNothingLeft fails unless, within a second, no host process
// carries marker, and (where runs have cgroups) no run cgroup of this test
// process or its spawner is left: their removal is off Run's return path,
// but quick. The cgroups of prepared sandboxes waiting in a pool
// (SANDBOX_TEST_POOL), which hold just their init, belong to no run yet.
func requireNothingLeft(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for len(hostProcesses(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if pids := hostProcesses(marker); len(pids) > 0 {
		t.Errorf("processes of the run left on the host a second after Run returned: %v", pids)
	}
	if cgroupErr() != nil {
		return
	}
	owners := []int{os.Getpid()}
	ourSpawner.mu.Lock()
	if ourSpawner.c != nil {
		owners = append(owners, ourSpawner.c.pid)
	}
	ourSpawner.mu.Unlock()
	left := func() []string {
		var l []string
		for _, c := range cgroupsMadeBy(t, owners...) {
			if !holdsPreparedInit(c) {
				l = append(l, c)
			}
		}
		return l
	}
	l := left()
	for len(l) > 0 && time.Now().Before(deadline.Add(time.Second)) {
		time.Sleep(20 * time.Millisecond)
		l = left()
	}
	if len(l) > 0 {
		// A pool refilling meanwhile makes cgroups whose init is not
		// in them yet (on v1 it joins one hierarchy after another): one
		// that is still there a moment later, empty or with something
		// else than a prepared init, is left.
		time.Sleep(250 * time.Millisecond)
		still := left()
		l = slices.DeleteFunc(l, func(c string) bool { return !slices.Contains(still, c) })
	}
	for _, c := range l {
		t.Errorf("run cgroup left a second after Run returned: %s", c)
	}
}

// holdsPreparedInit says whether the cgroup dir holds one process, and it
// is an init waiting in a pool (a clone of the spawner, its program not yet
// exec'd).
func holdsPreparedInit(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	pids := strings.Fields(string(b))
	return testPool > 0 && err == nil && len(pids) == 1 && isPreparedInit(pids[0])
}

// memAvailable is the host's MemAvailable in bytes.
func memAvailable() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return -1
}

// TestEscapeExhaustion runs the denial-of-service attacks through the
// attack program, one kind a subtest, and checks the limit that stops
// each, and from the host that the run left nothing behind. None is a
// kernel bug; they model what any shared host meets: fork bombs (the pids
// cgroup), memory bombs that would wake the host's OOM killer (the memory
// cgroup, RLIMIT_DATA at best effort), a full disk (tmpfs size caps), the
// kernel memory of millions of empty tmpfs files (the memory cgroup, which
// charges it; without a cgroup nothing bounds it), fd exhaustion
// (RLIMIT_NOFILE), an output flood into the caller's memory
// (the output cap, and the deadline), and CPU starvation (the CPU quota,
// and the deadline).
func TestEscapeExhaustion(t *testing.T) {
	requireSandbox(t)
	noCgroup := func(t *testing.T, what string) bool {
		if err := cgroupErr(); err != nil {
			t.Logf("not checking %s: it needs a cgroup, and none is writable here: %v", what, err)
			return true
		}
		return false
	}
	t.Run("forkbomb", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			m := randomToken(t, "sbxfork-")
			s := newTest(t, limitOpts(t, attackOpts(t, root, Options{Limits: Limits{Pids: 64}})))
			res, rep, err := runFor(t, s, 30*time.Second, "exhaust", "forkbomb", m)
			if err != nil || rep == nil {
				t.Fatalf("fork bomb did not end by itself with a report: %v %+v\n%s", err, res, res.Stderr)
			}
			requireBlocked(t, rep, 1)
			if n, _ := strconv.Atoi(rep.Seen["forks"]); n >= 64 {
				t.Errorf("forked %d processes under a limit of 64", n)
			}
			if !noCgroup(t, "PidsLimitHit") && !res.PidsLimitHit {
				t.Errorf("Result does not say the pids limit was hit: %+v", res)
			}
			requireNothingLeft(t, m)
		})
	})
	t.Run("execbomb", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			m := randomToken(t, "sbxexec-")
			s := newTest(t, limitOpts(t, attackOpts(t, root, Options{Limits: Limits{Pids: 64}})))
			res, _, err := runFor(t, s, 30*time.Second, "exhaust", "execbomb", m)
			if err != nil || res.Outcome == Timeout {
				t.Fatalf("exec bomb did not end by itself: %v %v", err, res.Outcome)
			}
			if !noCgroup(t, "PidsLimitHit") && !res.PidsLimitHit {
				t.Errorf("Result does not say the pids limit was hit: %+v", res)
			}
			requireNothingLeft(t, m)
		})
	})
	// The Go runtime needs more than 64 MiB of RLIMIT_DATA to start.
	memLimit := int64(64 << 20)
	if cgroupErr() != nil {
		memLimit = 256 << 20
	}
	t.Run("membomb", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			limit := memLimit
			m := randomToken(t, "sbxmem-")
			s := newTest(t, limitOpts(t, attackOpts(t, root, Options{Limits: Limits{Memory: limit}})))
			res, rep, err := runFor(t, s, 60*time.Second, "exhaust", "membomb", m)
			if err != nil {
				t.Fatal(err)
			}
			if cgroupErr() != nil {
				// RLIMIT_DATA: the mapping fails and the attack reports it.
				if rep == nil {
					t.Fatalf("no report under RLIMIT_DATA: %v\n%s", res.Err(), res.Stderr)
				}
				requireBlocked(t, rep, 1)
				if n, _ := strconv.ParseInt(rep.Seen["mapped"], 10, 64); n > limit {
					t.Errorf("mapped %d bytes under a %d RLIMIT_DATA", n, limit)
				}
			} else {
				if res.Outcome != OutOfMemory || res.OOMKills < 1 {
					t.Errorf("outcome %v, OOM kills %d, want out of memory; stdout tail %q", res.Outcome, res.OOMKills, tail(res.Stdout))
				}
				if res.MemoryPeak > limit+limit/8 {
					t.Errorf("peak %d bytes over a %d limit", res.MemoryPeak, limit)
				}
			}
			if a := memAvailable(); a < 256<<20 {
				t.Errorf("host MemAvailable %d MiB after the bomb", a>>20)
			}
			requireNothingLeft(t, m)
		})
	})
	t.Run("diskfill", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			const size = 8 << 20
			m := randomToken(t, "sbxdisk-")
			s := newTest(t, attackOpts(t, root, Options{Limits: Limits{TmpSize: size}, Workspace: SessionWorkspace{Size: size}}))
			_, rep, err := runFor(t, s, 60*time.Second, "exhaust", "diskfill", m)
			if err != nil || rep == nil {
				t.Fatalf("no report: %v", err)
			}
			requireBlocked(t, rep, 3)
			for _, dir := range []string{"/tmp", "/workspace", "/dev/shm"} {
				n, _ := strconv.Atoi(rep.Seen[dir+" bytes"])
				if e := rep.Seen[dir+" err"]; e != "ENOSPC" || n > size || n < size/2 {
					t.Errorf("filling %s: %d bytes, then %s; want ENOSPC at about %d", dir, n, e, size)
				}
			}
			requireNothingLeft(t, m)
		})
	})
	// Empty files take no bytes of a tmpfs's size but about 1 KiB of
	// kernel memory each: nr_inodes (recipe.TmpfsInodes) bounds them, in /tmp
	// within a run and in a session's workspace across runs, whose files
	// outlive the run's cgroup and its memory limit.
	t.Run("inodes", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			const size = 32 << 20
			m := randomToken(t, "sbxinodes-")
			s := newTest(t, limitOpts(t, attackOpts(t, root, Options{Limits: Limits{Memory: memLimit, TmpSize: size}})))
			res, rep, err := runFor(t, s, 60*time.Second, "exhaust", "inodes", m)
			if err != nil || rep == nil {
				t.Fatalf("no report: %v, %v\n%s", err, res.Err(), tail(res.Stderr))
			}
			requireRefusedBy(t, rep, "create 300000 empty files", "ENOSPC")
			// The tmpfs root and what the run itself made take a few.
			if files, _ := strconv.Atoi(rep.Seen["files"]); files > int(recipe.TmpfsInodes(size)) || files < int(recipe.TmpfsInodes(size))-16 {
				t.Errorf("created %d empty files in /tmp, want ENOSPC just short of %d", files, recipe.TmpfsInodes(size))
			}
			requireNothingLeft(t, m)
		})
	})
	t.Run("inodes-session", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			const size = 16 << 20
			m := randomToken(t, "sbxinodes-")
			s := newTest(t, limitOpts(t, attackOpts(t, root, Options{Limits: Limits{Memory: memLimit}, Workspace: SessionWorkspace{Size: size}})))
			var counts []int
			for range 3 {
				if _, _, err := runFor(t, s, 60*time.Second, "exhaust", "inodes", m, "/workspace"); err != nil {
					t.Fatal(err)
				}
				ents, err := s.ReadDir(".")
				if err != nil {
					t.Fatal(err)
				}
				counts = append(counts, len(ents))
			}
			if bound := int(recipe.TmpfsInodes(size)); counts[0] < bound-16 || counts[2] > bound {
				t.Errorf("files in the session workspace after each of 3 runs: %v; want about %d, the bound, which later runs cannot pass", counts, bound)
			}
			requireNothingLeft(t, m)
		})
	})
	t.Run("fdexhaust", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			const nofile = 200
			m := randomToken(t, "sbxfd-")
			s := newTest(t, attackOpts(t, root, Options{Limits: Limits{OpenFiles: nofile}}))
			_, rep, err := runFor(t, s, 30*time.Second, "exhaust", "fdexhaust", m)
			if err != nil || rep == nil {
				t.Fatalf("no report: %v", err)
			}
			requireRefusedBy(t, rep, "raise RLIMIT_NOFILE", "EPERM")
			n, _ := strconv.Atoi(rep.Seen["opened"])
			if rep.Seen["open err"] != "EMFILE" || n > nofile || n < nofile-20 || rep.Seen["nofile"] != "200 200" {
				t.Errorf("opened %d fds, then %s, limit %s; want EMFILE just short of %d", n, rep.Seen["open err"], rep.Seen["nofile"], nofile)
			}
			requireNothingLeft(t, m)
		})
	})
	t.Run("flood", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			const limit = 64 << 10
			m := randomToken(t, "sbxflood-")
			s := newTest(t, attackOpts(t, root, Options{Limits: Limits{Output: limit}}))
			res, _, err := runFor(t, s, 2*time.Second, "exhaust", "flood", m)
			if err != nil || res.Outcome != Timeout {
				t.Fatalf("an endless flood: err %v, outcome %v; want the deadline to end it", err, res.Outcome)
			}
			if !res.StdoutTruncated || !res.StderrTruncated || len(res.Stdout) > limit+100 || len(res.Stderr) > limit+100 {
				t.Errorf("kept %d and %d bytes (truncated %v %v) under a %d limit", len(res.Stdout), len(res.Stderr),
					res.StdoutTruncated, res.StderrTruncated, limit)
			}
			if res.StdoutBytes < 16*limit {
				t.Errorf("the flood wrote only %d bytes in 2 s: was it drained?", res.StdoutBytes)
			}
			requireNothingLeft(t, m)
		})
	})
	t.Run("spin", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			m := randomToken(t, "sbxspin-")
			s := newTest(t, limitOpts(t, attackOpts(t, root, Options{Limits: Limits{CPUs: 0.5}})))
			res, _, err := runFor(t, s, 2*time.Second, "exhaust", "spin", m)
			if err != nil || res.Outcome != Timeout {
				t.Fatalf("an endless spin: err %v, outcome %v; want the deadline to end it", err, res.Outcome)
			}
			if !noCgroup(t, "the CPU quota") {
				// Half a CPU over the run's wall time, whatever the number
				// of CPUs spun on; tolerance for the quota's 100 ms period.
				if lim := res.WallTime/2 + res.WallTime/4 + 100*time.Millisecond; res.CgroupCPU > lim || res.CgroupCPU < res.WallTime/5 {
					t.Errorf("spinning on every CPU for %v under 0.5 CPU used %v of CPU, want about half", res.WallTime, res.CgroupCPU)
				}
			}
			requireNothingLeft(t, m)
		})
	})
}

// tail is the last 200 bytes of b.
func tail(b []byte) []byte { return b[max(0, len(b)-200):] }

// TestEscapeSurvival models a program that outlives its sandbox: a daemon
// made by a double fork and setsid, ignoring SIGTERM and SIGHUP, trying to
// move to another cgroup and out of the PID namespace, writing a shared
// file to show it lives (runtimes that waited only for their direct
// child left such daemons on the host; runc kills the whole cgroup for
// this reason). The PID namespace (its init's exit kills every process in
// it), the run's cgroup, removed at the end, and the seccomp policy hold:
// a second after Run returns no process of the run exists and the file
// stops changing, whether the program exits at once, is ended by its
// deadline, or the Sandbox runs again.
func TestEscapeSurvival(t *testing.T) {
	requireSandbox(t)
	// checkDaemon reads the daemon's own report from dir and checks that
	// the shared file stops changing.
	checkDaemon := func(t *testing.T, dir string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "daemon.json"))
		var drep attack.Report
		if err == nil {
			err = json.Unmarshal(b, &drep)
		}
		if err != nil {
			t.Errorf("the daemon left no report: %v", err)
		} else {
			requireBlocked(t, &drep, 8)
			requireRefusedBy(t, &drep, "unshare pid namespace", "EPERM")
		}
		alive := filepath.Join(dir, "alive")
		before, err := os.ReadFile(alive)
		if err != nil {
			t.Fatalf("the daemon never wrote %s: %v", alive, err)
		}
		time.Sleep(1500 * time.Millisecond)
		if after, _ := os.ReadFile(alive); !bytes.Equal(before, after) {
			t.Errorf("the daemon still writes after Run returned: %q, then %q", before, after)
		}
	}
	t.Run("exit", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			m := randomToken(t, "sbxdaemon-")
			dir := sharedTempDir(t)
			s := newTest(t, attackOpts(t, root, Options{Binds: []Bind{{Source: dir, Target: "/shared", Writable: true}}}))
			res, rep := runAttack(t, s, "survive", "exit", m, "/shared")
			if rep == nil || rep.Seen["daemon writing"] != "true" {
				t.Fatalf("the daemon did not start: %+v\n%s\n%s", rep, res.Stdout, res.Stderr)
			}
			requireNothingLeft(t, m)
			checkDaemon(t, dir)
		})
	})
	t.Run("timeout", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			m := randomToken(t, "sbxdaemon-")
			dir := sharedTempDir(t)
			s := newTest(t, attackOpts(t, root, Options{Binds: []Bind{{Source: dir, Target: "/shared", Writable: true}}}))
			res, _, err := runFor(t, s, 3*time.Second, "survive", "stay", m, "/shared")
			if err != nil || res.Outcome != Timeout {
				t.Fatalf("err %v, outcome %v; want the deadline to end the run", err, res.Outcome)
			}
			if !strings.Contains(string(res.Stdout), "staying true") {
				t.Fatalf("the daemon did not start before the deadline: %q\n%s", res.Stdout, res.Stderr)
			}
			requireNothingLeft(t, m)
			checkDaemon(t, dir)
		})
	})
	t.Run("session", func(t *testing.T) {
		forEachRoot(t, func(t *testing.T, root escapeRoot) {
			m := randomToken(t, "sbxdaemon-")
			s := newTest(t, attackOpts(t, root, Options{}))
			res, rep := runAttack(t, s, "survive", "exit", m, "/workspace")
			if rep == nil || rep.Seen["daemon writing"] != "true" {
				t.Fatalf("the daemon did not start: %+v\n%s\n%s", rep, res.Stdout, res.Stderr)
			}
			requireNothingLeft(t, m)
			// The next Run shares the workspace the daemon wrote to, and
			// nothing else.
			_, rep = runAttack(t, s, "survive", "look", randomToken(t, "sbxlook-"), "/workspace")
			if rep == nil {
				t.Fatal("no report from the second run")
			}
			requireBlocked(t, rep, 2)
			if b, err := s.ReadFile("daemon.json"); err != nil || !bytes.Contains(b, []byte(m)) {
				t.Errorf("the first run's daemon left no report in the workspace: %v", err)
			}
		})
	})
}
