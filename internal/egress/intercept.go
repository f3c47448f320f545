package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// A CONNECT to a host a secret is bound to is terminated by the proxy:
// it answers the sandbox's TLS handshake with a leaf of its Authority for
// exactly the CONNECT's host, makes its own TLS connection to the real
// server (verified as any client would), and relays one HTTP/1.1 request
// between them through the same code as plain forwarding, where secrets
// are put in and values scrubbed out.

// Costs of interception for the CPU budget (see budget.go), measured as
// the others were (BenchmarkInterceptHandshakes and BenchmarkLeaf, CPU
// time on a busy 2-core x86-64 host), rounded up.
const (
	// handshakeCost is the proxy's two handshakes of one terminated
	// tunnel: the sandbox's, signed with the proxy's leaf, and the
	// proxy's with the server, verifying its chain (about 1.2 ms
	// measured together).
	handshakeCost = 1_500_000
	// leafCost is signing a leaf for a host not asked for before (about
	// 150 µs measured).
	leafCost = 300_000
	// tlsByteCost is one byte of TLS records either way on the sandbox's
	// side: decrypting and encrypting it there and again upstream.
	tlsByteCost = 4
)

// MaxInterceptMemory bounds what a terminated tunnel holds beyond
// MaxConnMemory: its two TLS connections' state and record buffers, a
// read buffer of its own (it never borrows the Proxy's), the headers and
// framing of its one request, and, while a response is scrubbed, the
// bytes held back (at most MaxSecretBytes).
const MaxInterceptMemory = 160 << 10

// MaxSecretsProxyMemory bounds the memory one Proxy with Secrets holds at
// the defaults: MaxProxyMemory, every connection a terminated tunnel, and
// the Authority's leaves.
const MaxSecretsProxyMemory = MaxProxyMemory + DefaultMaxConns*MaxInterceptMemory + maxLeaves*leafMemory

// leafMemory bounds one leaf the Authority keeps: its certificate, parsed
// and not.
const leafMemory = 4 << 10

// interception is the upstream of a session inside a terminated tunnel.
type interception struct {
	host   string // the CONNECT's host, normalized
	port   int
	reason string // why it was allowed, for its requests' records
	addr   string // the address dialed
	up     *meterConn
}

// checkSecrets checks the Secrets fields before Serve.
func (p *Proxy) checkSecrets() error {
	if len(p.Secrets) == 0 {
		return nil
	}
	if p.Authority == nil {
		return errors.New("egress: Proxy.Secrets needs Proxy.Authority to terminate TLS to their hosts")
	}
	for _, s := range p.Secrets {
		switch {
		case s.Hosts == nil:
			return fmt.Errorf("egress: secret %s has no hosts", s.Name)
		case s.Value == "" || len(s.Placeholder) < 16:
			return fmt.Errorf("egress: secret %s needs a value and a placeholder of at least 16 bytes", s.Name)
		case len(s.Value) > MaxSecretBytes || len(s.Placeholder) > MaxSecretBytes:
			return fmt.Errorf("egress: secret %s: its value or placeholder is longer than %d bytes", s.Name, MaxSecretBytes)
		case strings.ContainsAny(s.Value, "\r\n\x00"):
			return fmt.Errorf("egress: secret %s: its value holds CR, LF or NUL", s.Name)
		case BadValue(s.Value) != "":
			return fmt.Errorf("egress: secret %s: its value %s", s.Name, BadValue(s.Value))
		}
	}
	return nil
}

// intercept serves a CONNECT to a secret host: check and dial as for any
// CONNECT, complete TLS with the server, answer 200, complete TLS with
// the sandbox, then serve one request inside. Each handshake must end
// within headerTimeout.
func (s *session) intercept(a *attempt, host string, port int) {
	name, _ := normalizeName(host)
	up := s.open(a, name, port)
	if up == nil {
		return
	}
	a.Reason += "; TLS terminated by the proxy (a secret host)"
	// Paid before it is done: a sandbox in debt starts no handshake.
	s.p.cpu.charge(handshakeCost)
	s.p.cpu.wait(s.client.closed)
	ctx, cancel := context.WithTimeout(s.p.ctx, headerTimeout)
	defer cancel()
	upTLS := tls.Client(&tlsSide{Conn: up.Conn, m: up}, &tls.Config{
		ServerName: name,
		RootCAs:    s.p.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	if err := upTLS.HandshakeContext(ctx); err != nil {
		a.Error = "TLS with upstream: " + err.Error()
		s.refuse(a, http.StatusBadGateway, fmt.Sprintf("TLS with %s port %d failed (its certificate is checked against the system's roots and the trusted CAs)", name, port))
		return
	}
	if p := upTLS.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
		a.Error = "TLS with upstream: it chose protocol " + p
		s.refuse(a, http.StatusBadGateway, fmt.Sprintf("%s port %d does not speak HTTP/1.1", name, port))
		return
	}
	leaf, made, err := s.p.Authority.leaf(name)
	if made {
		s.p.cpu.charge(leafCost)
	}
	if err != nil {
		a.Error = err.Error()
		s.refuse(a, http.StatusBadGateway, fmt.Sprintf("no certificate for %s", name))
		return
	}

	a.Status = http.StatusOK
	s.writer().WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	if err := s.writer().Flush(); err != nil {
		a.Error = "write to sandbox: " + err.Error()
		s.close()
		s.finish(a)
		return
	}
	s.bw = nil
	// The client's first bytes (its hello) may have been read ahead
	// with the CONNECT.
	s.endRequest()
	client := &tlsSide{Conn: s.client.Conn, m: s.client, carry: s.in.carry, cpu: s.p.cpu}
	s.in.carry = nil
	srv := tls.Server(client, &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// A leaf only for the name the tunnel was opened to.
			if sni, _ := normalizeName(hello.ServerName); hello.ServerName != "" && sni != name {
				return nil, fmt.Errorf("the sandbox asked for %.64q inside a tunnel to %s", hello.ServerName, name)
			}
			return leaf, nil
		},
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	if err := srv.HandshakeContext(ctx); err != nil {
		a.Error = "TLS with the sandbox: " + err.Error()
		upTLS.Close()
		s.close()
		s.finish(a)
		return
	}
	cancel()

	inner := newSession(s.p, srv)
	inner.client.cpu = s.p.cpu
	inner.buffers = newBufferBudget(1)
	inner.via = &interception{host: name, port: port, reason: a.Reason, addr: a.Addr,
		up: newMeterConn(upTLS, &inner.act, s.p.idleTimeout())}
	inner.run()
	inner.close()
	upTLS.Close()
	s.close()
	s.finish(a)
}

// forwardVia serves the one request of a terminated tunnel: its secrets
// are put in, and it goes to the tunnel's server; the response is
// scrubbed and the connection ends after it.
func (s *session) forwardVia(a *attempt, req *http.Request) bool {
	v := s.via
	a.Host, a.Port, a.Addr = v.host, v.port, v.addr
	_, refusal := s.p.putSecrets(req.Header, req.RequestURI, v.host, v.port)
	if refusal != "" {
		s.refuse(a, http.StatusForbidden, refusal)
		return false
	}
	a.Allowed, a.Reason = true, v.reason
	if !s.setUpstream(v.up) {
		a.Error = "proxy closed"
		s.finish(a)
		return false
	}
	defer s.dropUpstream()
	authority := v.host
	if v.port != 443 {
		authority += ":" + strconv.Itoa(v.port)
	}
	req.Close = true // one request per terminated tunnel
	s.relay(a, req, v.up, authority, true)
	return false
}

// tlsSide is the connection under one side's TLS: the sandbox's, after
// what was read ahead of the CONNECT's end, or the server's. It counts
// what moves on the session's meter, for the CONNECT's record, and
// charges the sandbox's side's TLS work to the budget. Deadlines are set
// by the meter of the TLS connection above it.
type tlsSide struct {
	net.Conn
	m     *meterConn
	carry []byte
	cpu   *cpuBudget // nil upstream
}

func (t *tlsSide) Read(b []byte) (int, error) {
	if len(t.carry) > 0 {
		n := copy(b, t.carry)
		t.carry = t.carry[n:]
		return n, nil
	}
	n, err := t.Conn.Read(b)
	if n > 0 {
		t.m.read.Add(int64(n))
		t.m.act.touch()
		t.cpu.charge(int64(n) * tlsByteCost)
	}
	return n, err
}

func (t *tlsSide) Write(b []byte) (int, error) {
	n, err := t.Conn.Write(b)
	if n > 0 {
		t.m.written.Add(int64(n))
		t.m.act.touch()
		t.cpu.charge(int64(n) * tlsByteCost)
	}
	return n, err
}
