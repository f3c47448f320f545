package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// session serves one connection from the sandbox: a CONNECT tunnel, or a
// series of plain HTTP requests on a kept-alive connection.
//
// It holds no large buffer while it waits: reads go into buffers from
// the Proxy's budget, taken once data is there and given back once it was
// passed on.
type session struct {
	p      *Proxy
	act    activity
	client *meterConn    // the sandbox side
	in     carryReader   // reads client, after what was read ahead of a header
	br     *bufio.Reader // reads in for the request being served; nil between requests
	bw     *bufio.Writer // writes client; nil when nothing is being written
	served int           // requests read

	// buffers lends the buffers reads go into: the Proxy's budget, or
	// for a session inside a terminated TLS tunnel, one of its own.
	buffers *bufferBudget
	// via is the upstream of a session inside a terminated TLS tunnel,
	// which serves its request there; nil otherwise.
	via *interception

	mu       sync.Mutex
	closed   bool
	upstream net.Conn // the current upstream connection, if any
}

// writeBufSize is the size of the small buffers that gather a header
// before it is written; larger writes go straight through them.
const writeBufSize = 4 << 10

func newSession(p *Proxy, c net.Conn) *session {
	s := &session{p: p, buffers: p.buffers}
	s.act.touch()
	s.client = newMeterConn(c, &s.act, p.idleTimeout())
	s.in.r = s.client
	return s
}

// writer is the buffered writer to the client, made when first needed.
func (s *session) writer() *bufio.Writer {
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(s.client, writeBufSize)
	}
	return s.bw
}

// close closes both sides; whatever is blocked on them fails at once.
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.client.Close()
	if s.upstream != nil {
		s.upstream.Close()
	}
}

// setUpstream makes c the session's upstream connection, or closes it and
// returns false if the session was closed meanwhile.
func (s *session) setUpstream(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.upstream = c
	return true
}

// dropUpstream closes the current upstream connection.
func (s *session) dropUpstream() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upstream != nil {
		s.upstream.Close()
		s.upstream = nil
	}
}

// consumed is how many bytes of the client's stream have been used: read
// from the connection and no longer waiting in the buffer.
func (s *session) consumed() int64 {
	n := s.client.read.Load() - int64(len(s.in.carry))
	if s.br != nil {
		n -= int64(s.br.Buffered())
	}
	return n
}

// attempt is one request being served, and the counters at its start.
type attempt struct {
	Connection
	up0, down0 int64
}

func (s *session) begin() *attempt {
	return &attempt{Connection: Connection{Start: time.Now()}, up0: s.consumed(), down0: s.client.written.Load()}
}

// finish records a.
func (s *session) finish(a *attempt) {
	if s.bw != nil {
		s.bw.Flush()
		s.bw = nil
	}
	a.BytesUp = s.consumed() - a.up0
	a.BytesDown = s.client.written.Load() - a.down0
	a.Duration = time.Since(a.Start)
	if len(s.p.Secrets) > 0 {
		// An upstream's text (a malformed response quoted in an error)
		// may hold a value the proxy sent it.
		a.Reason, a.Error = s.p.scrubText(a.Reason), s.p.scrubText(a.Error)
	}
	s.p.record(a.Connection)
}

// run serves requests until the connection ends or must end.
func (s *session) run() {
	for s.serveOne() {
	}
}

// serveOne serves one request and reports whether the connection may
// carry another.
func (s *session) serveOne() bool {
	first := s.served == 0
	s.served++
	a := s.begin()
	if first {
		// The first request must come within firstRequestTimeout of the
		// connection, or the connection is ended (and reported).
		s.client.setReadLimit(a.Start.Add(min(firstRequestTimeout, s.p.idleTimeout())))
	}
	// Wait for the first byte of the request, holding no buffer.
	var err error
	if len(s.in.carry) == 0 {
		err = s.client.waitReadable()
	}
	if err == nil {
		a.Start = time.Now()
	}
	if err == nil && !first {
		s.client.setReadLimit(time.Now().Add(min(headerTimeout, s.p.idleTimeout())))
	}
	var req *http.Request
	if err == nil {
		req, err = s.readRequest()
	}
	s.client.setReadLimit(time.Time{})
	if err != nil {
		nothing := s.consumed() == a.up0
		switch {
		case nothing && !first:
			return false // the end of a kept-alive connection
		case errors.Is(err, errHeaderTooLarge):
			s.refuse(a, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request header larger than %d bytes", maxHeaderBytes))
		case errors.Is(err, errTooManyFields):
			s.refuse(a, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request header of more than %d fields", maxHeaderFields))
		case isTimeout(err) && nothing:
			s.refuse(a, http.StatusRequestTimeout, fmt.Sprintf("no request within %v of connecting", min(firstRequestTimeout, s.p.idleTimeout())))
		case isTimeout(err):
			s.refuse(a, http.StatusRequestTimeout, "request header not received in time")
		case nothing && errors.Is(err, net.ErrClosed) && s.p.isClosed():
			a.Reason = "ended by Proxy.Close before a request"
			s.close()
			s.finish(a)
		case nothing && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)):
			a.Reason = "closed by the sandbox before a request"
			s.close()
			s.finish(a)
		case errors.Is(err, io.ErrUnexpectedEOF):
			a.Reason = "closed by the sandbox in the middle of a request header"
			s.close()
			s.finish(a)
		case errors.Is(err, net.ErrClosed) && s.p.isClosed():
			a.Reason = "ended by Proxy.Close in the middle of a request header"
			s.close()
			s.finish(a)
		default:
			s.refuse(a, http.StatusBadRequest, "malformed request: "+err.Error())
		}
		return false
	}
	a.Method = req.Method
	if req.Method == http.MethodConnect {
		s.connect(a, req)
		return false
	}
	keep := s.forward(a, req)
	s.endRequest()
	return keep
}

// readRequest reads one request header into a buffer from the budget,
// checks its size and field count, and parses it. The request's body
// reads from s.br; endRequest ends that.
func (s *session) readRequest() (*http.Request, error) {
	buf, err := s.buffers.get(s.p.ctx)
	if err != nil {
		return nil, net.ErrClosed
	}
	defer s.buffers.put(buf)
	end, n, err := readHeader(&s.in, (*buf)[:maxHeaderBytes], maxHeaderFields)
	if err != nil {
		// What was read is the request's, counted but not kept.
		return nil, err
	}
	// What came after the header (a body, a tunnel's first bytes) is read
	// before the connection; it is copied, so the buffer goes back now.
	s.in.unread((*buf)[end:n])
	s.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader((*buf)[:end]), &s.in), writeBufSize)
	req, err := http.ReadRequest(s.br)
	if err != nil {
		s.br = nil
	}
	return req, err
}

// endRequest puts back what the request's reader read ahead.
func (s *session) endRequest() {
	if s.br != nil {
		ahead, _ := s.br.Peek(s.br.Buffered())
		s.in.unread(ahead)
		s.br = nil
	}
}

// refuse answers status with a short plain-text reason, then drains and
// closes the connection: a refusal always ends it.
func (s *session) refuse(a *attempt, status int, reason string) {
	a.Status = status
	if a.Reason == "" {
		a.Reason = reason
	}
	body := "egress proxy: " + reason + "\n"
	fmt.Fprintf(s.writer(), "HTTP/1.1 %03d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if err := s.writer().Flush(); err == nil {
		// Let the client read the answer before the close: closing with
		// unread request bytes would reset the connection and could
		// destroy the answer in flight.
		s.client.CloseWrite()
		s.client.setReadLimit(time.Now().Add(lingerTime))
		var r io.Reader = &s.in
		if s.br != nil {
			r = s.br
		}
		io.Copy(io.Discard, io.LimitReader(r, 1<<20))
	}
	s.close()
	s.finish(a)
}

// splitHostPort splits a request's authority into host (brackets removed,
// lower case) and port, and says whether the port was given. defPort is
// used when there is no port; 0 means one is required.
func splitHostPort(authority string, defPort int) (host string, port int, explicit bool, why string) {
	host = authority
	portText, hasPort := "", false
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", 0, false, "missing \"]\" in host"
		}
		host = authority[1:end]
		switch rest := authority[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			portText, hasPort = rest[1:], true
		default:
			return "", 0, false, fmt.Sprintf("unexpected %q after host", rest)
		}
		if !strings.Contains(host, ":") {
			return "", 0, false, "brackets around a host that is not an IPv6 address"
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		if strings.Contains(authority[:i], ":") {
			return "", 0, false, "IPv6 address without brackets"
		}
		host, portText, hasPort = authority[:i], authority[i+1:], true
	}
	if host == "" {
		return "", 0, false, "empty host"
	}
	if !hasPort || (portText == "" && defPort > 0) {
		if defPort == 0 {
			return "", 0, false, "port required (host:port)"
		}
		return strings.ToLower(host), defPort, false, ""
	}
	if port, why = parsePort(portText); why != "" {
		return "", 0, false, why
	}
	return strings.ToLower(host), port, true, ""
}

// open checks host and port, dials, and makes the connection the
// session's upstream. On failure it has answered the sandbox and recorded
// the attempt, and returns nil.
func (s *session) open(a *attempt, host string, port int) *meterConn {
	a.Host, a.Port = host, port
	d := s.p.decide(host, port)
	a.Allowed, a.Reason, a.Error = d.allowed, d.reason, d.err
	if d.status != 0 {
		s.refuse(a, d.status, d.public)
		return nil
	}
	c, addr, err := s.p.dial(d.addrs, port)
	a.Addr = addr
	if err != nil {
		a.Error = "dial: " + err.Error()
		status, what := http.StatusBadGateway, "cannot connect to"
		if isTimeout(err) {
			status, what = http.StatusGatewayTimeout, "timed out connecting to"
		}
		s.refuse(a, status, fmt.Sprintf("%s %s port %d", what, host, port))
		return nil
	}
	up := newMeterConn(c, &s.act, s.p.idleTimeout())
	if !s.setUpstream(up) {
		a.Error = "proxy closed"
		s.finish(a)
		return nil
	}
	return up
}

// connect serves a CONNECT: check, dial, answer 200, then relay bytes both
// ways until both sides are done or either fails.
func (s *session) connect(a *attempt, req *http.Request) {
	if s.via != nil {
		s.refuse(a, http.StatusBadRequest, "CONNECT inside a tunnel the proxy terminated")
		return
	}
	host, port, _, why := splitHostPort(req.Host, 0)
	if why != "" {
		s.refuse(a, http.StatusBadRequest, fmt.Sprintf("bad CONNECT target %q: %s", req.Host, why))
		return
	}
	if s.p.secretHost(host, port) {
		s.intercept(a, host, port)
		return
	}
	up := s.open(a, host, port)
	if up == nil {
		return
	}
	a.Status = http.StatusOK
	io.WriteString(s.writer(), "HTTP/1.1 200 Connection established\r\n\r\n")
	if err := s.writer().Flush(); err != nil {
		a.Error = "write to sandbox: " + err.Error()
		s.close()
		s.finish(a)
		return
	}
	s.bw = nil // the tunnel writes to the client directly

	// A failure either way closes both sides; a clean end (EOF) of one
	// direction is passed on as a half-close, and the other goes on.
	var once sync.Once
	fail := func(what string, err error) {
		once.Do(func() { a.Error = s.describe(what, err) })
		s.close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.pipe(s.client, up); err != nil {
			fail("tunnel down", err)
			return
		}
		s.client.CloseWrite()
	}()
	// Bytes the client sent right after its request were read ahead; they
	// go first, then the rest straight from the connection.
	s.endRequest()
	_, err := up.Write(s.in.carry)
	if err == nil {
		s.in.carry = nil
		err = s.pipe(up, s.client)
	}
	if err != nil {
		fail("tunnel up", err)
	} else {
		up.CloseWrite()
	}
	<-done
	s.close()
	s.finish(a)
}

// hopHeaders are meaningful only on one connection and are never
// forwarded (RFC 9110 section 7.6.1), in addition to those the Connection
// header names.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, k := range []string{"Connection", "Proxy-Connection"} {
		for _, v := range h.Values(k) {
			for f := range strings.SplitSeq(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					h.Del(f)
				}
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// forward serves one absolute-form plain HTTP request: check, dial a new
// upstream connection, send the request, relay the response. It reports
// whether the client connection may carry another request.
func (s *session) forward(a *attempt, req *http.Request) bool {
	if s.via != nil {
		return s.forwardVia(a, req)
	}
	u := req.URL
	if u == nil || !u.IsAbs() || u.Host == "" {
		s.refuse(a, http.StatusBadRequest, "this is a proxy: send absolute http:// URLs, or CONNECT host:port for TLS")
		return false
	}
	if u.Scheme != "http" {
		s.refuse(a, http.StatusBadRequest, fmt.Sprintf("scheme %q not supported: use CONNECT for https", u.Scheme))
		return false
	}
	host, port, explicit, why := splitHostPort(u.Host, 80)
	if why != "" {
		s.refuse(a, http.StatusBadRequest, fmt.Sprintf("bad host %q: %s", u.Host, why))
		return false
	}
	bound, refusal := s.p.putSecrets(req.Header, req.RequestURI, host, port)
	if refusal != "" {
		a.Host, a.Port = host, port
		s.refuse(a, http.StatusForbidden, refusal)
		return false
	}
	up := s.open(a, host, port)
	if up == nil {
		return false
	}
	defer s.dropUpstream()

	// The Host header is the authority the rules were checked against
	// (the request line wins over any Host header the client sent).
	authority := host
	if strings.Contains(host, ":") {
		authority = "[" + host + "]"
	}
	if explicit {
		authority += ":" + strconv.Itoa(port)
	}
	return s.relay(a, req, up, authority, bound)
}

// relay sends req to up, an upstream connection made for it, as a request
// for authority, and relays the response. With scrub, the response's
// header and body have every secret's value replaced by its placeholder,
// and an encoded body is refused.
// It reports whether the client connection may carry another request.
func (s *session) relay(a *attempt, req *http.Request, up *meterConn, authority string, scrub bool) bool {
	// The sandbox may wait for "100 Continue" before sending the body;
	// the proxy says it itself when it starts reading the body.
	body := io.Reader(req.Body)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") && req.ContentLength != 0 {
		body = &continueReader{r: req.Body, s: s}
	}
	upBW := bufio.NewWriterSize(up, writeBufSize)
	reqBody := s.bodyReader(body, s.client, func() int { return s.br.Buffered() + len(s.in.carry) })
	if err := writeRequest(upBW, req, authority, reqBody); err != nil {
		return s.fail(a, "send request", err, true)
	}
	// What the sandbox sent after the request is a next request it did
	// not wait to send. Holding it while this one is served would let
	// every connection hold a buffer's worth; it is dropped and the
	// connection closed after the response, which tells the sandbox that
	// the next request was not served (RFC 9112 section 9.3.2).
	if n := s.br.Buffered(); n > 0 || len(s.in.carry) > 0 {
		s.br.Discard(n)
		s.in.carry = nil
		req.Close = true
	}

	upIn := &carryReader{r: up}
	var upBR *bufio.Reader
	var resp *http.Response
	var connTokens []string
	for {
		var err error
		// http.ReadResponse drops a Connection header that says "close"
		// with the other headers it names, which must not be passed on
		// either; the raw header has them.
		resp, upBR, connTokens, err = s.readResponse(up, upIn, upBR, req, scrub)
		if err != nil {
			return s.fail(a, "read response", err, true)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return s.fail(a, "read response", errors.New("upstream switched protocols unasked"), true)
		}
		if resp.StatusCode >= 200 {
			break
		}
		// Other 1xx (100 Continue, 103 Early Hints) are dropped.
	}
	a.Status = resp.StatusCode
	for _, v := range connTokens {
		resp.Header.Add("Connection", v)
	}
	respBody := s.bodyReader(resp.Body, up, func() int { return upBR.Buffered() + len(upIn.carry) })
	if scrub {
		// A body encoded (compressed) against the request's wish
		// could hide a value from the scrubber.
		if coding := otherCoding(resp.Header.Values("Content-Encoding"), "identity"); coding != "" {
			resp.Body.Close()
			return s.fail(a, "read response", fmt.Errorf("the response to a request of a secret host is encoded (Content-Encoding %.40q), though identity was asked for: it cannot be checked for the secret's value", coding), true)
		}
		// The header was scrubbed as it was read.
		respBody.scrub = s.p.newScrubber()
		// Scrubbing changes the body's length: it is sent chunked, or
		// until the close.
		resp.ContentLength = -1
		resp.TransferEncoding = []string{"chunked"}
	}
	keep, err := writeResponse(s.writer(), resp, respBody, req)
	resp.Body.Close()
	if _, quoting := errors.AsType[textproto.ProtocolError](err); scrub && quoting {
		// Parsing the trailer section after a chunked body quotes its
		// lines (and the first 80 bytes of one), which were never
		// scrubbed: they are not relayed, and not recorded either.
		err = errors.New("malformed trailer section (not quoted: from a secret's host)")
	}
	if err != nil {
		return s.fail(a, "relay response", err, false)
	}
	s.finish(a)
	return keep && !s.p.isClosed()
}

// fail ends a forwarded request that went wrong and closes the
// connection. answer says no response was relayed yet, so the sandbox is
// told 502 (or 504 on a timeout); otherwise the close cuts the response
// short.
func (s *session) fail(a *attempt, what string, err error, answer bool) bool {
	a.Error = s.describe(what, err)
	if answer {
		status := http.StatusBadGateway
		if isTimeout(err) {
			status = http.StatusGatewayTimeout
		}
		s.refuse(a, status, fmt.Sprintf("upstream %s port %d failed", a.Host, a.Port))
		return false
	}
	s.close()
	s.finish(a)
	return false
}

// describe says what went wrong for the report, naming the proxy's own
// reasons for ending a connection plainly.
func (s *session) describe(what string, err error) string {
	switch {
	case errors.Is(err, net.ErrClosed) && s.p.isClosed():
		return what + ": ended by Proxy.Close"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("%s: idle timeout (no data either way for %v)", what, s.p.idleTimeout())
	}
	return what + ": " + err.Error()
}

// readResponse reads one response header from up (through upIn, after
// what br read ahead of the last one) into a buffer from the budget,
// checks its size and field count, and parses it; with scrub, the
// secrets' values in it are replaced before it is parsed (scrubHeader).
// It returns the reader the response's body reads from, and the
// Connection header's values.
func (s *session) readResponse(up *meterConn, upIn *carryReader, br *bufio.Reader, req *http.Request, scrub bool) (*http.Response, *bufio.Reader, []string, error) {
	if br != nil {
		ahead, _ := br.Peek(br.Buffered())
		upIn.unread(ahead)
	}
	if len(upIn.carry) == 0 {
		if err := up.waitReadable(); err != nil {
			return nil, nil, nil, err
		}
	}
	buf, err := s.buffers.get(s.p.ctx)
	if err != nil {
		return nil, nil, nil, net.ErrClosed
	}
	defer s.buffers.put(buf)
	end, n, err := readHeader(upIn, (*buf)[:maxHeaderBytes], maxHeaderFields)
	switch {
	case errors.Is(err, errHeaderTooLarge):
		return nil, nil, nil, fmt.Errorf("response header larger than %d bytes", maxHeaderBytes)
	case errors.Is(err, errTooManyFields):
		return nil, nil, nil, fmt.Errorf("response header of more than %d fields", maxHeaderFields)
	case err != nil:
		return nil, nil, nil, err
	}
	upIn.unread((*buf)[end:n])
	raw := (*buf)[:end]
	if scrub {
		if raw, err = s.p.scrubHeader(raw, maxHeaderBytes); err != nil {
			return nil, nil, nil, err
		}
	}
	fields := rawFields(raw)
	br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(raw), upIn), writeBufSize)
	resp, err := http.ReadResponse(br, &http.Request{Method: req.Method})
	if te := fields.Values("Transfer-Encoding"); err == nil && scrub && len(te) > 0 && (!resp.ProtoAtLeast(1, 1) || otherCoding(te, "chunked") != "") {
		// Parsing takes only chunked in HTTP/1.1, and ignores the
		// field in HTTP/1.0, whose body would then pass still coded
		// (compressed, or a value cut by chunk framing).
		resp.Body.Close()
		return nil, nil, nil, fmt.Errorf("the response to a request of a secret host has Transfer-Encoding %.40q in %s: its body cannot be checked for the secret's value", strings.Join(te, ", "), resp.Proto)
	}
	return resp, br, fields.Values("Connection"), err
}

// bodyReader reads a body from r, which reads from conn: before each read
// it waits until r has data, holding no buffer, so the copy takes one from
// the budget only once there is something to put in it. buffered is how
// much r holds already.
func (s *session) bodyReader(r io.Reader, conn *meterConn, buffered func() int) *waitingReader {
	return &waitingReader{r: r, conn: conn, buffered: buffered, p: s.p, buffers: s.buffers}
}

// waitingReader is a body that can be waited on; see bodyReader.
type waitingReader struct {
	r        io.Reader
	conn     *meterConn
	buffered func() int
	p        *Proxy
	buffers  *bufferBudget
	scrub    *scrubber // replaces secrets' values in what is read; nil: none
}

// take waits until the body has data (or has ended: then io.EOF) and
// takes a buffer to read it into.
func (w *waitingReader) take() (*[]byte, error) {
	if err := w.wait(); err != nil {
		return nil, err
	}
	buf, err := w.buffers.get(w.p.ctx)
	if err != nil {
		return nil, net.ErrClosed
	}
	return buf, nil
}

// give gives back a buffer from take; nil w or buf is allowed.
func (w *waitingReader) give(buf *[]byte) {
	if w != nil && buf != nil {
		w.buffers.put(buf)
	}
}

func (w *waitingReader) Read(b []byte) (int, error) { return w.r.Read(b) }

// wait returns once a Read would not block: a zero-length read first, so
// the body's framing says whether it is complete (and reads a chunk's
// header), then waiting for the connection if nothing is buffered.
func (w *waitingReader) wait() error {
	if _, err := w.r.Read(nil); err != nil {
		return err
	}
	if w.buffered() == 0 {
		return w.conn.waitReadable()
	}
	return nil
}

// pipe copies src to dst until src ends (nil) or either fails, taking a
// buffer from the budget only once src has data, so an idle direction
// holds none. While data flows (a read filled the buffer, so more is
// likely waiting) it keeps the buffer for the next read; a read that
// drained the socket gives it back before waiting again.
func (s *session) pipe(dst io.Writer, src *meterConn) error {
	var buf *[]byte
	defer func() {
		if buf != nil {
			s.buffers.put(buf)
		}
	}()
	for {
		if buf == nil {
			if err := src.waitReadable(); err != nil {
				return err
			}
			var err error
			if buf, err = s.buffers.get(s.p.ctx); err != nil {
				return net.ErrClosed
			}
		}
		n, rerr := src.Read(*buf)
		var werr error
		if n > 0 {
			_, werr = dst.Write((*buf)[:n])
		}
		if n < len(*buf) {
			s.buffers.put(buf)
			buf = nil
		}
		switch {
		case werr != nil:
			return werr
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// rawFields returns the fields of a raw response header, before
// http.ReadResponse drops some of them.
func rawFields(raw []byte) textproto.MIMEHeader {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := r.ReadLine(); err != nil {
		return nil
	}
	h, _ := r.ReadMIMEHeader()
	return h
}

// continueReader sends "100 Continue" to the sandbox before the first read
// of the request body.
type continueReader struct {
	r    io.Reader
	s    *session
	sent bool
}

func (c *continueReader) Read(b []byte) (int, error) {
	if !c.sent {
		c.sent = true
		io.WriteString(c.s.writer(), "HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.s.writer().Flush(); err != nil {
			return 0, err
		}
	}
	return c.r.Read(b)
}

// writeRequest writes req to upstream in origin form, framed anew, with
// hop-by-hop and Proxy-* headers removed and "Connection: close" (one
// request per upstream connection).
//
// It edits req.Header, which it drops once written.
func writeRequest(w *bufio.Writer, req *http.Request, authority string, body io.Reader) error {
	h := req.Header
	removeHopHeaders(h)
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
	hadLength := h.Get("Content-Length") != ""
	for _, k := range []string{"Host", "Content-Length", "Expect"} {
		h.Del(k)
	}
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), authority)
	if err := h.Write(w); err != nil {
		return err
	}
	req.Header = nil
	chunked := len(req.TransferEncoding) > 0 && req.TransferEncoding[0] == "chunked"
	switch {
	case chunked:
		io.WriteString(w, "Transfer-Encoding: chunked\r\n")
	case req.ContentLength > 0 || hadLength:
		fmt.Fprintf(w, "Content-Length: %d\r\n", max(req.ContentLength, 0))
	}
	io.WriteString(w, "Connection: close\r\n\r\n")
	if err := w.Flush(); err != nil {
		return err
	}
	var err error
	switch {
	case chunked:
		_, err = copyFlush(w, body, true)
	case req.ContentLength > 0:
		var n int64
		if n, err = copyFlush(w, body, false); err == nil && n != req.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	}
	return err
}

// writeResponse relays resp, whose body reads from body, to the sandbox,
// framed anew for it, and reports whether the connection may carry
// another request. It edits resp.Header, which it drops once written.
func writeResponse(w *bufio.Writer, resp *http.Response, body io.Reader, req *http.Request) (keep bool, err error) {
	code := resp.StatusCode
	text := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(code)))
	if text == "" {
		text = http.StatusText(code)
	}
	length := resp.Header.Get("Content-Length")
	h := resp.Header
	removeHopHeaders(h)
	h.Del("Content-Length")

	http10 := !req.ProtoAtLeast(1, 1)
	closeAfter := req.Close
	noBody := req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	chunkedIn := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	type framing int
	const (
		none framing = iota
		sized
		chunked
		untilClose
	)
	var frame framing
	switch {
	case noBody:
		frame = none
	case resp.ContentLength >= 0 && !chunkedIn:
		frame = sized
	case chunkedIn && !http10:
		frame = chunked
	default:
		frame = untilClose
		closeAfter = true
	}

	fmt.Fprintf(w, "HTTP/1.1 %03d %s\r\n", code, text)
	if err := h.Write(w); err != nil {
		return false, err
	}
	resp.Header = nil
	switch frame {
	case none:
		if length != "" && code != http.StatusNoContent {
			fmt.Fprintf(w, "Content-Length: %s\r\n", length)
		}
	case sized:
		fmt.Fprintf(w, "Content-Length: %d\r\n", resp.ContentLength)
	case chunked:
		io.WriteString(w, "Transfer-Encoding: chunked\r\n")
	}
	if closeAfter {
		io.WriteString(w, "Connection: close\r\n")
	} else if http10 {
		io.WriteString(w, "Connection: keep-alive\r\n")
	}
	io.WriteString(w, "\r\n")
	if err := w.Flush(); err != nil {
		return false, err
	}

	switch frame {
	case sized:
		var n int64
		if n, err = copyFlush(w, body, false); err == nil && n != resp.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	case chunked:
		_, err = copyFlush(w, body, true) // trailers are not relayed
	case untilClose:
		_, err = copyFlush(w, body, false)
	}
	return !closeAfter && err == nil, err
}

// copyFlush copies src to w until EOF, flushing after each piece so a
// streamed body reaches the other side as it comes. With chunked, each
// piece is sent as a chunk and the last chunk (with no trailers) follows
// EOF. It returns the body bytes copied.
//
// A body from bodyReader is read into a buffer from the budget, taken once
// the body has data and given back after each piece.
func copyFlush(w *bufio.Writer, src io.Reader, chunked bool) (int64, error) {
	wr, _ := src.(*waitingReader)
	var own []byte
	var sc *scrubber
	if wr == nil {
		own = make([]byte, bufSize)
	} else {
		sc = wr.scrub
	}
	// put writes one piece of the body as it goes out.
	put := func(p []byte) error {
		if len(p) == 0 {
			return nil
		}
		if chunked {
			fmt.Fprintf(w, "%x\r\n", len(p))
		}
		w.Write(p)
		if chunked {
			w.WriteString("\r\n")
		}
		return nil
	}
	var total int64
	for {
		buf := &own
		var err error
		if wr != nil {
			buf, err = wr.take()
		}
		var n, carried int
		if err == nil {
			if sc != nil {
				// What was held back goes in front, to be
				// scanned with what follows it.
				carried = copy(*buf, sc.carry)
			}
			n, err = src.Read((*buf)[carried:])
		}
		if n > 0 {
			if sc != nil {
				sc.write((*buf)[:carried+n], put)
			} else {
				put((*buf)[:n])
			}
			werr := w.Flush()
			total += int64(n)
			if werr != nil {
				wr.give(buf)
				return total, werr
			}
		}
		wr.give(buf)
		if err == io.EOF {
			if sc != nil {
				sc.flush(put)
			}
			if chunked {
				w.WriteString("0\r\n\r\n")
			}
			return total, w.Flush()
		}
		if err != nil {
			return total, err
		}
	}
}
