package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fumehood/sandbox/internal/report"
)

// Defaults for the Proxy's zero fields.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = 5 * time.Minute
	DefaultMaxConns    = 64
	DefaultReportLimit = 1000

	// headerTimeout bounds the time to receive a request header once its
	// first byte arrived.
	headerTimeout = 30 * time.Second
	// firstRequestTimeout bounds the time from accepting a connection to
	// the end of its first request's header.
	firstRequestTimeout = 30 * time.Second
	// maxHeaderBytes bounds a request or response header, and
	// maxHeaderFields the lines in it after the first.
	maxHeaderBytes  = bufSize
	maxHeaderFields = 128
	// maxBuffers is how many read buffers (bufSize each) one Proxy holds
	// at once.
	maxBuffers = 64
	// lingerTime is how long a refused connection is drained before it is
	// closed, so the client reads the refusal instead of a reset.
	lingerTime = 2 * time.Second
)

// Bounds on what one Proxy makes its process hold at the defaults,
// whatever its connections send; see "Limits" in the package
// documentation.
const (
	// MaxConnMemory bounds the memory of one connection beyond the
	// buffers it borrows: its goroutines' stacks, its state, a header
	// being parsed, and what it read ahead of a header.
	MaxConnMemory = 96 << 10
	// MaxRecordBytes bounds one recorded Connection: its fixed part and
	// its text, clipped.
	MaxRecordBytes = 256 + maxHostText + maxMethodText + maxReasonText + maxErrorText + maxAddrText
	// MaxProxyMemory bounds the memory one Proxy holds at the defaults:
	// DefaultMaxConns connections, maxBuffers buffers, and a report of
	// DefaultReportLimit records.
	MaxProxyMemory = DefaultMaxConns*MaxConnMemory + maxBuffers*bufSize + DefaultReportLimit*MaxRecordBytes
	// MaxProxyFDs bounds the descriptors one Proxy holds at the
	// defaults: per connection its own and one upstream, and the
	// listener.
	MaxProxyFDs = 2*DefaultMaxConns + 1
)

// How much text of a recorded Connection is kept.
const (
	maxHostText   = 256
	maxMethodText = 16
	maxReasonText = 256
	maxErrorText  = 256
	maxAddrText   = 48
)

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress: proxy closed")

// Resolver looks up the addresses of a host name; *net.Resolver is one.
// The proxy asks only for names the rules allow, and asks for the rooted
// name (with a trailing dot: "api.example.com.") so the host's DNS search
// domains are never appended.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Proxy is an HTTP/1.1 forward proxy that lets a sandbox reach the hosts
// its Rules allow and nothing else. It serves CONNECT tunnels (TLS is
// terminated only to the hosts of Secrets) and absolute-form plain HTTP
// requests. Set the fields
// before the first Serve and do not change them after; a Proxy must not be
// copied after first use.
type Proxy struct {
	// Rules is the allowlist. Serve fails if it is nil.
	Rules *Rules

	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver

	// Dial connects to an upstream address. It is only ever given a
	// literal "ip:port" the proxy has checked, never a name. nil means a
	// net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// DialTimeout bounds resolving a name, and separately connecting to
	// its addresses (all tries together). Zero means DefaultDialTimeout.
	DialTimeout time.Duration

	// IdleTimeout ends a connection on which no byte moved in either
	// direction for this long, including a kept-alive client connection
	// waiting for its next request. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration

	// MaxConns is how many sandbox connections are served at once; more
	// are closed as soon as they are accepted (and reported). Zero means
	// DefaultMaxConns. Each costs up to MaxConnMemory and two
	// descriptors.
	MaxConns int

	// ReportLimit is how many attempts Report keeps; later ones are only
	// counted (Dropped). Zero means DefaultReportLimit. Each costs up to
	// MaxRecordBytes.
	ReportLimit int

	// CPUs is the CPU limit of the sandbox the proxy serves, in CPUs. The
	// proxy's own CPU time on its behalf is then budgeted at CPUShare of
	// it, after a burst of CPUBurst (see the package documentation).
	// Zero or less means no budget.
	CPUs float64

	// Secrets are added to the requests sent to their hosts (see
	// "Secrets" in the package documentation). CONNECTs to their hosts
	// are terminated with Authority, which Serve requires then, and go
	// on to the real server over TLS verified against UpstreamRoots
	// (nil: the system's roots).
	Secrets       []Secret
	Authority     *Authority
	UpstreamRoots *x509.CertPool

	// OnRecord, if set, hears of each attempt as it is recorded, the
	// ones Report keeps only (not those past ReportLimit), in the order
	// they were recorded. It is called with the report's lock held: it
	// must not block, nor call the Proxy's methods.
	OnRecord func(Connection)

	cpu *cpuBudget // the work budget; nil without CPUs

	// find and put are the secrets' values and placeholders as bytes,
	// for scrubbing (scrubValues).
	scrubOnce sync.Once
	find, put [][]byte

	// hostAddrs lists the host's addresses; nil means its interfaces'.
	hostAddrs func() ([]netip.Addr, error)

	once    sync.Once
	ctx     context.Context // canceled by Close
	cancel  context.CancelFunc
	buffers *bufferBudget

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
	report    []Connection
	dropped   int
	wg        sync.WaitGroup // one per session
}

// Connection is one attempt by the sandbox to reach a host through the
// proxy, as the proxy's Report lists it; the sandbox's Result holds the
// same values.
type Connection = report.Connection

func (p *Proxy) init() {
	p.once.Do(func() {
		p.ctx, p.cancel = context.WithCancel(context.Background())
		p.cpu = newCPUBudget(p.CPUs, p.ctx.Done())
		p.buffers = newBufferBudget(maxBuffers)
		p.listeners = make(map[net.Listener]struct{})
		p.sessions = make(map[*session]struct{})
	})
}

// Serve accepts connections from l and serves each until it ends. It
// returns when l fails: ErrClosed after Close, otherwise the error from
// Accept (wrapping net.ErrClosed if someone else closed l). Connections it
// accepted are not ended by its return; Close ends them. After Close it
// records each connection still queued on l, never accepted, and closes
// l. Serve may be called on several listeners at once.
func (p *Proxy) Serve(l net.Listener) error {
	p.init()
	if p.Rules == nil {
		return errors.New("egress: Proxy.Rules is nil")
	}
	if err := p.checkSecrets(); err != nil {
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1) // Close waits for the queue's record
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		p.wg.Done()
	}()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				p.closeListener(l)
				return ErrClosed
			}
			// Running out of file descriptors and the like passes.
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-p.ctx.Done():
				}
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		backoff = 0
		p.start(c)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops every Serve (which then returns ErrClosed), closes every
// connection to the sandbox and upstream, and waits until all of them are
// recorded, the ones still queued on a listener too, so Report is complete
// when it returns. It is safe to call more
// than once and concurrently.
func (p *Proxy) Close() error {
	p.init()
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		// A listener is woken, not closed: its Serve records what is
		// still queued on it before closing it (closeListener).
		for l := range p.listeners {
			if d, ok := l.(interface{ SetDeadline(time.Time) error }); !ok || d.SetDeadline(time.Now()) != nil {
				l.Close()
			}
		}
		for s := range p.sessions {
			s.close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// closeListener closes l after recording each connection still queued on
// it, which the sandbox opened and the proxy never accepted.
func (p *Proxy) closeListener(l net.Listener) {
	if d, ok := l.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(time.Time{})
	}
	n := takeBacklog(l)
	l.Close()
	now := time.Now()
	for range n {
		p.record(Connection{Reason: "not accepted before the proxy closed (held back by its CPU budget, or opened as the run ended)", Start: now})
	}
}

// Report returns every attempt recorded so far, in the order they started.
// An attempt is recorded when it ends; after Close returns the report is
// complete. It is safe to call at any time from any goroutine.
func (p *Proxy) Report() []Connection {
	p.init()
	p.mu.Lock()
	out := slices.Clone(p.report)
	p.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Connection) int { return a.Start.Compare(b.Start) })
	return out
}

// Dropped returns how many attempts were not kept in the report because
// it held ReportLimit already.
func (p *Proxy) Dropped() int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

func (p *Proxy) record(c Connection) {
	// The sandbox chooses much of this text; bound what it can make the
	// host keep.
	c.Host, c.Method = clip(c.Host, maxHostText), clip(c.Method, maxMethodText)
	c.Reason, c.Error = clip(c.Reason, maxReasonText), clip(c.Error, maxErrorText)
	c.Addr = clip(c.Addr, maxAddrText)
	limit := p.ReportLimit
	if limit <= 0 {
		limit = DefaultReportLimit
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.report) >= limit {
		p.dropped++
		return
	}
	p.report = append(p.report, c)
	if p.OnRecord != nil {
		p.OnRecord(c)
	}
}

// clip shortens s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

func (p *Proxy) dialTimeout() time.Duration {
	if p.DialTimeout > 0 {
		return p.DialTimeout
	}
	return DefaultDialTimeout
}

func (p *Proxy) idleTimeout() time.Duration {
	if p.IdleTimeout > 0 {
		return p.IdleTimeout
	}
	return DefaultIdleTimeout
}

// start serves one accepted connection in its own goroutine.
func (p *Proxy) start(c net.Conn) {
	p.cpu.charge(acceptCost)
	p.cpu.wait(nil) // the next Accept waits too: backpressure on the listener
	maxConns := p.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	p.mu.Lock()
	if p.closed {
		p.wg.Add(1) // so that Close waits for the record
		p.mu.Unlock()
		c.Close()
		p.record(Connection{Reason: "accepted as the proxy closed, not served", Start: time.Now()})
		p.wg.Done()
		return
	}
	if len(p.sessions) >= maxConns {
		p.wg.Add(1) // so that Close waits for the record
		p.mu.Unlock()
		c.Close()
		p.record(Connection{
			Reason: fmt.Sprintf("too many connections at once (MaxConns %d)", maxConns),
			Start:  time.Now(),
		})
		p.wg.Done()
		return
	}
	s := newSession(p, c)
	s.client.cpu = p.cpu
	p.sessions[s] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		s.run()
		s.close()
		p.mu.Lock()
		delete(p.sessions, s)
		p.mu.Unlock()
	}()
}

// decision is what the proxy decided about one host and port.
type decision struct {
	allowed bool
	reason  string       // for the report
	addrs   []netip.Addr // checked addresses to dial, in order
	status  int          // when not dialing: the status to answer
	public  string       // when not dialing: the text the sandbox is sent
	err     string       // resolver error, for the report
}

// decide checks host (a name or an IP literal, without brackets) and port
// against the rules, resolving an allowed name, and returns the addresses
// that may be dialed. It never resolves a name the rules do not allow.
func (p *Proxy) decide(host string, port int) decision {
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			why := "IPv6 addresses with a zone are refused"
			return decision{reason: why, status: 403, public: why}
		}
		ip = ip.Unmap()
		ok, why := p.checkAddr(ip, port, false)
		if !ok {
			return decision{reason: why, status: 403, public: why}
		}
		return decision{allowed: true, reason: why, addrs: []netip.Addr{ip}}
	}
	name, bad := normalizeName(host)
	if bad != "" {
		why := fmt.Sprintf("%q is not a valid host name: %s", host, bad)
		return decision{reason: why, status: 400, public: why}
	}
	rule, why := p.Rules.matchName(name, port)
	if rule == nil {
		return decision{reason: why, status: 403, public: why}
	}
	allowedBy := fmt.Sprintf("allowed by rule %d %q", rule.index, rule.entry)

	var r Resolver = net.DefaultResolver
	if p.Resolver != nil {
		r = p.Resolver
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.dialTimeout())
	ips, err := r.LookupIPAddr(ctx, name+".")
	cancel()
	if err != nil {
		d := decision{allowed: true, reason: allowedBy, status: 502, err: "resolve: " + err.Error(),
			public: fmt.Sprintf("cannot resolve %s", name)}
		if isTimeout(err) {
			d.status = 504
			d.public += " (timeout)"
		}
		return d
	}
	var addrs []netip.Addr
	var refused []string
	for _, ia := range ips {
		a, ok := netip.AddrFromSlice(ia.IP)
		if !ok {
			continue
		}
		a = a.Unmap().WithZone(ia.Zone)
		if ok, why := p.checkAddr(a, port, true); !ok {
			refused = append(refused, why)
			continue
		} else if why != "" {
			allowedBy += "; " + why
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	switch {
	case len(addrs) > 0:
		if len(refused) > 0 {
			allowedBy += "; skipped " + strings.Join(refused, "; ")
		}
		return decision{allowed: true, reason: allowedBy, addrs: addrs}
	case len(refused) > 0:
		why := fmt.Sprintf("%s resolved only to refused addresses: %s", name, strings.Join(refused, "; "))
		return decision{reason: why, status: 403, public: why}
	default:
		return decision{allowed: true, reason: allowedBy, status: 502, err: "resolve: no addresses",
			public: fmt.Sprintf("cannot resolve %s", name)}
	}
}

// dial connects to the first of addrs that answers, on port. Every
// address was checked by decide; they are dialed as literals, so nothing
// is resolved again.
func (p *Proxy) dial(addrs []netip.Addr, port int) (net.Conn, string, error) {
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.dialTimeout())
	defer cancel()
	var lastErr error
	var lastAddr string
	for i, a := range addrs {
		addr := netip.AddrPortFrom(a, uint16(port)).String()
		// Share the time left among the addresses left, but give each a
		// fair chance.
		actx, acancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && len(addrs)-i > 1 {
			share := max(time.Until(dl)/time.Duration(len(addrs)-i), 2*time.Second)
			actx, acancel = context.WithTimeout(ctx, share)
		}
		c, err := dial(actx, "tcp", addr)
		acancel()
		if err == nil {
			return c, addr, nil
		}
		lastErr, lastAddr = err, addr
		if p.ctx.Err() != nil {
			break
		}
	}
	return nil, lastAddr, lastErr
}
