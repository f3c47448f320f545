package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/fumehood/sandbox/internal/access"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Timeouts of the HTTP server. There is no write timeout: a GET's event
// stream lasts as long as its session. A body's own deadline is
// mcpBodyTimeout.
const (
	mcpHeaderTimeout = 10 * time.Second
	mcpIdleTimeout   = 2 * time.Minute
)

// prmPath is where the protected resource metadata (RFC 9728) of /mcp is
// served; the bare well-known path serves it too, for clients that look
// there.
const prmPath = "/.well-known/oauth-protected-resource"

// serveHTTP serves streamable HTTP on addr until ctx is canceled: the
// guard's Host and Origin checks first, then authentication, then the
// session limit, then the SDK.
func (srv *mcpServer) serveHTTP(ctx context.Context, addr string) error {
	var trail slog.Handler
	if a := srv.cfg.cfg.opts.Audit; a != nil {
		trail = a.Handler
	}
	guard, err := access.New(srv.cfg.access, addr, srv.log, trail)
	if err != nil {
		return err
	}
	defer guard.Close()
	ln, err := guard.Listen(ctx, addr)
	if err != nil {
		return err
	}
	scheme := "http"
	if srv.cfg.access.TLSCert != "" {
		scheme = "https"
	}
	base := scheme + "://" + ln.Addr().String()

	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: srv.cfg.sessionTimeout, Logger: srv.sdkLog})
	var endpoint http.Handler = srv.bindSessions(checkHTTPMessage(srv.limitSessions(sdk)))
	// Without -api-keys, -oidc-issuer or -client-ca the server listens on
	// loopback only (checkListenAddr, access.New), as it did before it
	// authenticated, or was told to trust its network (-insecure-no-auth).
	if srv.cfg.access.Authenticates() && !srv.cfg.access.NoAuth {
		inner := endpoint
		bearer := func(r *http.Request) http.Handler {
			return auth.RequireBearerToken(bearerVerifier(guard), &auth.RequireBearerTokenOptions{
				ResourceMetadataURL: resourceURL(r, scheme, prmPath+"/mcp"),
				// An API key has no expiry; a JWT's is checked here too.
				AllowMissingExpiration: true,
			})(inner)
		}
		endpoint = clientCertFirst(guard, scheme, bearer, inner)
	} else {
		endpoint = asDefaultTenant(endpoint)
	}
	prm := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := &oauthex.ProtectedResourceMetadata{
			Resource:               resourceURL(r, scheme, "/mcp"),
			BearerMethodsSupported: []string{"header"},
		}
		if srv.cfg.access.OIDCIssuer != "" {
			md.AuthorizationServers = []string{srv.cfg.access.OIDCIssuer}
		}
		auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", endpoint)
	mux.Handle(prmPath, prm)
	mux.Handle(prmPath+"/mcp", prm)
	hs := &http.Server{
		Handler:           guard.CheckHostOrigin(mux, refuseHTTP),
		ReadHeaderTimeout: mcpHeaderTimeout,
		IdleTimeout:       mcpIdleTimeout,
	}
	srv.log.Info("sandbox mcp: serving streamable HTTP", "url", base+"/mcp")
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(shut)
		return nil
	}
}

// bearerVerifier checks a bearer token with the guard. The tenant becomes
// the token's UserID, which the SDK binds the session to: another tenant
// presenting the session's id is refused.
func bearerVerifier(guard *access.Guard) auth.TokenVerifier {
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		id, exp, err := guard.VerifyToken(ctx, token, r)
		if err != nil {
			if errors.Is(err, access.ErrUnauthenticated) {
				return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
			}
			return nil, err
		}
		return &auth.TokenInfo{UserID: id.Tenant, Expiration: exp}, nil
	}
}

// clientCertFirst lets a request that carries a verified client
// certificate and no Authorization header through to plain on the
// certificate alone, and refuses one with neither, saying what to send;
// a request with an Authorization header goes to bearer. The SDK binds
// only a bearer token's UserID to a session: bindSessions, behind this,
// binds a certificate's tenant.
func clientCertFirst(guard *access.Guard, scheme string, bearer func(*http.Request) http.Handler, plain http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			bearer(r).ServeHTTP(w, r)
			return
		}
		id, err := guard.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer resource_metadata=%q", resourceURL(r, scheme, prmPath+"/mcp")))
			refuseHTTP(w, r, http.StatusUnauthorized, err)
			return
		}
		plain.ServeHTTP(w, r.WithContext(access.WithIdentity(r.Context(), id)))
	})
}

// resourceURL is the URL of path on this server as r's client names it:
// the protected resource metadata must name the URL the client used, and
// the guard has checked r's Host.
func resourceURL(r *http.Request, scheme, path string) string {
	return scheme + "://" + r.Host + path
}

// asDefaultTenant serves every request as access.DefaultTenant, the
// tenant of a server that does not authenticate.
func asDefaultTenant(next http.Handler) http.Handler {
	id := access.Identity{Tenant: access.DefaultTenant, Method: "none"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(access.WithIdentity(r.Context(), id)))
	})
}

// refuseHTTP words a refusal of the guard as a JSON-RPC error, which is
// what an MCP client reads from a response.
func refuseHTTP(w http.ResponseWriter, r *http.Request, status int, err error) {
	writeRPCError(w, status, "sandbox mcp: "+err.Error())
}

// writeRPCError answers a request with a JSON-RPC error of no id, under
// an HTTP status that says what went wrong.
func writeRPCError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32000, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
