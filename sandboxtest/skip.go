package sandboxtest

import (
	"strings"

	"github.com/fumehood/sandbox"
)

// skipReason says why the host r describes cannot run sandboxes built from
// opts, naming each missing layer with what the probe found, or returns ""
// when it can.
func skipReason(r *sandbox.ProbeReport, opts sandbox.Options) string {
	if !r.CanRun() {
		var b strings.Builder
		b.WriteString("sandboxtest: this host cannot build sandboxes")
		if r.Kernel != "" {
			b.WriteString(" (kernel " + r.Kernel + ")")
		}
		b.WriteString("; missing:")
		for _, l := range r.Layers {
			if !l.Available {
				b.WriteString("\n\t" + l.Name + ": " + l.Detail)
			}
		}
		return b.String()
	}
	// Run with EnforceLimits needs the cgroup layer, which the probe
	// checks for the caller's own cgroup; a CgroupParent is left to Run,
	// which skips through ErrNotSupported if it cannot be used.
	if opts.Limits.Policy == sandbox.EnforceLimits && opts.Limits.CgroupParent == "" {
		if l, ok := r.Layer("cgroup"); !ok || !l.Available {
			why := "sandboxtest: no writable cgroup for the runs' limits: " + l.Detail
			if !strings.Contains(why, "BestEffortLimits") {
				why += " (Options.Limits.Policy BestEffortLimits runs with rlimits standing in)"
			}
			return why
		}
	}
	return ""
}
