package access

import (
	"flag"
	"time"
)

// Config is how a server authenticates and what it answers; both servers
// take the same flags (RegisterFlags).
type Config struct {
	// APIKeys is a file of lines "TENANT sha256:HEX", HEX the SHA-256 of
	// a key; '#' starts a comment. It is re-read when it changes and on
	// SIGHUP. Empty: no API keys.
	APIKeys string
	// OIDCIssuer, OIDCAudience: bearer JWTs from this issuer (discovery
	// at ISSUER/.well-known/openid-configuration, keys from its JWKS)
	// for this audience. OIDCTenantClaim names the claim that holds the
	// tenant (default "sub"); OIDCCA is a PEM file of CAs for reaching
	// the issuer (empty: the system's).
	OIDCIssuer, OIDCAudience, OIDCTenantClaim, OIDCCA string
	// TLSCert and TLSKey serve TLS; both files are re-read when they
	// change. ClientCA, a PEM file, asks for client certificates signed
	// by it; a verified one authenticates as the tenant in its subject's
	// common name.
	TLSCert, TLSKey, ClientCA string
	// AllowHosts are further names the server answers to in the Host
	// header, beyond the listen address and localhost's names.
	AllowHosts []string
	// AllowOrigins are the Origins a request may carry ("https://x.y");
	// by default none: a request with an Origin header is refused.
	AllowOrigins []string
	// NoAuth turns authentication off, for a private network; every
	// request is tenant "default" and the log says so at every start.
	NoAuth bool
	// MaxConnsPerClient bounds the connections open at once from one
	// client address (IP); 0: DefaultMaxConnsPerClient.
	MaxConnsPerClient int
	// ReloadInterval is how often changed files are looked for; 0: 2s.
	ReloadInterval time.Duration
}

// DefaultMaxConnsPerClient is Config.MaxConnsPerClient's default.
const DefaultMaxConnsPerClient = 64

// DefaultTenant is the tenant of every request when NoAuth is set.
const DefaultTenant = "default"

// RegisterFlags defines the flags that set c on fs: -api-keys,
// -oidc-issuer, -oidc-audience, -oidc-tenant-claim, -oidc-ca, -tls-cert,
// -tls-key, -client-ca, -allow-host, -allow-origin, -insecure-no-auth,
// -max-conns-per-client.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	panic("TODO")
}

// Authenticates reports whether c configures any authentication.
func (c *Config) Authenticates() bool {
	return c.APIKeys != "" || c.OIDCIssuer != "" || c.ClientCA != ""
}
