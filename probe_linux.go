//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/fumehood/sandbox/internal/cgroup"
	"github.com/fumehood/sandbox/internal/launch"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// Probe reports which layers this host can provide: each namespace (by
// cloning a probe into it, as a sandbox's init is cloned, which takes the
// sandbox's ids and exits), the cgroup hierarchy and whether the caller's
// cgroup is writable, and seccomp with user notification. A service can
// call it at start-up; it runs nothing untrusted and takes a few
// milliseconds.
func Probe() (*ProbeReport, error) {
	r := &ProbeReport{}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		r.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	userns := probeClone("user namespace", 0)
	r.Layers = append(r.Layers, nsLayer("user namespace", userns))
	for _, ns := range []struct {
		name string
		flag uintptr
	}{
		{"pid namespace", unix.CLONE_NEWPID}, {"mount namespace", unix.CLONE_NEWNS},
		{"network namespace", unix.CLONE_NEWNET}, {"ipc namespace", unix.CLONE_NEWIPC},
		{"uts namespace", unix.CLONE_NEWUTS}, {"cgroup namespace", unix.CLONE_NEWCGROUP},
	} {
		if userns != nil {
			r.Layers = append(r.Layers, Layer{Name: ns.name, Detail: "not tried: needs a user namespace"})
			continue
		}
		r.Layers = append(r.Layers, nsLayer(ns.name, probeClone(ns.name, ns.flag)))
	}
	r.Layers = append(r.Layers, cgroupLayer(), seccompLayer(), userNotifLayer())
	return r, nil
}

// probeClone clones a probe into a new user namespace plus flag, the
// namespace name, with the ids a sandbox of the default Options has, and
// has it exit. A failure of the user namespace alone is explained as
// Run's would be.
func probeClone(name string, flag uintptr) error {
	uid, gid := hostID(os.Getuid()), hostID(os.Getgid())
	se := launch.Probe(unix.CLONE_NEWUSER|flag, nil, uid, gid)
	if se == nil {
		return nil
	}
	if flag == 0 {
		cfg := &wire.Config{}
		cfg.HostUID, cfg.HostGID = uid, gid
		return setupError(se, cfg)
	}
	if se.Stage == "clone" {
		se.Op += " in a new " + name
	}
	return probeError(se)
}

// probeError is a probe's failure with its identity: the step, and its
// errno as the SetupError's Err.
func probeError(se *wire.SetupError) *SetupError {
	var cause error = syscall.Errno(se.Errno)
	if se.Errno == 0 {
		cause = errors.New(se.Text)
	}
	return &SetupError{Stage: se.Stage, Op: se.Op, Path: se.Path, Err: cause}
}

func nsLayer(name string, err error) Layer {
	if err != nil {
		return Layer{Name: name, Detail: err.Error()}
	}
	return Layer{Name: name, Available: true}
}

// usernsUnsupported explains a failed clone with CLONE_NEWUSER, or returns
// nil if the error does not look like a missing user namespace.
func usernsUnsupported(cause error) *UnsupportedError {
	var errno syscall.Errno
	if !errors.As(cause, &errno) || (errno != unix.EPERM && errno != unix.EACCES && errno != unix.ENOSPC &&
		errno != unix.EINVAL && errno != unix.EUSERS && errno != unix.ENOSYS) {
		return nil
	}
	ue := &UnsupportedError{Feature: "user namespaces", Err: cause}
	switch {
	case errno == unix.ENOSYS && seccompFiltered():
		// A container runtime's default profile answers clone3 so, for
		// C libraries to fall back to clone, which it refuses new
		// namespaces.
		ue.Reason = "clone3, which starts the sandbox in new namespaces, was refused by this process's seccomp filter"
		ue.Hint = "in a container, run it with a seccomp profile that allows clone3 and clone with CLONE_NEWUSER (docker --security-opt seccomp=unconfined)"
	case errno == unix.ENOSYS:
		ue.Feature = "clone3"
		ue.Reason = "this kernel has no clone3 (Linux 5.3)"
		ue.Hint = "run on Linux 5.10 or later"
	case readSysctl("user/max_user_namespaces") == "0":
		ue.Reason = "user.max_user_namespaces is 0"
		ue.Hint = "sysctl -w user.max_user_namespaces=15000"
	case readSysctl("kernel/unprivileged_userns_clone") == "0" && os.Geteuid() != 0:
		ue.Reason = "kernel.unprivileged_userns_clone is 0"
		ue.Hint = "sysctl -w kernel.unprivileged_userns_clone=1"
	case readSysctl("kernel/apparmor_restrict_unprivileged_userns") == "1" && os.Geteuid() != 0:
		ue.Reason = "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"
		ue.Hint = "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give the program an AppArmor profile with the userns permission"
	case errno == unix.ENOSPC:
		ue.Reason = "the limit of user namespaces is reached"
		ue.Hint = "raise user.max_user_namespaces"
	case seccompFiltered():
		ue.Reason = "creating a user namespace was refused"
		ue.Hint = "in a container, run it with a seccomp profile that allows clone with CLONE_NEWUSER (docker --security-opt seccomp=unconfined) or give it CAP_SYS_ADMIN"
	default:
		// No filter to blame: what is left is the id maps (written
		// with the same errno) or a security module.
		if me := idMapUnsupported(cause); me != nil {
			return me
		}
		ue.Reason = "creating a user namespace or writing its uid and gid maps was refused"
		ue.Hint = "a caller that is not root may map only its own uid and gid (see Options.HostUID); " +
			"otherwise a security module (SELinux, AppArmor) refuses user namespaces to this program"
	}
	return ue
}

// idMapUnsupported explains a refused write of the id maps by a root
// caller that lacks the capabilities for it, or returns nil.
func idMapUnsupported(cause error) *UnsupportedError {
	if os.Geteuid() != 0 || hasSetIDCaps() {
		return nil
	}
	return &UnsupportedError{Feature: "user namespaces", Err: cause,
		Reason: "this process is root without CAP_SETUID, CAP_SETGID and CAP_SETFCAP, which mapping the sandbox's user to nobody (65534) " +
			"and its workspace keeper's to root take",
		Hint: setIDCapsHint}
}

const setIDCapsHint = "keep those capabilities, which Docker grants by default " +
	"(docker run --cap-drop ALL --cap-add SETUID --cap-add SETGID --cap-add SETFCAP), or run as a user that is not root"

// seccompFiltered says whether a seccomp filter is on this process, as a
// container runtime's default profile is: /proc/self/status's "Seccomp: 2".
// Where that cannot be read, it says yes, so that the filter stays named.
func seccompFiltered() bool {
	v, ok := procStatus("Seccomp")
	return !ok || v != "0"
}

// hasSetIDCaps says whether this process holds CAP_SETUID and CAP_SETGID,
// which writing a user namespace's maps with ids other than its own takes,
// and CAP_SETFCAP, which mapping root takes.
func hasSetIDCaps() bool { return hasCaps(unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_SETFCAP) }

// hasCaps says whether this process's effective set holds caps. Where that
// cannot be read, it says yes.
func hasCaps(caps ...uintptr) bool {
	v, ok := procStatus("CapEff")
	if !ok {
		return true
	}
	eff, err := strconv.ParseUint(v, 16, 64)
	for _, c := range caps {
		if err == nil && eff&(1<<c) == 0 {
			return false
		}
	}
	return true
}

// procStatus is the value of a field of /proc/self/status.
func procStatus(field string) (string, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func readSysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// cgroupLayer says whether runs can get their cgroup: the layout, and
// whether every directory a run's cgroup goes in (the caller's own cgroups)
// is writable. Run with the default LimitPolicy needs it.
func cgroupLayer() Layer {
	l := Layer{Name: "cgroup"}
	version := cgroup.Detect().String()
	dirs, err := cgroup.Writable("")
	if err != nil {
		l.Detail = fmt.Sprintf("%s: %v (run as root, delegate a cgroup v2 subtree, e.g. systemd Delegate=yes, or use Options.Limits.Policy = BestEffortLimits)", version, err)
		return l
	}
	l.Available = true
	l.Detail = fmt.Sprintf("%s; runs' cgroups go beneath %s", version, strings.Join(dirs, ", "))
	return l
}

func seccompLayer() Layer {
	l := Layer{Name: "seccomp"}
	if readSysctl("kernel/seccomp/actions_avail") == "" {
		l.Detail = "no seccomp filter support (CONFIG_SECCOMP_FILTER)"
		return l
	}
	l.Available, l.Detail = true, "actions: "+readSysctl("kernel/seccomp/actions_avail")
	return l
}

func userNotifLayer() Layer {
	l := Layer{Name: "seccomp user notification"}
	if !strings.Contains(readSysctl("kernel/seccomp/actions_avail"), "user_notif") {
		l.Detail = "needs Linux 5.0 or later"
		return l
	}
	l.Available = true
	return l
}
