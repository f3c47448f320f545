package access

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
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
// (a JSON error, a JSON-RPC error): status is 401, 403 or 429, err wraps
// ErrUnauthenticated or ErrForbidden and says what to do. The Guard has
// set WWW-Authenticate (401) or Retry-After (429) before calling it.
type Refusal func(w http.ResponseWriter, r *http.Request, status int, err error)

// Guard checks every request of one server and owns its listener's TLS
// and connection bounds.
type Guard struct {
	// ResourceMetadata, when set, is the URL of the server's OAuth
	// protected resource metadata (RFC 9728), named in 401s'
	// WWW-Authenticate.
	ResourceMetadata string
}

// New checks cfg for a server that listens on addr and starts watching
// its files until Close. A non-loopback addr without authentication (and
// without NoAuth) is refused, naming the flags. log receives the
// warnings (NoAuth at every start, a reload that failed); audit, if not
// nil, receives an event for every refused authentication, with the
// tenant it claimed where known and never the credential.
func New(cfg Config, addr string, log *slog.Logger, audit slog.Handler) (*Guard, error) {
	panic("TODO")
}

// Listen listens on addr: TLS when configured (client certificates
// asked for with ClientCA), at most MaxConnsPerClient connections open
// at once from one client IP (beyond them a connection is closed at
// once).
func (g *Guard) Listen(ctx context.Context, addr string) (net.Listener, error) {
	panic("TODO")
}

// Wrap returns next behind the checks, in this order: the Host (403),
// the Origin (403), then authentication (401 with WWW-Authenticate).
// next sees the Identity in its request's context (FromContext).
func (g *Guard) Wrap(next http.Handler, refuse Refusal) http.Handler {
	panic("TODO")
}

// CheckHostOrigin is Wrap's first two checks alone, for a handler that
// authenticates another way (the MCP SDK's bearer middleware calling
// VerifyToken).
func (g *Guard) CheckHostOrigin(next http.Handler, refuse Refusal) http.Handler {
	panic("TODO")
}

// Authenticate finds r's Identity: its client certificate, its bearer
// API key or JWT. The error wraps ErrUnauthenticated and says why
// without quoting the credential.
func (g *Guard) Authenticate(r *http.Request) (Identity, error) {
	panic("TODO")
}

// Close stops watching the files.
func (g *Guard) Close() {}
