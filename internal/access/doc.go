// Package access decides who may talk to the two network servers of the
// sandbox binary, `sandbox serve` and `sandbox mcp --http`, which run it in
// their own process: what a listener accepts (TLS, client certificates, a
// bound on connections per client address), which Host and Origin a
// request may carry, and which tenant a request authenticates as (an API
// key, an OIDC issuer's JWT, a client certificate).
//
// The safe setup is the default: a server listens on loopback unless
// authentication is configured, and a request with a foreign Host or any
// Origin not allowed is refused before anything else reads it. The
// network a server listens on is never trusted.
package access
