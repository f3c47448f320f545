package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/fumehood/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServer is the MCP server of "sandbox mcp": one mcp.Server whose
// sessions each get a sandbox session of their own.
type mcpServer struct {
	cfg    *mcpConfig
	log    *slog.Logger // the server's own events
	sdkLog *slog.Logger // the SDK's
	server *mcp.Server
	err    error // a tool that could not be made

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*mcpSession
	owners   map[string]string // the tenant of each HTTP session id (bindSessions)
	closed   bool              // closeAll ran: no new sessions

	// opening counts the HTTP requests being served that may each open
	// a session, so that those and the open sessions stay within
	// --max-sessions however many arrive at once.
	opening int
}

// statefulVersions are the protocol versions the server speaks: those
// with an initialize handshake and a session. The 2026-07-28 protocol
// answers each request on its own, and a sandbox session is the state
// that lives between a session's calls: such a client falls back to
// the newest of these, as the protocol has it.
var statefulVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func newMCPServer(cfg *mcpConfig, log, sdkLog *slog.Logger) (*mcpServer, error) {
	srv := &mcpServer{cfg: cfg, log: log, sdkLog: sdkLog, sessions: map[*mcp.ServerSession]*mcpSession{}, owners: map[string]string{}}
	srv.server = mcp.NewServer(&mcp.Implementation{Name: "sandbox", Title: "fumehood/sandbox", Version: "1"},
		&mcp.ServerOptions{
			Instructions: "Each session has a Linux sandbox of its own: run commands and code in it, " +
				"and read and write the files of its /workspace, which its calls share. " +
				"It has no network unless the server allows hosts, and is gone when the session ends.",
			Logger:                    sdkLog,
			Capabilities:              &mcp.ServerCapabilities{}, // no logging capability: logs go to stderr
			SupportedProtocolVersions: statefulVersions,
		})
	srv.addTools()
	return srv, srv.err
}

// session returns the sandbox session of the MCP session ss, starting it
// at ss's first call as tenant's (empty on stdio and without
// authentication). It ends when ss does.
func (srv *mcpServer) session(ss *mcp.ServerSession, tenant string) (*mcpSession, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.closed {
		return nil, fmt.Errorf("the server is shutting down: %w", sandbox.ErrClosed)
	}
	if s := srv.sessions[ss]; s != nil {
		return s, nil
	}
	opts := srv.cfg.cfg.opts
	log := srv.log.With("session", ss.ID())
	if tenant != "" {
		log = log.With("tenant", tenant)
		if opts.Audit != nil {
			a := *opts.Audit
			a.Handler = a.Handler.WithAttrs([]slog.Attr{slog.String("tenant", tenant)})
			opts.Audit = &a
		}
	}
	s := newMCPSession(opts)
	if err := s.sb.Err(); err != nil {
		s.close()
		return nil, srv.cfg.cfg.explain(err)
	}
	srv.sessions[ss] = s
	log.Info("sandbox mcp: session started")
	go func() {
		ss.Wait()
		srv.mu.Lock()
		if srv.sessions[ss] == s {
			delete(srv.sessions, ss)
		}
		srv.mu.Unlock()
		s.close()
		log.Info("sandbox mcp: session ended, its sandbox closed")
	}()
	return s, nil
}

// closeAll closes every session's sandbox and refuses new ones.
func (srv *mcpServer) closeAll() {
	srv.mu.Lock()
	srv.closed = true
	sessions := srv.sessions
	srv.sessions = map[*mcp.ServerSession]*mcpSession{}
	srv.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(s.close)
	}
	wg.Wait()
}

// limitSessions refuses a request that would open a session beyond
// --max-sessions. A request without an Mcp-Session-Id opens one. It
// stands behind checkHTTPMessage, which has read the body whole, so that
// connections holding an unfinished body occupy no session.
func (srv *mcpServer) limitSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		srv.mu.Lock()
		open := srv.opening
		for range srv.server.Sessions() {
			open++
		}
		if open < srv.cfg.maxSessions {
			srv.opening++
		}
		srv.mu.Unlock()
		if open >= srv.cfg.maxSessions {
			msg := fmt.Sprintf("sandbox mcp: all %d sessions are in use (--max-sessions %d): end a session "+
				"(its client disconnects, or it idles for --session-timeout %s) or start the server with a higher --max-sessions",
				open, srv.cfg.maxSessions, srv.cfg.sessionTimeout)
			srv.log.Warn("sandbox mcp: session refused", "reason", msg)
			w.Header().Set("Retry-After", strconv.Itoa(60))
			writeRPCError(w, http.StatusTooManyRequests, msg)
			return
		}
		defer func() {
			srv.mu.Lock()
			srv.opening--
			srv.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// sessionOf returns the sandbox session of the call's MCP session.
func (srv *mcpServer) sessionOf(req *mcp.CallToolRequest) (*mcpSession, error) {
	if req == nil || req.Session == nil {
		return nil, errors.New("the call has no MCP session")
	}
	tenant := srv.ownedBy(req.Session.ID())
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		tenant = req.Extra.TokenInfo.UserID
	}
	return srv.session(req.Session, tenant)
}

// withSession adapts a tool handler that needs the call's sandbox session.
func withSession[In, Out any](srv *mcpServer, h func(ctx context.Context, s *mcpSession, in In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		s, err := srv.sessionOf(req)
		if err != nil {
			var zero Out
			return nil, zero, err
		}
		return h(ctx, s, in)
	}
}
