package service

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The server's descriptors are shared by the clients' connections and the
// runs (a run's stdio pipes, its pidfd, a session's keeper and the output
// of its background processes): a flood of connections that took them all
// would fail runs ("open /dev/null: too many open files"). So connections
// are capped below RLIMIT_NOFILE, leaving a reserve for the runs and
// sessions the flags allow, and a connection beyond the cap is answered
// 503 and closed at once.
//
// The reserve, in descriptors, from what a run and a session were seen to
// hold, with room to spare:
const (
	reserveBase       = 64 // the server's own: listener, logs, audit file, spawner, epoll, outgoing connections to peers and ports
	reservePerRun     = 8  // a run's stdio pipes, pidfd and control socket
	reservePerSession = 16 // a session's keeper, workspace root and its run's
	reservePerProcess = 3  // a background process's output pipes and pidfd
)

// minConnections is the fewest connections the server starts with: a
// descriptor limit that leaves fewer after the reserve is an error.
const minConnections = 16

// refuseDeadline bounds the write of the 503 to a connection beyond the
// cap; the answer is far smaller than a new socket's send buffer, so it
// does not wait in practice.
const refuseDeadline = 100 * time.Millisecond

// descriptorReserve is the descriptors kept for the runs and sessions
// cfg allows.
func descriptorReserve(cfg *config) int {
	return reserveBase + reservePerRun*cfg.maxConcurrent +
		cfg.maxSessions*(reservePerSession+reservePerProcess*maxBackground)
}

// connectionCap is the most connections open at once: -max-connections,
// or by default RLIMIT_NOFILE's soft limit less the reserve. A
// -max-connections that leaves less than the reserve is an error naming
// both.
func connectionCap(cfg *config) (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	limit, reserve := int(min(rl.Cur, 1<<30)), descriptorReserve(cfg)
	room := limit - reserve
	switch {
	case cfg.maxConnections > room:
		return 0, fmt.Errorf("-max-connections %d: above the %d descriptors RLIMIT_NOFILE (%d) leaves after %d kept for runs and sessions (-max-concurrent %d, -max-sessions %d); lower it, or raise the limit (ulimit -n)",
			cfg.maxConnections, max(room, 0), limit, reserve, cfg.maxConcurrent, cfg.maxSessions)
	case cfg.maxConnections > 0:
		return cfg.maxConnections, nil
	case room < minConnections:
		return 0, fmt.Errorf("RLIMIT_NOFILE %d leaves %d descriptors for connections after %d kept for runs and sessions (-max-concurrent %d, -max-sessions %d), fewer than %d; raise the limit (ulimit -n) or lower -max-sessions",
			limit, max(room, 0), reserve, cfg.maxConcurrent, cfg.maxSessions, minConnections)
	}
	return room, nil
}

// cappedListener accepts at most max connections open at once; one beyond
// them is answered 503 with Retry-After and closed, so that the client
// knows why and when to try again, which a bare close would not say. The
// answer is written before the request is read, which HTTP/1.1 allows.
type cappedListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Int64 // connections answered 503
}

// tooManyConnections is the answer to a connection beyond the cap.
var tooManyConnections = func() []byte {
	body := `{"error":"too many connections: the server's connection limit is reached; retry later"}` + "\n"
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &countedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		c.SetWriteDeadline(time.Now().Add(refuseDeadline))
		c.Write(tooManyConnections)
		c.Close()
	}
}

// countedConn is a connection counted open until its first Close.
type countedConn struct {
	net.Conn
	l    *cappedListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
