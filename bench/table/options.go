package main

import (
	"github.com/fumehood/sandbox"
)

// defaultOptions are the Options of the cold rows: the zero value, except
// where this process cannot make cgroups (an unprivileged user on a cgroup
// v1 host), where the default would refuse every Run; there the limits are
// best effort (rlimits), and the returned note says so for the table's
// header, since those rows then pay no cgroup.
func defaultOptions() (sandbox.Options, string) {
	report, err := sandbox.Probe()
	if err != nil {
		return sandbox.Options{}, "cgroup: probe failed (" + err.Error() + "); default options"
	}
	l, ok := report.Layer("cgroup")
	if !ok || l.Available {
		return sandbox.Options{}, "cgroup: " + l.Detail
	}
	return sandbox.Options{Limits: sandbox.Limits{Policy: sandbox.BestEffortLimits}},
		"cgroup: not available (" + l.Detail + "): every sandbox row runs with LimitPolicy: BestEffortLimits, so without a cgroup"
}
