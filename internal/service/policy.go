package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// policy is what one tenant may hold at once, from the -tenants file. An
// omitted quota is no quota of the tenant's own: the server-wide flags
// (-max-sessions, -max-concurrent, -max-queue) still bound every tenant.
type policy struct {
	MaxSessions   *int     `json:"max_sessions"`    // live sessions
	MaxRuns       *int     `json:"max_runs"`        // runs and background processes at once
	RunsPerMinute *float64 `json:"runs_per_minute"` // runs and background processes started
}

// anyTenant names the policy of every tenant the file does not name.
const anyTenant = "*"

// errQuota is a request beyond one of its tenant's quotas.
var errQuota = errors.New("quota")

// policies are the tenants' policies and what each tenant holds now.
type policies struct {
	byName map[string]policy

	mu   sync.Mutex
	held map[string]*tenantHeld
}

// tenantHeld is what one tenant holds now.
type tenantHeld struct {
	sessions, runs int
	limiter        *rate.Limiter // nil: no runs_per_minute
}

// loadPolicies reads the -tenants file, JSON {"tenants": {"NAME": POLICY,
// "*": POLICY}}; the error names the file and the field at fault. An empty
// path is no policy: no tenant quotas.
func loadPolicies(path string) (*policies, error) {
	p := &policies{byName: map[string]policy{}, held: map[string]*tenantHeld{}}
	if path == "" {
		return p, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-tenants: %w", err)
	}
	var file struct {
		Tenants map[string]policy `json:"tenants"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a policy field this server does not enforce must not pass for one it does
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("-tenants %s: %w", path, err)
	}
	if file.Tenants == nil {
		return nil, fmt.Errorf("-tenants %s: no \"tenants\" object", path)
	}
	for name, pol := range file.Tenants {
		switch {
		case name == "":
			return nil, fmt.Errorf("-tenants %s: a tenant's name is empty", path)
		case pol.MaxSessions != nil && *pol.MaxSessions < 0:
			return nil, fmt.Errorf("-tenants %s: tenants.%s.max_sessions %d: must not be negative", path, name, *pol.MaxSessions)
		case pol.MaxRuns != nil && *pol.MaxRuns < 0:
			return nil, fmt.Errorf("-tenants %s: tenants.%s.max_runs %d: must not be negative", path, name, *pol.MaxRuns)
		case pol.RunsPerMinute != nil && !(*pol.RunsPerMinute > 0 && *pol.RunsPerMinute <= 1e6):
			return nil, fmt.Errorf("-tenants %s: tenants.%s.runs_per_minute %v: must be above 0 and at most 1e6", path, name, *pol.RunsPerMinute)
		}
	}
	p.byName = file.Tenants
	return p, nil
}

// of is tenant's policy: its own, else "*"'s, else none.
func (p *policies) of(tenant string) policy {
	if pol, ok := p.byName[tenant]; ok {
		return pol
	}
	return p.byName[anyTenant]
}

// heldBy is what tenant holds; p.mu is held.
func (p *policies) heldBy(tenant string) *tenantHeld {
	h := p.held[tenant]
	if h == nil {
		h = &tenantHeld{}
		if rpm := p.of(tenant).RunsPerMinute; rpm != nil {
			h.limiter = rate.NewLimiter(rate.Limit(*rpm/60), max(1, int(*rpm)))
		}
		p.held[tenant] = h
	}
	return h
}

// quotaRetry is the Retry-After of a refusal for sessions or runs at once:
// they end at their clients' pace, which the server cannot foresee.
const quotaRetry = 2 * time.Second

// quotaError is the 429 for tenant's quota, retry after the delay.
func quotaError(quota string, retry time.Duration, format string, args ...any) *apiError {
	return &apiError{status: http.StatusTooManyRequests, quota: quota, retry: retry,
		msg: fmt.Sprintf(format, args...)}
}

// takeSession counts a session for tenant, or refuses beyond its
// max_sessions; dropSession gives it back.
func (p *policies) takeSession(tenant string) *apiError {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.heldBy(tenant)
	if m := p.of(tenant).MaxSessions; m != nil && h.sessions >= *m {
		return quotaError("sessions", quotaRetry,
			"too many sessions for tenant %q: it holds its max_sessions %d; delete one or retry later", tenant, *m)
	}
	h.sessions++
	return nil
}

func (p *policies) dropSession(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heldBy(tenant).sessions--
}

// takeRun counts a run (or a background process) for tenant, or refuses
// beyond its max_runs or runs_per_minute; dropRun gives it back.
func (p *policies) takeRun(tenant string) *apiError {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.heldBy(tenant)
	pol := p.of(tenant)
	if m := pol.MaxRuns; m != nil && h.runs >= *m {
		return quotaError("runs", quotaRetry,
			"too many runs for tenant %q: it runs its max_runs %d at once; retry when one has ended", tenant, *m)
	}
	if h.limiter != nil {
		res := h.limiter.Reserve()
		if d := res.Delay(); d > 0 {
			res.Cancel()
			return quotaError("rate", d,
				"too many runs for tenant %q: beyond its runs_per_minute %v; retry after %s", tenant, *pol.RunsPerMinute, d.Round(time.Millisecond))
		}
	}
	h.runs++
	return nil
}

func (p *policies) dropRun(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heldBy(tenant).runs--
}

// retryAfter is d as a Retry-After header: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
