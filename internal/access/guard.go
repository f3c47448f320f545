package access

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// ErrUnauthenticated is what a request without a valid credential gets
// (401); ErrForbidden one with a foreign Host or Origin (403).
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	// ErrConfig wraps a Config that cannot be used: a non-loopback
	// listen address without authentication, an unreadable key file.
	ErrConfig = errors.New("access configuration")
)

// Refusal is how a server words a refused request in its own shape
// (a JSON error, a JSON-RPC error): status is 401 or 403, err wraps
// ErrUnauthenticated or ErrForbidden and says what to do. The Guard has
// set WWW-Authenticate (401) before calling it.
type Refusal func(w http.ResponseWriter, r *http.Request, status int, err error)

// Guard checks every request of one server and owns its listener's TLS
// and connection bounds.
type Guard struct {
	// ResourceMetadata, when set, is the URL of the server's OAuth
	// protected resource metadata (RFC 9728), named in 401s'
	// WWW-Authenticate.
	ResourceMetadata string

	cfg       Config
	log       *slog.Logger
	audit     *slog.Logger // nil: no audit trail
	hosts     map[string]bool
	origins   map[string]bool
	keys      *reloaded[[]apiKey]
	cert      *reloaded[*tls.Certificate]
	clientCAs *x509.CertPool
	issuer    *issuer
	stop      chan struct{}
	stopped   chan struct{}
}

// New checks cfg for a server that listens on addr and starts watching
// its files until Close. A non-loopback addr without authentication (and
// without NoAuth) is refused, naming the flags. log receives the
// warnings (NoAuth at every start, a reload that failed); audit, if not
// nil, receives an event for every refused authentication, with the
// tenant it claimed where known and never the credential.
func New(cfg Config, addr string, log *slog.Logger, audit slog.Handler) (*Guard, error) {
	if err := cfg.check(addr); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, log: log, hosts: hostNames(addr, cfg.AllowHosts), origins: map[string]bool{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
	if audit != nil {
		g.audit = slog.New(audit)
	}
	for _, o := range cfg.AllowOrigins {
		g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	var err error
	if cfg.APIKeys != "" {
		if g.keys, err = newReloaded("-api-keys", []string{cfg.APIKeys}, func() ([]apiKey, error) { return readKeys(cfg.APIKeys) }, log); err != nil {
			return nil, err
		}
	}
	if cfg.TLSCert != "" {
		load := func() (*tls.Certificate, error) { return loadPair(cfg.TLSCert, cfg.TLSKey) }
		if g.cert, err = newReloaded("-tls-cert", []string{cfg.TLSCert, cfg.TLSKey}, load, log); err != nil {
			return nil, err
		}
	}
	if cfg.ClientCA != "" {
		if g.clientCAs, err = loadPool("-client-ca", cfg.ClientCA); err != nil {
			return nil, err
		}
	}
	if cfg.OIDCIssuer != "" {
		if g.issuer, err = newIssuer(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.NoAuth {
		log.Warn("access: authentication is off (-insecure-no-auth): whoever reaches "+addr+" runs code here as tenant "+DefaultTenant,
			"addr", addr)
	}
	// Registered before New returns, so that a SIGHUP sent once the
	// server is up is never lost to a watcher not yet listening.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go g.watch(hup)
	return g, nil
}

// check refuses a Config that cannot be used.
func (c *Config) check(addr string) error {
	switch {
	case c.OIDCIssuer != "" && c.OIDCAudience == "":
		return fmt.Errorf("%w: -oidc-issuer needs -oidc-audience, the audience a JWT must be for", ErrConfig)
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("%w: -tls-cert and -tls-key go together", ErrConfig)
	case c.ClientCA != "" && c.TLSCert == "":
		return fmt.Errorf("%w: -client-ca needs -tls-cert and -tls-key: client certificates come over TLS", ErrConfig)
	case c.NoAuth && c.Authenticates():
		return fmt.Errorf("%w: -insecure-no-auth with -api-keys, -oidc-issuer or -client-ca: choose one", ErrConfig)
	case c.MaxConnsPerClient < 0:
		return fmt.Errorf("%w: -max-conns-per-client %d: must not be negative", ErrConfig, c.MaxConnsPerClient)
	}
	if !c.Authenticates() && !c.NoAuth && !Loopback(addr) {
		return fmt.Errorf("%w: %s listens beyond this machine with no authentication: whoever reaches it would run code here; "+
			"give -api-keys FILE, -oidc-issuer URL with -oidc-audience AUD, or -client-ca FILE (with -tls-cert and -tls-key); "+
			"or listen on loopback (127.0.0.1:PORT); or, on a private network only, -insecure-no-auth", ErrConfig, addr)
	}
	return nil
}

// Loopback reports whether addr's host is a loopback address or
// localhost. An empty host, 0.0.0.0 and :: listen everywhere.
func Loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// watch reloads the files when they change and on SIGHUP, which hup
// hears.
func (g *Guard) watch(hup chan os.Signal) {
	defer close(g.stopped)
	defer signal.Stop(hup)
	every := g.cfg.ReloadInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		force := false
		select {
		case <-g.stop:
			return
		case <-hup:
			force = true
		case <-tick.C:
		}
		if g.keys != nil {
			g.keys.check(force)
		}
		if g.cert != nil {
			g.cert.check(force)
		}
	}
}

// Listen listens on addr: TLS when configured (client certificates
// asked for with ClientCA), at most MaxConnsPerClient connections open
// at once from one client IP (beyond them a connection is closed at
// once).
func (g *Guard) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	tcp, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	max := g.cfg.MaxConnsPerClient
	if max == 0 {
		max = DefaultMaxConnsPerClient
	}
	var ln net.Listener = &perClientListener{Listener: tcp, max: max, log: g.log, open: map[string]int{}}
	if g.cert != nil {
		ln = tls.NewListener(ln, g.tlsConfig())
	}
	return ln, nil
}

// Wrap returns next behind the checks, in this order: the Host (403),
// the Origin (403), then authentication (401 with WWW-Authenticate).
// next sees the Identity in its request's context (FromContext).
func (g *Guard) Wrap(next http.Handler, refuse Refusal) http.Handler {
	return g.CheckHostOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := g.Authenticate(r)
		if err != nil {
			g.challenge(w, r)
			refuse(w, r, http.StatusUnauthorized, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	}), refuse)
}

// WrapAnyHost is Wrap without the Host check, for a route that a
// program reaches by an address no name stands for (Prometheus scraping
// a pod by its IP). It still refuses a foreign Origin and needs a
// credential, which a page in a browser rebinding a name cannot send.
func (g *Guard) WrapAnyHost(next http.Handler, refuse Refusal) http.Handler {
	auth := g.Wrap(next, refuse)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.Host = "localhost"
		auth.ServeHTTP(w, r2)
	})
}

// challenge sets a 401's WWW-Authenticate (RFC 6750; RFC 9728's
// resource_metadata when the server has such a document).
func (g *Guard) challenge(w http.ResponseWriter, r *http.Request) {
	c := `Bearer realm="sandbox"`
	if _, given := bearer(r); given {
		c += `, error="invalid_token"`
	}
	if g.ResourceMetadata != "" {
		c += fmt.Sprintf(`, resource_metadata=%q`, g.ResourceMetadata)
	}
	w.Header().Set("WWW-Authenticate", c)
}

// CheckHostOrigin is Wrap's first two checks alone, for a handler that
// authenticates another way (the MCP SDK's bearer middleware calling
// VerifyToken).
func (g *Guard) CheckHostOrigin(next http.Handler, refuse Refusal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.checkHostOrigin(r); err != nil {
			if g.audit != nil {
				g.audit.Warn("request refused", "remote", r.RemoteAddr, "host", r.Host, "origin", r.Header.Get("Origin"), "reason", err.Error())
			}
			refuse(w, r, http.StatusForbidden, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// open reports whether requests need no credential: with
// -insecure-no-auth, or on loopback (New refuses any other address) with
// no authentication configured.
func (g *Guard) open() bool {
	return g.cfg.NoAuth || !g.cfg.Authenticates()
}

// Open reports whether the Guard lets requests in without a credential,
// as tenant DefaultTenant.
func (g *Guard) Open() bool { return g.open() }

// bearer is r's bearer token, and whether an Authorization was given.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// Authenticate finds r's Identity: its client certificate, its bearer
// API key or JWT. The error wraps ErrUnauthenticated and says why
// without quoting the credential.
func (g *Guard) Authenticate(r *http.Request) (Identity, error) {
	if g.open() {
		return Identity{Tenant: DefaultTenant, Method: "none"}, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		if validTenant(cert.Subject.CommonName) {
			return Identity{Tenant: cert.Subject.CommonName, Method: "client-cert",
				Subject: fmt.Sprintf("client-cert subject=%q serial=%s", cert.Subject.String(), cert.SerialNumber)}, nil
		}
		err := fmt.Errorf("%w: the client certificate's common name %q is not a tenant name", ErrUnauthenticated, cert.Subject.CommonName)
		g.refused(r, "client-cert", err, "")
		return Identity{}, err
	}
	tok, given := bearer(r)
	if !given {
		err := fmt.Errorf("%w: this server needs a credential: send Authorization: Bearer KEY", ErrUnauthenticated)
		g.refused(r, "none", err, "")
		return Identity{}, err
	}
	if tok == "" {
		err := fmt.Errorf("%w: the Authorization header is not \"Bearer TOKEN\"", ErrUnauthenticated)
		g.refused(r, "none", err, "")
		return Identity{}, err
	}
	id, _, err := g.verifyToken(r, tok)
	return id, err
}

// VerifyToken checks a bearer token, as Authenticate does, for a
// middleware that has taken it from the request itself. The time is the
// token's expiry, zero for an API key, which does not expire.
func (g *Guard) VerifyToken(ctx context.Context, token string, r *http.Request) (Identity, time.Time, error) {
	if g.open() {
		return Identity{Tenant: DefaultTenant, Method: "none"}, time.Time{}, nil
	}
	return g.verifyToken(r.WithContext(ctx), token)
}

func (g *Guard) verifyToken(r *http.Request, tok string) (Identity, time.Time, error) {
	if g.issuer != nil && strings.Count(tok, ".") == 2 {
		id, exp, err := g.issuer.verify(r.Context(), tok)
		if err != nil {
			g.refused(r, "jwt", err, "")
		}
		return id, exp, err
	}
	if g.keys != nil {
		if k, ok := matchKey(g.keys.get(), tok); ok {
			return Identity{Tenant: k.tenant, Method: "api-key", Subject: fmt.Sprintf("api-keys line %d", k.line)}, time.Time{}, nil
		}
	}
	err := fmt.Errorf("%w: the bearer token is not a key this server knows (-api-keys) nor a JWT of its issuer", ErrUnauthenticated)
	g.refused(r, "api-key", err, "")
	return Identity{}, time.Time{}, err
}

// refused writes a refused authentication to the audit trail, without
// the credential.
func (g *Guard) refused(r *http.Request, method string, err error, tenant string) {
	if g.audit == nil {
		return
	}
	attrs := []any{"method", method, "remote", r.RemoteAddr, "path", r.URL.Path, "reason", err.Error()}
	if tenant != "" {
		attrs = append(attrs, "tenant", tenant)
	}
	g.audit.Warn("authentication refused", attrs...)
}

// Close stops watching the files.
func (g *Guard) Close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
		<-g.stopped
	}
}
