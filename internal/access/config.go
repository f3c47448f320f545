package access

import (
	"flag"
	"strings"
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
	// Without it and without authentication a server may listen on
	// loopback only, and its requests are tenant "default" too.
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
	fs.StringVar(&c.APIKeys, "api-keys", "", "authenticate bearer API keys listed in `FILE`, lines \"TENANT sha256:HEX\" (HEX: printf %s \"$KEY\" | sha256sum); re-read when it changes and on SIGHUP")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "", "authenticate bearer JWTs from the OIDC issuer at `URL` (its discovery document and JWKS), with -oidc-audience")
	fs.StringVar(&c.OIDCAudience, "oidc-audience", "", "the audience (`AUD`) a JWT must be for")
	fs.StringVar(&c.OIDCTenantClaim, "oidc-tenant-claim", "sub", "the JWT `CLAIM` that names the tenant")
	fs.StringVar(&c.OIDCCA, "oidc-ca", "", "trust the CAs in PEM `FILE` to reach -oidc-issuer (default: the system's)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve TLS with the certificate in PEM `FILE` (with -tls-key); re-read when it changes")
	fs.StringVar(&c.TLSKey, "tls-key", "", "the private key of -tls-cert, PEM `FILE`")
	fs.StringVar(&c.ClientCA, "client-ca", "", "ask for client certificates signed by the CAs in PEM `FILE` (needs -tls-cert); one authenticates as the tenant in its subject's common name")
	fs.Func("allow-host", "comma-separated `NAMES` the server answers to in the Host header, beyond the listen address and localhost; others get 403", listFlag(&c.AllowHosts))
	fs.Func("allow-origin", "comma-separated `ORIGINS` (https://app.example.com) a request may come from; a request with any other Origin gets 403 (default: none)", listFlag(&c.AllowOrigins))
	fs.BoolVar(&c.NoAuth, "insecure-no-auth", false, "serve without authentication, on a private network only: whoever reaches the address runs code")
	fs.IntVar(&c.MaxConnsPerClient, "max-conns-per-client", DefaultMaxConnsPerClient, "connections open at once from one client address; beyond them a connection is closed")
}

func listFlag(v *[]string) func(string) error {
	return func(s string) error {
		for e := range strings.SplitSeq(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				*v = append(*v, e)
			}
		}
		return nil
	}
}

// Authenticates reports whether c configures any authentication.
func (c *Config) Authenticates() bool {
	return c.APIKeys != "" || c.OIDCIssuer != "" || c.ClientCA != ""
}
