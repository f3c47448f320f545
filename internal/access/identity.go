package access

import "context"

// Identity is who a request comes from, as authentication found it.
type Identity struct {
	// Tenant owns what the request creates; policies and quotas are
	// per tenant.
	Tenant string
	// Method is how the request authenticated: "api-key", "jwt",
	// "client-cert", or "none" when authentication is turned off.
	Method string
	// Subject names the credential for the audit trail without holding
	// it: the key's line in the key file, the JWT's iss and sub, the
	// certificate's subject and serial.
	Subject string
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the Identity a Guard put in ctx, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
