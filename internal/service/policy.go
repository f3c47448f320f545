package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/fumehood/sandbox"

	"github.com/fumehood/sandbox/internal/access"
)

// policy is what one tenant may ask for and hold at once, from the
// -tenants file. An omitted maximum is the server's flag; an omitted quota
// is no quota of the tenant's own: the server-wide flags (-max-sessions,
// -max-concurrent, -max-queue) still bound every tenant.
type policy struct {
	MaxMemory  quantity  `json:"max_memory"`  // within -max-memory
	MaxOutput  quantity  `json:"max_output"`  // within -max-output
	MaxCPUs    *float64  `json:"max_cpus"`    // within -max-cpus
	MaxPids    *int64    `json:"max_pids"`    // within -max-pids
	MaxTimeout string    `json:"max_timeout"` // within -max-timeout
	Egress     *[]string `json:"egress"`      // each in -egress
	Images     *[]string `json:"images"`      // each in -images
	// Secrets a request of the tenant may ask for by name.
	Secrets []secretPolicy `json:"secrets"`

	MaxSessions   *int     `json:"max_sessions"`    // live sessions
	MaxRuns       *int     `json:"max_runs"`        // runs and background processes at once
	RunsPerMinute *float64 `json:"runs_per_minute"` // runs and background processes started
}

// secretPolicy is a secret of a tenant's: its value is read at start from
// the environment variable Env or the file File, never from the file.
type secretPolicy struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
	Env   string   `json:"env"`
	File  string   `json:"file"`
}

// policyRules are the policies of one reading of the -tenants file.
type policyRules struct {
	byName map[string]policy
	// limits are the server's config narrowed by each named policy.
	limits map[string]*config
}

// anyTenant names the policy of every tenant the file does not name.
const anyTenant = "*"

// policies are the tenants' policies and what each tenant holds now.
type policies struct {
	// rules are the file's as last loaded; SIGHUP loads them anew.
	rules atomic.Pointer[policyRules]

	mu   sync.Mutex
	held map[string]*tenantHeld
}

// tenantHeld is what one tenant holds now.
type tenantHeld struct {
	sessions, runs int
	readers        int           // request bodies being read
	limiter        *rate.Limiter // nil: no runs_per_minute
}

// loadPolicies reads the -tenants file, JSON {"tenants": {"NAME": POLICY,
// "*": POLICY}}; the error names the file and the field at fault. An empty
// path is no policy: no tenant quotas.
func loadPolicies(path string, server *config) (*policies, error) {
	p := &policies{held: map[string]*tenantHeld{}}
	rules := &policyRules{byName: map[string]policy{}, limits: map[string]*config{}}
	p.rules.Store(rules)
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
		c, err := narrow(server, pol)
		if err != nil {
			return nil, fmt.Errorf("-tenants %s: tenants.%s.%w", path, name, err)
		}
		rules.limits[name] = c
	}
	rules.byName = file.Tenants
	return p, nil
}

// reload reads the -tenants file anew: later requests are held to its
// policies, and what each tenant holds now stays counted (a quota lowered
// below it refuses new requests until enough have ended). On an error the
// policies stay as they were.
func (p *policies) reload(path string, server *config) error {
	np, err := loadPolicies(path, server)
	if err != nil {
		return err
	}
	p.rules.Store(np.rules.Load())
	p.mu.Lock()
	defer p.mu.Unlock()
	for tenant, h := range p.held {
		h.limiter = newLimiter(p.of(tenant))
		p.forget(tenant, h)
	}
	return nil
}

// reloadOnHUP reloads the -tenants file at every SIGHUP until ctx ends.
func (s *server) reloadOnHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := s.policies.reload(s.cfg.tenants, s.cfg); err != nil {
				s.log.Error("the -tenants file did not reload: the policies stay as they were", "err", err)
				continue
			}
			s.log.Info("tenants reloaded", "file", s.cfg.tenants)
		}
	}
}

// of is tenant's policy: its own, else "*"'s, else none.
func (p *policies) of(tenant string) policy {
	r := p.rules.Load()
	if pol, ok := r.byName[tenant]; ok {
		return pol
	}
	return r.byName[anyTenant]
}

// newLimiter is the rate limiter of pol's runs_per_minute, nil without
// one: its burst is a minute's runs.
func newLimiter(pol policy) *rate.Limiter {
	if rpm := pol.RunsPerMinute; rpm != nil {
		return rate.NewLimiter(rate.Limit(*rpm/60), max(1, int(*rpm)))
	}
	return nil
}

// narrow is server's config with pol's maxima, each within the server's;
// the error starts with the policy's field.
func narrow(server *config, pol policy) (*config, error) {
	c := *server
	if pol.MaxMemory != "" {
		n, err := parseSize(string(pol.MaxMemory))
		switch {
		case err != nil:
			return nil, fmt.Errorf("max_memory: %w", err)
		case n < 1<<20 || n > server.maxMemory:
			return nil, fmt.Errorf("max_memory %s: want from 1M to -max-memory %s", pol.MaxMemory, formatSize(server.maxMemory))
		}
		c.maxMemory = n
	}
	if pol.MaxOutput != "" {
		n, err := parseSize(string(pol.MaxOutput))
		switch {
		case err != nil:
			return nil, fmt.Errorf("max_output: %w", err)
		case n > server.maxOutput:
			return nil, fmt.Errorf("max_output %s: above -max-output %s", pol.MaxOutput, formatSize(server.maxOutput))
		}
		c.maxOutput = n
	}
	if v := pol.MaxCPUs; v != nil {
		if !(*v >= 0.01 && *v <= server.maxCPUs) {
			return nil, fmt.Errorf("max_cpus %v: want from 0.01 to -max-cpus %v", *v, server.maxCPUs)
		}
		c.maxCPUs = *v
	}
	if v := pol.MaxPids; v != nil {
		if *v < 1 || *v > server.maxPids {
			return nil, fmt.Errorf("max_pids %d: want from 1 to -max-pids %d", *v, server.maxPids)
		}
		c.maxPids = *v
	}
	if pol.MaxTimeout != "" {
		d, err := time.ParseDuration(pol.MaxTimeout)
		if err != nil || d <= 0 || d > server.maxTimeout {
			return nil, fmt.Errorf("max_timeout %q: want a duration above 0 and at most -max-timeout %s", pol.MaxTimeout, server.maxTimeout)
		}
		c.maxTimeout = d
		c.defaultTimeout = min(c.defaultTimeout, d)
	}
	if pol.Egress != nil {
		for i, e := range *pol.Egress {
			if !slices.Contains(server.egress, e) {
				return nil, fmt.Errorf("egress[%d] %q: not in -egress %q", i, e, server.egress)
			}
		}
		c.egress = slices.Clone(*pol.Egress)
	}
	if pol.Images != nil {
		for i, ref := range *pol.Images {
			if !slices.Contains(server.images, ref) {
				return nil, fmt.Errorf("images[%d] %q: not in -images %q", i, ref, server.images)
			}
		}
		c.images = slices.Clone(*pol.Images)
	}
	c.secrets = map[string]sandbox.Secret{}
	for i, sp := range pol.Secrets {
		var value string
		switch {
		case sp.Name == "":
			return nil, fmt.Errorf("secrets[%d]: no name", i)
		case (sp.Env == "") == (sp.File == ""):
			return nil, fmt.Errorf("secrets[%d] %s: give one of env and file", i, sp.Name)
		case sp.Env != "":
			value = os.Getenv(sp.Env)
			if value == "" {
				return nil, fmt.Errorf("secrets[%d] %s: environment variable %s is empty or unset", i, sp.Name, sp.Env)
			}
		default:
			b, err := os.ReadFile(sp.File)
			if err != nil {
				return nil, fmt.Errorf("secrets[%d] %s: %w", i, sp.Name, err)
			}
			value = strings.TrimRight(string(b), "\r\n")
		}
		if _, dup := c.secrets[sp.Name]; dup {
			return nil, fmt.Errorf("secrets[%d] %s: named twice", i, sp.Name)
		}
		c.secrets[sp.Name] = sandbox.Secret{Name: sp.Name, Value: value, Hosts: slices.Clone(sp.Hosts)}
	}
	return &c, nil
}

// secretsOf resolves a request's secrets: names of c's.
func (c *config) secretsOf(names []string) ([]sandbox.Secret, *apiError) {
	var out []sandbox.Secret
	for _, n := range names {
		sec, ok := c.secrets[n]
		if !ok {
			return nil, badField("secrets", "%q is not a secret of %s policy (its -tenants entry)", n, c.whose())
		}
		if slices.ContainsFunc(out, func(o sandbox.Secret) bool { return o.Name == n }) {
			return nil, badField("secrets", "%q named twice", n)
		}
		out = append(out, sec)
	}
	return out, nil
}

// cfgFor is the server's config narrowed by tenant's policy: what its
// requests may ask for, and whose maxima the refusals name.
func (s *server) cfgFor(tenant string) *config {
	limits := s.policies.rules.Load().limits
	c := limits[tenant]
	if c == nil {
		c = limits[anyTenant]
	}
	if c == nil {
		return s.cfg
	}
	named := *c
	named.tenant = tenant
	return &named
}

// heldBy is what tenant holds; p.mu is held.
func (p *policies) heldBy(tenant string) *tenantHeld {
	h := p.held[tenant]
	if h == nil {
		h = &tenantHeld{limiter: newLimiter(p.of(tenant))}
		p.held[tenant] = h
	}
	return h
}

// forget drops what tenant holds once it holds nothing and its rate has
// nothing to remember, so that tenants come and go ("*" admits any) without the map
// growing; p.mu is held.
func (p *policies) forget(tenant string, h *tenantHeld) {
	// A full bucket is what a new limiter would start with.
	rested := h.limiter == nil || h.limiter.Tokens() >= float64(h.limiter.Burst())
	if h.sessions == 0 && h.runs == 0 && h.readers == 0 && rested {
		delete(p.held, tenant)
	}
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
	h := p.heldBy(tenant)
	h.sessions--
	p.forget(tenant, h)
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
	h := p.heldBy(tenant)
	h.runs--
	p.forget(tenant, h)
}

// readerQueue is how many bodies a tenant with max_runs may have read
// beyond that many: the requests that would wait for its runs.
const readerQueue = 4

// readersFor is how many request bodies tenant may have read at once: its
// max_runs plus readerQueue, else half the server's places (at least one);
// the tenant of a server without authentication, the only one, all of
// them.
func (s *server) readersFor(tenant string) int {
	if m := s.policies.of(tenant).MaxRuns; m != nil {
		return *m + readerQueue
	}
	if tenant == access.DefaultTenant {
		return cap(s.reading)
	}
	return max(1, cap(s.reading)/2)
}

// takeReader counts a body being read for tenant, or refuses beyond max;
// dropReader gives it back.
func (p *policies) takeReader(tenant string, max int) *apiError {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.heldBy(tenant)
	if h.readers >= max {
		return quotaError("queue", quotaRetry,
			"too many requests of tenant %q being read at once (%d); retry later", tenant, max)
	}
	h.readers++
	return nil
}

func (p *policies) dropReader(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.heldBy(tenant)
	h.readers--
	p.forget(tenant, h)
}

// retryAfter is d as a Retry-After header: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
