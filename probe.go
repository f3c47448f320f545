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

// String lists the layers one a line.
func (r *ProbeReport) String() string {
	var b strings.Builder
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
// seccomp filter with its user notification (which Options.NoSeccomp can
// do without). Run with
// the default Options.LimitPolicy also needs the "cgroup" layer.
func (r *ProbeReport) CanRun() bool {
	for _, name := range requiredLayers {
		if l, ok := r.Layer(name); !ok || !l.Available {
			return false
		}
	}
	return true
}
