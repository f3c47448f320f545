package service

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/fumehood/sandbox/internal/access"
)

// guarded is the server's handler behind g: every request must carry a
// Host the server answers to, no foreign Origin, and a credential, except
// the probes. /healthz and /readyz are what a kubelet asks, with no token
// and the pod's IP as Host; they say nothing but "ok" and "ready".
// /metrics is scraped by the pod's IP too: it needs a credential, but any
// Host.
func (s *server) guarded(g *access.Guard) http.Handler {
	routes := s.routes()
	checked := g.Wrap(routes, s.refuseAccess)
	metrics := g.WrapAnyHost(routes, s.refuseAccess)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz":
			routes.ServeHTTP(w, r)
		case "/metrics":
			metrics.ServeHTTP(w, r)
		default:
			checked.ServeHTTP(w, r)
		}
	})
}

// refuseAccess answers a request the guard refused with the service's JSON
// error, and counts it; the guard has set WWW-Authenticate or Retry-After.
func (s *server) refuseAccess(w http.ResponseWriter, r *http.Request, status int, err error) {
	reason := "forbidden"
	switch {
	case errors.Is(err, access.ErrUnauthenticated) || status == http.StatusUnauthorized:
		reason = "unauthenticated"
	case status == http.StatusTooManyRequests:
		reason = "full"
	}
	id := rand.Text()
	s.metrics.reject(reason)
	s.log.Info("rejected", "id", id, "reason", reason, "status", status, "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "err", err.Error())
	writeJSON(w, status, errorBody{ID: id, Error: err.Error()})
}

// tenantOf is the tenant a request authenticated as; a request the guard
// did not see (none in the server, as the tests' handlers) is the default
// tenant, as with authentication turned off.
func tenantOf(r *http.Request) string {
	if id, ok := access.FromContext(r.Context()); ok && id.Tenant != "" {
		return id.Tenant
	}
	return access.DefaultTenant
}

// otherTenants labels in metrics the tenants that neither an API key nor
// the -tenants file names: those of JWTs and certificates under "*", whose
// number nothing bounds.
const otherTenants = "other"

// tenantLabel is r's tenant as metrics label it: its name when the
// tenants are few (API keys' and the -tenants file's, or the one of a
// server without authentication), else otherTenants.
func (s *server) tenantLabel(r *http.Request) string {
	id, ok := access.FromContext(r.Context())
	if !ok {
		return access.DefaultTenant
	}
	if _, named := s.policies.rules.Load().byName[id.Tenant]; named || id.Method == "api-key" || id.Method == "none" {
		return id.Tenant
	}
	return otherTenants
}

// peerHost is the Host another replica sends when it forwards a request to
// this one: -peer-url's, with {replica} this replica's name; empty without
// -peer-url.
func peerHost(cfg *config) string {
	if cfg.peerURL == "" {
		return ""
	}
	u, err := url.Parse(strings.ReplaceAll(cfg.peerURL, "{replica}", cfg.replica))
	if err != nil {
		return ""
	}
	return u.Host
}
