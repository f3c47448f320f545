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
	"time"
)

// session serves one connection from the sandbox: a CONNECT tunnel, or a
// series of plain HTTP requests on a kept-alive connection.
type session struct {
	p      *Proxy
	act    activity
	client *meterConn    // the sandbox side
	lim    *limitReader  // bounds request headers
	br     *bufio.Reader // reads client through lim
	bw     *bufio.Writer // writes client

	mu       sync.Mutex
	closed   bool
	upstream net.Conn // the current upstream connection, if any
}

func newSession(p *Proxy, c net.Conn) *session {
	s := &session{p: p}
	s.act.touch()
	s.client = newMeterConn(c, &s.act, p.idleTimeout())
	s.lim = &limitReader{r: s.client, n: -1}
	s.br = bufio.NewReaderSize(s.lim, 32<<10)
	s.bw = bufio.NewWriterSize(s.client, 32<<10)
	return s
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
func (s *session) consumed() int64 { return s.client.read.Load() - int64(s.br.Buffered()) }

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
	s.bw.Flush()
	a.BytesUp = s.consumed() - a.up0
	a.BytesDown = s.client.written.Load() - a.down0
	a.Duration = time.Since(a.Start)
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
	// Wait for the first byte of the next request (idle timeout only).
	if _, err := s.br.Peek(1); err != nil {
		return false
	}
	a := s.begin()
	s.client.setReadLimit(time.Now().Add(min(headerTimeout, s.p.idleTimeout())))
	s.lim.n = maxHeaderBytes
	req, err := http.ReadRequest(s.br)
	hitLimit := s.lim.n == 0
	s.lim.n = -1
	s.client.setReadLimit(time.Time{})
	if err != nil {
		switch {
		case hitLimit || errors.Is(err, errHeaderTooLarge):
			s.refuse(a, http.StatusRequestHeaderFieldsTooLarge, "request header too large")
		case isTimeout(err):
			s.refuse(a, http.StatusRequestTimeout, "request header not received in time")
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
	return s.forward(a, req)
}

// refuse answers status with a short plain-text reason, then drains and
// closes the connection: a refusal always ends it.
func (s *session) refuse(a *attempt, status int, reason string) {
	a.Status = status
	if a.Reason == "" {
		a.Reason = reason
	}
	body := "egress proxy: " + reason + "\n"
	fmt.Fprintf(s.bw, "HTTP/1.1 %03d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if err := s.bw.Flush(); err == nil {
		// Let the client read the answer before the close: closing with
		// unread request bytes would reset the connection and could
		// destroy the answer in flight.
		s.client.CloseWrite()
		s.client.setReadLimit(time.Now().Add(lingerTime))
		io.Copy(io.Discard, io.LimitReader(s.br, 1<<20))
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
	host, port, _, why := splitHostPort(req.Host, 0)
	if why != "" {
		s.refuse(a, http.StatusBadRequest, fmt.Sprintf("bad CONNECT target %q: %s", req.Host, why))
		return
	}
	up := s.open(a, host, port)
	if up == nil {
		return
	}
	a.Status = http.StatusOK
	io.WriteString(s.bw, "HTTP/1.1 200 Connection established\r\n\r\n")
	if err := s.bw.Flush(); err != nil {
		a.Error = "write to sandbox: " + err.Error()
		s.close()
		s.finish(a)
		return
	}

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
		buf := make([]byte, 32<<10)
		if _, err := io.CopyBuffer(s.client, up, buf); err != nil {
			fail("tunnel down", err)
			return
		}
		s.client.CloseWrite()
	}()
	// Bytes the client sent right after its request are in s.br; they go
	// first, then the rest straight from the connection.
	buf := make([]byte, 32<<10)
	pending, _ := s.br.Peek(s.br.Buffered())
	_, err := up.Write(pending)
	if err == nil {
		s.br.Discard(len(pending))
		_, err = io.CopyBuffer(up, s.client, buf)
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

	// The sandbox may wait for "100 Continue" before sending the body;
	// the proxy says it itself when it starts reading the body.
	body := io.Reader(req.Body)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") && req.ContentLength != 0 {
		body = &continueReader{r: req.Body, s: s}
	}
	upBW := bufio.NewWriterSize(up, 32<<10)
	if err := writeRequest(upBW, req, authority, body); err != nil {
		return s.fail(a, "send request", err, true)
	}

	upLim := &limitReader{r: up, n: maxHeaderBytes}
	upBR := bufio.NewReaderSize(upLim, 32<<10)
	var resp *http.Response
	var connTokens []string
	for {
		var err error
		// http.ReadResponse drops a Connection header that says "close"
		// with the other headers it names, which must not be passed on
		// either; keep the raw header to find them.
		buffered, _ := upBR.Peek(upBR.Buffered())
		upLim.n, upLim.capture, upLim.copy = maxHeaderBytes, true, append([]byte(nil), buffered...)
		resp, err = http.ReadResponse(upBR, &http.Request{Method: req.Method})
		upLim.n, upLim.capture = -1, false
		connTokens = connectionHeader(upLim.copy)
		upLim.copy = nil
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
	keep, err := writeResponse(s.bw, resp, req)
	resp.Body.Close()
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

// connectionHeader returns the values of the Connection header in a raw
// response header.
func connectionHeader(raw []byte) []string {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := r.ReadLine(); err != nil {
		return nil
	}
	h, _ := r.ReadMIMEHeader()
	return h.Values("Connection")
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
		io.WriteString(c.s.bw, "HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.s.bw.Flush(); err != nil {
			return 0, err
		}
	}
	return c.r.Read(b)
}

// writeRequest writes req to upstream in origin form, framed anew, with
// hop-by-hop and Proxy-* headers removed and "Connection: close" (one
// request per upstream connection).
func writeRequest(w *bufio.Writer, req *http.Request, authority string, body io.Reader) error {
	h := req.Header.Clone()
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

// writeResponse relays resp to the sandbox, framed anew for it, and
// reports whether the connection may carry another request.
func writeResponse(w *bufio.Writer, resp *http.Response, req *http.Request) (keep bool, err error) {
	code := resp.StatusCode
	text := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(code)))
	if text == "" {
		text = http.StatusText(code)
	}
	length := resp.Header.Get("Content-Length")
	h := resp.Header.Clone()
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
		if n, err = copyFlush(w, resp.Body, false); err == nil && n != resp.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	case chunked:
		_, err = copyFlush(w, resp.Body, true) // trailers are not relayed
	case untilClose:
		_, err = copyFlush(w, resp.Body, false)
	}
	return !closeAfter && err == nil, err
}

// copyFlush copies src to w until EOF, flushing after each piece so a
// streamed body reaches the other side as it comes. With chunked, each
// piece is sent as a chunk and the last chunk (with no trailers) follows
// EOF. It returns the body bytes copied.
func copyFlush(w *bufio.Writer, src io.Reader, chunked bool) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if chunked {
				fmt.Fprintf(w, "%x\r\n", n)
			}
			w.Write(buf[:n])
			if chunked {
				w.WriteString("\r\n")
			}
			if werr := w.Flush(); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF {
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
