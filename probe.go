package sandbox

import "strings"

// Layer is one protection the host can or cannot provide.
type Layer struct {
	Name      string // e.g. "user namespace", "cgroup", "seccomp"
	Available bool
	Detail    string // what was found, or what is missing and how to enable it
}

// ProbeReport says which layers this host can provide. Probe fills it in
// without running anything untrusted.
type ProbeReport struct {
	Kernel string
	Layers []Layer
}

// Layer returns the layer with the given name, and whether there is one.
func (r *ProbeReport) Layer(name string) (Layer, bool) {
	for _, l := range r.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return Layer{}, false
}

// String is the Summary on its first line, then the kernel and the layers
// one a line.
func (r *ProbeReport) String() string {
	var b strings.Builder
	b.WriteString(r.Summary() + "\n")
	b.WriteString("kernel: " + r.Kernel + "\n")
	for _, l := range r.Layers {
		mark := "yes"
		if !l.Available {
			mark = "no "
		}
		b.WriteString(mark + "  " + l.Name)
		if l.Detail != "" {
			b.WriteString(": " + l.Detail)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// requiredLayers are the layers every Run needs.
var requiredLayers = []string{"user namespace", "pid namespace", "mount namespace", "network namespace",
	"ipc namespace", "uts namespace", "cgroup namespace", "seccomp", "seccomp user notification"}

// CanRun reports whether every namespace Run needs is available, and the
// seccomp filter with its user notification (which Unconfined can
// do without). Run with
// the default Options.Limits.Policy also needs the "cgroup" layer.
func (r *ProbeReport) CanRun() bool {
	for _, name := range requiredLayers {
		if l, ok := r.Layer(name); !ok || !l.Available {
			return false
		}
	}
	return true
}

// CanRunDefault reports whether Run with the default Options can run for
// the caller Probe ran as: CanRun, and a writable cgroup for the run's
// limits (the "cgroup" layer), without which the default
// Options.Limits.Policy, EnforceLimits, refuses every run.
func (r *ProbeReport) CanRunDefault() bool {
	l, ok := r.Layer("cgroup")
	return r.CanRun() && ok && l.Available
}

// probeBestEffortHint gives the two ways to run where only the cgroup for
// the limits is missing, in the library's terms and the tool's.
const probeBestEffortHint = "delegate a cgroup v2 subtree to this user (systemd Delegate=yes; see Options.Limits.CgroupParent), " +
	"or run with best effort (Options.Limits.Policy = BestEffortLimits; sandbox run --best-effort), rlimits standing in for the limits"

// Summary is the report's verdict in one line: whether sandboxes can run,
// and where only runs with best-effort limits can, the two fixes first.
func (r *ProbeReport) Summary() string {
	switch {
	case !r.CanRun():
		return "sandboxes cannot run on this host: see the layers marked \"no\""
	case !r.CanRunDefault():
		return "a default Run is refused here, for want of a writable cgroup for its limits: " + probeBestEffortHint
	}
	return "sandboxes can run on this host"
}
