package report

// Limit is one resource limit of a run as it was put in place.
type Limit struct {
	Name     string `json:"name"`     // "memory", "cpu", "pids" or "io"
	Value    string `json:"value"`    // the limit, e.g. "536870912 bytes", or "none"
	Enforced bool   `json:"enforced"` // the limit held for the run
	By       string `json:"by"`       // "cgroup v2", "cgroup v1", an rlimit, or why it was not enforced
}
