package report

import "time"

// Connection is one attempt of a run to reach a host through the egress
// proxy: one CONNECT, or one plain HTTP request (several may share one
// kept-alive client connection), or a connection that ended before it
// sent a request (Method "", Reason says how it ended).
type Connection struct {
	Host    string `json:"host"`            // as requested, lower case: a name or an IP address; "" if the request was unreadable
	Port    int    `json:"port"`            // as requested (80 for an http:// URL without one)
	Method  string `json:"method"`          // "CONNECT" or the plain HTTP request's method; "" if unreadable or none was sent
	Allowed bool   `json:"allowed"`         // the allowlist allowed the host and at least one of its addresses
	Reason  string `json:"reason"`          // the rule that allowed it, or why it was refused
	Addr    string `json:"addr,omitempty"`  // the address dialed, "ip:port"; "" if none was
	Status  int    `json:"status"`          // status sent to the program: 200 an open tunnel, 403 refused, 502/504 upstream failed, else the upstream's; 0 if none
	Error   string `json:"error,omitempty"` // what failed after the decision (resolving, dialing, relaying); "" if nothing

	// BytesUp is every byte the program sent for this attempt, as the
	// proxy read it: the request line and headers, the body, and for a
	// tunnel everything sent through it. BytesDown is every byte the
	// proxy wrote to the program for it: the proxy's own responses, the
	// forwarded response, the tunnel's data.
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`

	Start    time.Time     `json:"start"`       // when the request's first byte arrived; for a connection that sent none, when it was accepted
	Duration time.Duration `json:"duration_ns"` // until the attempt ended (a tunnel: until it closed)
}
