package access

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// perClientListener closes at once a connection from an address that
// already holds max open ones, so that one client (a flood, or slow
// clients that hold connections) cannot take every connection the
// server can hold.
type perClientListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu       sync.Mutex
	open     map[string]int
	lastWarn time.Time
}

func (l *perClientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		l.mu.Lock()
		if l.open[ip] >= l.max {
			warn := time.Since(l.lastWarn) > 10*time.Second
			if warn {
				l.lastWarn = time.Now()
			}
			l.mu.Unlock()
			c.Close()
			if warn {
				l.log.Warn("access: connection refused: its client has -max-conns-per-client open", "client", ip, "max_conns_per_client", l.max)
			}
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.open[ip]--; l.open[ip] == 0 {
				delete(l.open, ip)
			}
			l.mu.Unlock()
		}}, nil
	}
}

func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	h, _, _ := net.SplitHostPort(a.String())
	return h
}

// countedConn releases its place once, on its first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
