package service

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"
)

// A session lives in one replica's kernel and cannot move. Its id names
// that replica ("<replica>.<random>"), and a replica that gets a request
// for another's session forwards it there, through -peer-url with
// {replica} replaced: any replica can take any request, and a plain
// Service in front of them all works.

// forwardedHeader marks a request one replica forwarded to another: a
// replica forwards a request at most once, so that a wrong -peer-url or
// -replica cannot make requests go round in circles.
const forwardedHeader = "X-Toolserver-Forwarded-By"

// validReplica reports whether name can be a replica's name: a DNS label
// (lower-case letters, digits and '-', at most 63), so that it names a
// host in -peer-url's template and nothing else.
func validReplica(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// defaultReplica is this replica's name when -replica is not given: the
// pod's name, which Kubernetes puts in HOSTNAME (and the manifests in
// POD_NAME), else the host name.
func defaultReplica() string {
	for _, v := range []string{os.Getenv("POD_NAME"), os.Getenv("HOSTNAME")} {
		if v != "" {
			return v
		}
	}
	h, _ := os.Hostname()
	return h
}

// checkPeerURL checks -peer-url: an http URL with {replica} in its host.
func checkPeerURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	// A mark that parses both as a host's label and as a port.
	const mark = "65432"
	u, err := url.Parse(strings.ReplaceAll(tmpl, "{replica}", mark))
	switch {
	case err != nil:
		return fmt.Errorf("-peer-url %q: %w", tmpl, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("-peer-url %q: want an http:// or https:// URL", tmpl)
	case !strings.Contains(u.Host, mark):
		return fmt.Errorf("-peer-url %q: its host must hold {replica}, which becomes the name of the replica that owns a session, e.g. http://{replica}.toolserver-peers:8080", tmpl)
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("-peer-url %q: give no path; the request's path is kept", tmpl)
	}
	return nil
}

// peerTransport carries forwarded requests. Its dial timeout bounds how
// long a request waits for a replica that is gone.
var peerTransport = &http.Transport{
	Proxy:                 nil,
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	MaxIdleConnsPerHost:   16,
	IdleConnTimeout:       90 * time.Second,
	ResponseHeaderTimeout: 0, // a run's answer comes when the run ends
}

// forward sends r to the replica that owns session id and relays its
// answer, streams included. A replica that cannot be reached has ended its
// sessions (it was drained, or restarted): the client gets 404 saying so.
func (s *server) forward(w http.ResponseWriter, r *http.Request, replica, id string) {
	switch {
	case s.cfg.peerURL == "":
		s.notFound(w, id, fmt.Sprintf("session %s belongs to replica %s, and this server (replica %s) has no -peer-url to reach it", id, replica, s.cfg.replica))
		return
	case r.Header.Get(forwardedHeader) != "":
		s.notFound(w, id, fmt.Sprintf("session %s belongs to replica %s, but replica %s forwarded it to this one (%s): check -replica and -peer-url",
			id, replica, r.Header.Get(forwardedHeader), s.cfg.replica))
		return
	}
	target, err := url.Parse(strings.ReplaceAll(s.cfg.peerURL, "{replica}", replica))
	if err != nil {
		s.notFound(w, id, fmt.Sprintf("session %s: replica %s: %v", id, replica, err))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, s.cfg.replica)
		},
		Transport:     peerTransport,
		FlushInterval: -1, // streams as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var op *net.OpError
			var dns *net.DNSError
			if errors.As(err, &dns) || (errors.As(err, &op) && op.Op == "dial") {
				s.notFound(w, id, fmt.Sprintf("session %s ended: its replica %s cannot be reached (%v); it was drained or restarted, and its sessions ended with it; create a new session", id, replica, err))
				return
			}
			s.log.Warn("forwarding to the session's replica failed", "session", id, "replica", replica, "err", err)
			s.refuse(w, id, &apiError{status: http.StatusBadGateway, msg: fmt.Sprintf("session %s: forwarding to its replica %s failed: %v", id, replica, err)})
		},
	}
	serveProxy(rp, w, r)
}

// serveProxy relays r through rp, leaving r's body to rp's transport.
// Without full duplex, the HTTP/1 server drains and closes a request's
// body when the first byte of its answer goes out; the transport may
// still be on its way through that body (after copying Content-Length
// bytes it reads once more, to check that nothing follows), so a backend
// that answers as soon as it has the body (a stream's header) makes that
// read fail, and the transport then closes its connection to the backend
// in the middle of the answer being relayed.
func serveProxy(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	http.NewResponseController(w).EnableFullDuplex()
	rp.ServeHTTP(w, r)
}
