package main

import (
	"net/http"

	"github.com/fumehood/sandbox/internal/access"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// tenantOf is the tenant r authenticated as: its bearer token's, or its
// client certificate's. Empty without authentication.
func tenantOf(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	if id, ok := access.FromContext(r.Context()); ok {
		return id.Tenant
	}
	return ""
}

// bindSessions keeps each MCP session to the tenant that opened it,
// whichever way it authenticated: the SDK binds a bearer token's tenant
// alone, not a client certificate's. A request of another tenant naming
// the session gets 404, as one naming no session does, so that a session
// id says nothing to whoever does not own it.
func (srv *mcpServer) bindSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := tenantOf(r)
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			srv.mu.Lock()
			owner, known := srv.owners[id]
			srv.mu.Unlock()
			if known && owner != tenant {
				writeRPCError(w, http.StatusNotFound, "sandbox mcp: no such session: it ended, or was never opened by this tenant; open a session with initialize")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&ownerRecorder{ResponseWriter: w, srv: srv, tenant: tenant}, r)
	})
}

// ownedBy returns the tenant that opened the MCP session id, if known.
func (srv *mcpServer) ownedBy(id string) string {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.owners[id]
}

// ownerRecorder records the tenant of the session a response opens.
type ownerRecorder struct {
	http.ResponseWriter
	srv    *mcpServer
	tenant string
	done   bool
}

func (o *ownerRecorder) WriteHeader(status int) {
	if !o.done {
		o.done = true
		if id := o.Header().Get("Mcp-Session-Id"); id != "" {
			o.srv.own(id, o.tenant)
		}
	}
	o.ResponseWriter.WriteHeader(status)
}

func (o *ownerRecorder) Write(b []byte) (int, error) {
	if !o.done {
		o.WriteHeader(http.StatusOK)
	}
	return o.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (o *ownerRecorder) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// own records that tenant opened session id, and forgets the sessions
// that have ended.
func (srv *mcpServer) own(id, tenant string) {
	live := map[string]bool{id: true}
	for ss := range srv.server.Sessions() {
		live[ss.ID()] = true
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for old := range srv.owners {
		if !live[old] {
			delete(srv.owners, old)
		}
	}
	srv.owners[id] = tenant
}
