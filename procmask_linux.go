package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Container runtimes hide paths of /proc (/proc/kcore, /proc/keys,
// /proc/timer_list, ...) by mounting over them, and make others (/proc/sys,
// /proc/bus, ...) read-only with a bind over themselves. In a new user
// namespace the kernel then refuses every new proc mount with EPERM: such a
// mount would show what the mounts over the existing one hide, and a process
// without privilege over them may not undo them. Every sandbox needs a proc
// mount of its own (for its own PID namespace), and there is no safe way
// around it from inside: binding the caller's /proc instead would show the
// sandbox every process of the container. So the fix is the runtime's: leave
// the container's /proc unmasked (each sandbox masks those paths again in its
// own /proc).
const procMaskHint = "run the container with docker's --security-opt systempaths=unconfined, " +
	"or a pod's securityContext.procMount: Unmasked (which needs hostUsers: false)"

// procMaskError explains an EPERM from mounting the sandbox's /proc when the
// caller's /proc has mounts over its paths, or returns nil.
func procMaskError(cause error) *UnsupportedError {
	masked := maskedProcPaths()
	if len(masked) == 0 {
		return nil
	}
	shown := strings.Join(masked, ", ")
	if len(masked) > 3 {
		shown = fmt.Sprintf("%s and %d more", strings.Join(masked[:3], ", "), len(masked)-3)
	}
	return &UnsupportedError{
		Feature: "a /proc of its own",
		Reason: "this /proc has mounts over " + shown +
			" (a container runtime's masks), and the kernel refuses a new proc mount that would reveal what they hide",
		Hint: procMaskHint,
		Err:  cause,
	}
}

// maskedProcPaths lists the mount points beneath /proc in this process's
// mount namespace, but for those the kernel ignores when it decides whether a
// new proc mount would reveal anything (binfmt_misc's, an empty directory
// that systemd mounts on hosts).
func maskedProcPaths() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var paths []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mount-point options ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		// Shown as mountinfo escapes it (\040 for a space): only named.
		if p := fields[4]; strings.HasPrefix(p, "/proc/") && p != "/proc/sys/fs/binfmt_misc" {
			paths = append(paths, p)
		}
	}
	return paths
}
