package service

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
)

// proxyPort answers /v1/sessions/{id}/ports/{port}/{path...}: the request,
// any method, goes to an HTTP server listening on port on the session's
// loopback, as /{path} with its query, and its answer comes back as it
// comes. Nothing in the session is exposed on the host's network: the
// server dials into the sandbox's network namespace for each connection.
func (s *server) proxyPort(w http.ResponseWriter, r *http.Request, ss *session) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		s.refuse(w, ss.id, badField("port", "%q: want a TCP port from 1 to 65535 that a program in the session listens on", r.PathValue("port")))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			pr.Out.URL.Path = "/" + pr.In.PathValue("path")
			pr.Out.URL.RawPath = ""
			pr.Out.Host = pr.Out.URL.Host
		},
		Transport:     ss.transport(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.refuse(w, ss.id, &apiError{status: http.StatusBadGateway, field: "port",
				msg: fmt.Sprintf("port %d in session %s: %v (does a program in the session listen on 127.0.0.1:%d?)", port, ss.id, err, port)})
		},
	}
	serveProxy(rp, w, r)
}

// transport is the session's HTTP transport into its sandbox, made at its
// first use; its connections close with the session.
func (ss *session) transport() *http.Transport {
	ss.transportOnce.Do(func() {
		ss.httpTransport = &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return ss.dial(ctx, addr)
			},
			MaxIdleConnsPerHost: 4,
		}
	})
	return ss.httpTransport
}

// sessionTransport is the part of a session the port proxy keeps.
type sessionTransport struct {
	transportOnce sync.Once
	httpTransport *http.Transport
}

// closeTransport closes the port proxy's idle connections into the
// session, for its end.
func (ss *session) closeTransport() {
	ss.transportOnce.Do(func() {})
	if ss.httpTransport != nil {
		ss.httpTransport.CloseIdleConnections()
	}
}
