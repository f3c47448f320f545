//go:build linux

package recipe

import (
	"strconv"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// process adds what the init does between the pivot and the program:
// hostname, loopback, rlimits, the working directory, dropping every
// privilege, and the filter.
func (b *planner) process() {
	b.hostnameAndNetwork()
	b.programProcess()
}

// hostnameAndNetwork sets what the sandbox's namespaces hold for every
// process in them: the hostname, loopback, the proxy's listener.
func (b *planner) hostnameAndNetwork() {
	cfg := b.cfg
	b.call(forkplan.Where{Stage: "hostname", Op: "sethostname", Path: cfg.Hostname}, unix.SYS_SETHOSTNAME,
		forkplan.Buf([]byte(cfg.Hostname)), forkplan.Val(len(cfg.Hostname)))
	if !cfg.HostNetwork {
		w := forkplan.Where{Stage: "network", Op: "bring lo up"}
		fd := b.slot()
		b.call(forkplan.Where{Stage: "network", Op: "socket"}, unix.SYS_SOCKET, forkplan.Val(unix.AF_INET),
			forkplan.Val(unix.SOCK_DGRAM|unix.SOCK_CLOEXEC), forkplan.Val(0)).Save(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			b.fail(&wire.SetupError{Stage: "network", Op: "bring lo up", Text: err.Error()})
			return
		}
		// The flags a new namespace's lo can change are all clear: up is
		// the only one to set.
		ifr.SetUint16(unix.IFF_UP)
		b.call(w, unix.SYS_IOCTL, forkplan.In(fd), forkplan.Val(unix.SIOCSIFFLAGS), forkplan.Ptr(ifr))
		b.close(fd)
	}
	if cfg.ProxyPort != 0 {
		b.proxyListener()
	}
}

// programProcess makes the process the program's: its rlimits, signals
// and working directory, no privilege left, and the filter. An init and a
// process entering a live sandbox (CompileEntry) both end with it.
func (b *planner) programProcess() {
	cfg := b.cfg
	for _, l := range rlimitsOf(cfg) {
		b.call(forkplan.Where{Stage: "rlimit", Op: l.name, Path: strconv.FormatUint(l.value, 10)}, unix.SYS_PRLIMIT64, forkplan.Val(0),
			forkplan.Val(l.resource), forkplan.Ptr(&unix.Rlimit{Cur: l.value, Max: l.value}), forkplan.Val(0))
	}
	for _, sig := range ignoredSignals {
		b.call(forkplan.Where{Stage: "process", Op: "ignore " + unix.SignalName(sig)}, unix.SYS_RT_SIGACTION, forkplan.Val(sig),
			forkplan.Ptr(&kernelSigaction{sigIgn}), forkplan.Val(0), forkplan.Val(8))
	}
	// The bounding and ambient sets go before a prepared init waits for
	// its program, off the run's path: neither is needed to attach the
	// workspace, which the effective set still allows.
	w := func(op, path string) forkplan.Where { return forkplan.Where{Stage: "capabilities", Op: op, Path: path} }
	for c := 0; c <= b.facts.lastCap; c++ {
		b.call(w("drop bounding set", strconv.Itoa(c)), unix.SYS_PRCTL, forkplan.Val(unix.PR_CAPBSET_DROP), forkplan.Val(c))
	}
	b.call(w("clear ambient set", ""), unix.SYS_PRCTL, forkplan.Val(unix.PR_CAP_AMBIENT), forkplan.Val(unix.PR_CAP_AMBIENT_CLEAR_ALL), forkplan.Val(0),
		forkplan.Val(0), forkplan.Val(0))
	dir := forkplan.Str(cfg.Dir)
	if b.block != nil {
		b.awaitProgram()
		s := b.slot()
		b.p.Load(s, b.block.header(hdrDir))
		dir = forkplan.In(s)
	}
	b.call(forkplan.Where{Stage: "chdir", Op: "chdir (Cmd.Dir)", Path: cfg.Dir}, unix.SYS_CHDIR, dir)
	// A directory outside the root (reached through an inherited fd) reads
	// back as "(unreachable)/...".
	cwd := make([]byte, unix.PathMax)
	check := forkplan.Where{Stage: "chdir", Op: "check Cmd.Dir inside the root", Path: cfg.Dir}
	b.call(check, unix.SYS_GETCWD, forkplan.Buf(cwd), forkplan.Val(len(cwd)))
	b.p.Check(check, &cwd[0], '/', uintptr(unix.EXDEV))
	b.terminal()
	b.call(w("capset", ""), unix.SYS_CAPSET, forkplan.Ptr(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}),
		forkplan.Ptr(&[2]unix.CapUserData{}))
	b.call(w("prctl PR_SET_NO_NEW_PRIVS", ""), unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_NO_NEW_PRIVS), forkplan.Val(1), forkplan.Val(0),
		forkplan.Val(0), forkplan.Val(0))
	b.call(forkplan.Where{Stage: "process", Op: "prctl PR_SET_PDEATHSIG"}, unix.SYS_PRCTL, forkplan.Val(unix.PR_SET_PDEATHSIG), forkplan.Val(unix.SIGKILL))
	b.call(forkplan.Where{Stage: "process", Op: "close_range"}, unix.SYS_CLOSE_RANGE, forkplan.Val(3), forkplan.Val(^uint(0)),
		forkplan.Val(unix.CLOSE_RANGE_CLOEXEC))
	b.filter()
}

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64, as
// rt_sigaction takes it: handler, flags, restorer and mask, a word each.
// sigIgn is SIG_IGN.
type kernelSigaction [4]uintptr

const sigIgn = 1
