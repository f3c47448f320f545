package access

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// hostNames are the names a server answers to in the Host header: its
// listen address's host when that is a name or a specific address, the
// names of localhost, and the -allow-host ones. Lower case, no port.
func hostNames(addr string, allow []string) map[string]bool {
	names := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			names[strings.ToLower(h)] = true
		}
	}
	for _, h := range allow {
		names[strings.ToLower(hostOnly(h))] = true
	}
	return names
}

// hostOnly is a Host header's name without its port or brackets.
func hostOnly(h string) string {
	if name, _, err := net.SplitHostPort(h); err == nil {
		return name
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// checkHostOrigin says why r must be refused with 403, or nil. A page in
// a browser whose name rebinds to this host sends its own name as Host
// and its own origin as Origin; a program calling the API sends neither
// of those.
func (g *Guard) checkHostOrigin(r *http.Request) error {
	if !g.hosts[strings.ToLower(hostOnly(r.Host))] {
		return fmt.Errorf("%w: Host %q is not a name this server answers to: add it with -allow-host", ErrForbidden, r.Host)
	}
	if origins, ok := r.Header["Origin"]; ok {
		for _, o := range origins {
			if !g.origins[strings.ToLower(o)] {
				return fmt.Errorf("%w: requests from Origin %q are not allowed: a browser page may call this server only from an origin given with -allow-origin", ErrForbidden, o)
			}
		}
	}
	return nil
}
