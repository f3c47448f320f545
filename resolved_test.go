package sandbox

import (
	"log/slog"
	"testing"
	"time"
)

// TestResolveGroups: each group's choice becomes the settings it stands
// for, and leaving a group out is its default.
func TestResolveGroups(t *testing.T) {
	if r := resolve(Options{}); r.Rootfs != "" || r.Image != nil || r.Workspace != "" || r.FreshWorkspace || r.Live ||
		r.InProcess || r.Pool != 0 || r.NoSeccomp || r.Seccomp != nil || r.Network != netNone || r.Audit != nil {
		t.Errorf("resolve(Options{}) = %+v, want every default", r)
	}
	h := slog.DiscardHandler
	r := resolve(Options{
		Root:      RootDir("/srv/root"),
		Workspace: FreshWorkspace{Size: 1 << 20},
		Limits:    Limits{Memory: 1 << 30, Output: 10, OpenFiles: 7, FileSize: 5, Policy: BestEffortLimits},
		Network:   &Egress{Allow: []string{"pypi.org"}},
		Seccomp:   &SeccompPolicy{Default: ActAllow, Unknown: ActAllow, KillOnRefusal: true},
		Live:      &Live{IdleTimeout: time.Second},
		Start:     Pool{Size: 3},
		Audit:     &Audit{Handler: h, Exec: true},
	})
	switch {
	case r.Rootfs != "/srv/root", !r.FreshWorkspace || r.WorkspaceSize != 1<<20,
		r.Limits.Memory != 1<<30 || r.Limits.Output != 10 || r.Limits.OpenFiles != 7 || r.Limits.FileSize != 5 || r.Limits.Policy != BestEffortLimits,
		r.Network != netAllow || len(r.Egress) != 1, !r.SeccompKill || r.Seccomp == nil,
		!r.Live || r.IdleTimeout != time.Second, r.Pool != 3, r.Audit != h || !r.AuditExec:
		t.Errorf("resolve = %+v, want each group's settings", r)
	}
	if r := resolve(Options{Network: HostNetworkUnsafe{}, Seccomp: Unconfined{}, Start: InProcess{}}); r.Network != netHost || !r.NoSeccomp || !r.InProcess {
		t.Errorf("resolve = %+v, want the host's network, no filter and in-process starts", r)
	}
}

// TestResolveCopies: what New keeps of the Options is its own: the
// caller's later changes to what they point to do not reach the Sandbox.
func TestResolveCopies(t *testing.T) {
	e := &Egress{Allow: []string{"pypi.org"}, Secrets: []Secret{{Name: "K", Value: "v", Hosts: []string{"pypi.org"}}}}
	im := &Image{Ref: "oci:/nowhere"}
	p := DefaultSeccompPolicy()
	o := Options{Network: e, Root: im, Seccomp: p, Binds: []Bind{{Source: "/usr"}}, Env: []string{"A=b"}}
	r := resolve(o)
	action := p.Rules[0].Action
	e.Allow[0], e.Secrets[0].Value, im.Ref, p.Rules[0].Action, o.Binds[0].Source, o.Env[0] = "x", "w", "y", action+1, "/etc", "C=d"
	if r.Egress[0] != "pypi.org" || r.Secrets[0].Value != "v" || r.Image.Ref != "oci:/nowhere" || r.Seccomp.Rules[0].Action != action ||
		r.Binds[0].Source != "/usr" || r.Env[0] != "A=b" {
		t.Errorf("resolve kept the caller's values: %+v", r)
	}
}
