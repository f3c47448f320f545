package access

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// issuer verifies JWTs from one OIDC issuer. Discovery happens at the
// first request rather than at start, so that a server may start before
// its issuer; a failed discovery is tried again at a later request.
type issuer struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	lastTry  time.Time
	lastErr  error
}

func newIssuer(cfg Config) (*issuer, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.OIDCCA != "" {
		pool, err := loadPool("-oidc-ca", cfg.OIDCCA)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &issuer{cfg: cfg, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// verify checks the token's signature against the issuer's keys (the
// library fetches the JWKS again when a token names a key it lacks, so
// rotated keys are followed), its issuer, audience and expiry, and
// returns the tenant its claim names.
func (is *issuer) verify(ctx context.Context, token string) (Identity, time.Time, error) {
	v, err := is.get()
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	tok, err := v.Verify(oidc.ClientContext(ctx, is.client), token)
	if err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: the JWT was refused: %w", ErrUnauthenticated, err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: the JWT's claims: %w", ErrUnauthenticated, err)
	}
	tenant, _ := claims[is.claim()].(string)
	if !validTenant(tenant) {
		return Identity{}, time.Time{}, fmt.Errorf("%w: the JWT's claim %q (-oidc-tenant-claim) does not hold a tenant name: want lower-case letters, digits, '.', '_' and '-', at most 63", ErrUnauthenticated, is.claim())
	}
	return Identity{Tenant: tenant, Method: "jwt", Subject: "jwt iss=" + tok.Issuer + " sub=" + tok.Subject}, tok.Expiry, nil
}

func (is *issuer) claim() string {
	if is.cfg.OIDCTenantClaim == "" {
		return "sub"
	}
	return is.cfg.OIDCTenantClaim
}

func (is *issuer) get() (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.verifier != nil {
		return is.verifier, nil
	}
	if is.lastErr != nil && time.Since(is.lastTry) < 5*time.Second {
		return nil, is.lastErr
	}
	is.lastTry = time.Now()
	// The provider keeps this context to fetch rotated keys later: not
	// the request's, which ends with it.
	p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), is.client), is.cfg.OIDCIssuer)
	if err != nil {
		is.lastErr = fmt.Errorf("%w: the issuer -oidc-issuer %s cannot be reached to check the JWT: %w", ErrUnauthenticated, is.cfg.OIDCIssuer, err)
		return nil, is.lastErr
	}
	is.verifier = p.Verifier(&oidc.Config{ClientID: is.cfg.OIDCAudience})
	is.lastErr = nil
	return is.verifier, nil
}
