package image

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// isLoopback says whether host (a registry's host[:port]) is this machine
// by its address or the name localhost. Other names are not resolved: what
// a name resolves to can change between the check and the connection.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// plainHTTPGuard refuses requests in plain HTTP unless they go to a
// loopback address and the caller allowed it. go-containerregistry falls
// back to plain HTTP by itself for some registries (loopback, and private
// RFC 1918 addresses); this keeps that fallback from happening unasked,
// also on a redirect or a token server named by a registry.
type plainHTTPGuard struct {
	next     http.RoundTripper
	insecure bool
}

func (g plainHTTPGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(g.insecure && isLoopback(req.URL.Host)) {
		return nil, fmt.Errorf("%s: plain HTTP to %s refused (allowed only with Insecure, to a loopback registry): %w",
			req.URL.Redacted(), req.URL.Host, ErrInsecure)
	}
	return g.next.RoundTrip(req)
}

// newTransport is the HTTP transport of one pull.
func newTransport(insecure bool) http.RoundTripper {
	base := remote.DefaultTransport.(*http.Transport).Clone()
	return plainHTTPGuard{next: base, insecure: insecure}
}
