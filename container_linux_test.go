package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The callers containers make: a uid whose primary group is 0 (Kubernetes'
// runAsUser without runAsGroup, OpenShift's arbitrary uids), and a process
// whose /proc the runtime masked. Both are run as a helper of their own, as
// root makes them: the first with setuid/setgid, the second in a mount
// namespace of its own with a mount of /dev/null over one of the files
// Docker masks so, whichever this kernel has.

// maskedPath is the file of /proc the masked-/proc test mounts over, or ""
// where the kernel has none of them.
func maskedPath() string {
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func init() {
	// Runs the sandbox from both launchers (the spawner, in process) and
	// prints, per launcher, the error or the program's output.
	both := func(opts Options, script string) {
		for _, inProcess := range []bool{false, true} {
			o := opts
			o.Start = inProcessIf(inProcess)
			res, err := New(o).Run(context.Background(), Command("/bin/sh", "-c", script))
			switch {
			case err != nil:
				fmt.Printf("inprocess=%v err notsupported=%v hint=%q: %v\n", inProcess, errors.Is(err, ErrNotSupported), hintOf(err), err)
			default:
				fmt.Printf("inprocess=%v exit=%d out=%q stderr=%q\n", inProcess, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
	}
	helpers["groupzero"] = func([]string) int {
		uid, gid := (&Options{}).HostIDs()
		fmt.Printf("caller %d:%d hostids %d:%d\n", os.Getuid(), os.Getgid(), uid, gid)
		both(Options{Limits: Limits{Policy: BestEffortLimits}}, "echo hi; cat /proc/self/uid_map /proc/self/gid_map")
		return 0
	}
	// Also what deploy/validate's TestDockerContainer runs in a container.
	helpers["echo"] = func([]string) int {
		both(Options{Limits: Limits{Policy: BestEffortLimits}}, "echo hi")
		// A session's workspace, which its keeper holds: files in
		// from the caller, changed by a run, read back.
		sb := New(Options{Limits: Limits{Policy: BestEffortLimits}})
		defer sb.Close()
		err := sb.WriteFile("in", []byte("from the caller\n"), 0o644)
		var res *Result
		if err == nil {
			res, err = sb.Run(context.Background(), Command("/bin/sh", "-c", "cat in; echo from the run >> in"))
		}
		var b []byte
		if err == nil {
			b, err = sb.ReadFile("in")
		}
		if err != nil {
			fmt.Printf("session err notsupported=%v hint=%q: %v\n", errors.Is(err, ErrNotSupported), hintOf(err), err)
		} else {
			fmt.Printf("session out=%q file=%q\n", res.Stdout, b)
		}
		return 0
	}
	helpers["maskedproc"] = func([]string) int {
		// Private first, so that the mask stays in this mount namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Println("make / private:", err)
			return 1
		}
		masked := maskedPath()
		if err := unix.Mount("/dev/null", masked, "", unix.MS_BIND, ""); err != nil {
			fmt.Println("mask", masked+":", err)
			return 1
		}
		fmt.Println("masked")
		both(Options{Limits: Limits{Policy: BestEffortLimits}}, "echo hi")
		if err := unix.Unmount(masked, 0); err != nil {
			fmt.Println("unmask", masked+":", err)
			return 1
		}
		fmt.Println("unmasked")
		both(Options{Limits: Limits{Policy: BestEffortLimits}}, "echo hi")
		return 0
	}
}

func hintOf(err error) string {
	var ue *UnsupportedError
	if errors.As(err, &ue) {
		return ue.Hint
	}
	return ""
}

// runHelperAs runs helper name from a copy of the test binary with attr,
// through the command wrap if any.
func runHelperAs(t *testing.T, name string, attr *syscall.SysProcAttr, wrap ...string) string {
	t.Helper()
	cmd := exec.Command(helperBind(t).Source)
	if len(wrap) > 0 {
		cmd = exec.Command(wrap[0], append(wrap[1:], helperBind(t).Source)...)
	}
	cmd.Env = []string{helperEnv + "=" + name, "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestGroupZeroCaller: a caller that is not root and whose group is 0 runs
// sandboxes like any other unprivileged caller, with its own ids mapped.
func TestGroupZeroCaller(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to run a helper as uid 1001 with gid 0")
	}
	out := runHelperAs(t, "groupzero", &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1001, Gid: 0}})
	if !strings.Contains(out, "caller 1001:0 hostids 1001:0\n") {
		t.Errorf("a uid 1001 gid 0 caller's default host ids:\n%s\nwant 1001:0, the only ones it can map", out)
	}
	// Each map line: inside id, outside id, count.
	want := fmt.Sprintf("hi\n%10d %10d %10d\n%10d %10d %10d\n", SandboxUID, 1001, 1, SandboxGID, 0, 1)
	for _, way := range []string{"inprocess=false", "inprocess=true"} {
		if !strings.Contains(out, fmt.Sprintf("%s exit=0 out=%q", way, want)) {
			t.Errorf("%s: the run as uid 1001 gid 0:\n%s\nwant exit 0 and output %q", way, out, want)
		}
	}
}

// TestMaskedProcRefused: under a /proc with mounts over its paths, as a
// container runtime leaves it, the sandbox's own proc mount is refused, and
// the error says so and gives the fix; without the mask the same run works.
func TestMaskedProcRefused(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to mask a file of /proc in a mount namespace of its own")
	}
	masked := maskedPath()
	if masked == "" {
		t.Skip("this kernel's /proc has none of kcore, keys, timer_list and sched_debug to mask")
	}
	out := runHelperAs(t, "maskedproc", &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS})
	before, after, ok := strings.Cut(out, "unmasked\n")
	if !ok || !strings.HasPrefix(before, "masked\n") {
		t.Fatalf("helper:\n%s", out)
	}
	for _, way := range []string{"inprocess=false", "inprocess=true"} {
		want := fmt.Sprintf("%s err notsupported=true hint=%q", way, procMaskHint)
		if !strings.Contains(before, want) || !strings.Contains(before, masked) {
			t.Errorf("%s under a masked /proc:\n%s\nwant %s, naming %s", way, before, want, masked)
		}
		if want := way + ` exit=0 out="hi\n"`; !strings.Contains(after, want) {
			t.Errorf("%s once unmasked:\n%s\nwant %s", way, after, want)
		}
	}
}

// dockerDefaultCaps is the bounding set of a container's root under
// Docker's defaults, as setpriv's --bounding-set takes it.
const dockerDefaultCaps = "-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap," +
	"+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap"

// TestRootWithoutSetIDCaps: a root caller without CAP_SETUID and CAP_SETGID
// (a container run with --cap-drop ALL) cannot map its sandbox to nobody,
// and must not map it to root: the run is refused with the two capabilities
// named, and works once they are kept.
func TestRootWithoutSetIDCaps(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a helper as root without capabilities")
	}
	// util-linux's setpriv; busybox's has no --bounding-set.
	setpriv, err := exec.LookPath("setpriv")
	if help, _ := exec.Command(setpriv, "--help").CombinedOutput(); err != nil || !strings.Contains(string(help), "--bounding-set") {
		t.Skip("no setpriv with --bounding-set (util-linux's) to drop the helper's capabilities with")
	}
	for _, c := range []struct {
		bounding string
		want     func(way string) string
	}{
		{"-all", func(way string) string { return fmt.Sprintf("%s err notsupported=true hint=%q", way, setIDCapsHint) }},
		// Docker's default capabilities, without CAP_SYS_ADMIN: the
		// session's workspace keeper mounts in a user namespace of its
		// own.
		{dockerDefaultCaps, func(way string) string {
			if way == "session" {
				return `session out="from the caller\n" file="from the caller\nfrom the run\n"`
			}
			return way + ` exit=0 out="hi\n"`
		}},
	} {
		out := runHelperAs(t, "echo", nil, setpriv, "--bounding-set="+c.bounding, "--inh-caps=-all")
		for _, way := range []string{"inprocess=false", "inprocess=true", "session"} {
			if !strings.Contains(out, c.want(way)) {
				t.Errorf("as root with bounding set %s:\n%s\nwant %s", c.bounding, out, c.want(way))
			}
		}
	}
}
