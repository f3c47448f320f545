package egress

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Secret is a value the sandbox never holds: it holds Placeholder, and the
// proxy puts Value in its place in the request headers it sends to Hosts.
type Secret struct {
	Name        string // for reports and errors; never the value
	Placeholder string // what the sandbox holds: unguessable, header-safe
	Value       string // the real value: no CR, LF or NUL, nor what BadValue refuses
	Hosts       *Rules // where Value may be sent: host names, not ranges
}

// BadValue says why v cannot be a secret's value beyond CR, LF and NUL,
// or "" if it can: a header field value (RFC 9110 section 5.5) holds no
// other control character but tab, and loses a space or tab at its
// start or end, so the server would get, and could echo, a value shorter
// than the one the scrubber looks for. A tab inside, and bytes that are
// not UTF-8, travel as they are.
func BadValue(v string) string {
	if strings.Trim(v, " \t") != v {
		return "begins or ends with a space or tab, which a header field loses"
	}
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' && c != '\r' && c != '\n' && c != 0 || c == 0x7f {
			return "holds a control character, which a header field may not"
		}
	}
	return ""
}

// MaxSecretBytes bounds a secret's value and placeholder: they travel in
// a request header, which is at most 32 KiB, and a scrubbed response
// holds back at most this much.
const MaxSecretBytes = 8 << 10

// secretHost says whether a secret is bound to host (a name or an IP
// literal, as requested) on port: such requests get their secrets, and
// their responses are scrubbed.
func (p *Proxy) secretHost(host string, port int) bool {
	for i := range p.Secrets {
		if p.Secrets[i].boundTo(host, port) {
			return true
		}
	}
	return false
}

// boundTo says whether s may be sent to host on port. Secrets are bound
// to names only, never to an IP literal.
func (s *Secret) boundTo(host string, port int) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	name, bad := normalizeName(host)
	if bad != "" {
		return false
	}
	r, _ := s.Hosts.matchName(name, port)
	return r != nil
}

// putSecrets puts the values of the secrets bound to host:port in place
// of their placeholders in h's values, asks for an unencoded response
// there (so the response can be scrubbed), and drops the fields that
// could route the request elsewhere (routingHeader). A placeholder of a
// secret not bound there, in h or in uri, is a refusal: its text names
// the secret. bound says whether host:port is a secret host.
func (p *Proxy) putSecrets(h http.Header, uri, host string, port int) (bound bool, refusal string) {
	if len(p.Secrets) == 0 {
		return false, ""
	}
	bound = p.secretHost(host, port)
	for i := range p.Secrets {
		s := &p.Secrets[i]
		ok := s.boundTo(host, port)
		found := strings.Contains(uri, s.Placeholder)
		for k, vs := range h {
			if strings.Contains(k, s.Placeholder) {
				found = true
			}
			for j, v := range vs {
				if !strings.Contains(v, s.Placeholder) {
					continue
				}
				found = true
				if ok {
					vs[j] = strings.ReplaceAll(v, s.Placeholder, s.Value)
				}
			}
		}
		if found && !ok {
			return bound, fmt.Sprintf("the request carries the placeholder of secret %s, which may be sent only to %s", s.Name, s.Hosts)
		}
	}
	if bound {
		h.Set("Accept-Encoding", "identity")
		for k := range h {
			if routingHeader(k) {
				delete(h, k)
			}
		}
	}
	return bound, ""
}

// routingHeader says whether a request header field may name, to a front
// end, the host or URL to route the request to in place of its Host and
// target: Forwarded, the X-Forwarded-* and X-Original-* families,
// X-Rewrite-URL, X-Host, X-HTTP-Host-Override. The proxy forces the Host
// of a request to a secret's host; a front end serving many tenants that
// honoured one of these instead would hand the request, and the value in
// it, to the tenant the program named. So they are dropped from such
// requests (not set to the host: the proxy has nothing to say there that
// Host does not). Names are compared in any case and with "_" as "-", as
// servers that map fields to variables (CGI's HTTP_X_FORWARDED_HOST) do.
func routingHeader(k string) bool {
	k = strings.ReplaceAll(strings.ToLower(k), "_", "-")
	switch k {
	case "forwarded", "x-host", "x-http-host-override", "x-rewrite-url":
		return true
	}
	return strings.HasPrefix(k, "x-forwarded") || strings.HasPrefix(k, "x-original")
}

// The one rule by which the proxy replaces secrets' values with their
// placeholders, in a response's status line, header and body and in the
// texts of records alike: at the first place in the text where a value
// begins, the longest value that begins there, then on from its end. So
// of two values one of which holds the other (an account id, and
// "id:password"), the longer is replaced whole, whatever the order of
// Proxy.Secrets.

// replaceValues passes text to emit with the values that begin before
// limit replaced by their placeholders (the one rule), and returns where
// the text it passed on ends: after the last value replaced, or 0.
// find[i] is what is looked for of a secret in hay, which is text or text
// with ASCII letters in lower case (then find[i] is lowered too), and
// put[i] its placeholder.
func replaceValues(text, hay []byte, find, put [][]byte, limit int, emit func([]byte) error) (int, error) {
	// next[i] is where find[i] next begins at or after pos: -1 if
	// nowhere, below pos if not looked for since pos passed it.
	var small [8]int
	next := small[:0]
	for range find {
		next = append(next, -2)
	}
	pos := 0
	for {
		at, which := -1, -1
		for i, v := range find {
			if next[i] == -1 || len(v) == 0 {
				continue
			}
			if next[i] < pos {
				j := bytes.Index(hay[pos:], v)
				if j < 0 {
					next[i] = -1
					continue
				}
				next[i] = pos + j
			}
			if n := next[i]; at < 0 || n < at || n == at && len(v) > len(find[which]) {
				at, which = n, i
			}
		}
		if at < 0 || at >= limit {
			return pos, nil
		}
		if err := emit(text[pos:at]); err != nil {
			return pos, err
		}
		if err := emit(put[which]); err != nil {
			return pos, err
		}
		pos = at + len(find[which])
	}
}

// scrubValues is what replaceValues looks for of each secret, its value,
// and what it puts in its place, made once for all the Proxy's scrubbing.
func (p *Proxy) scrubValues() (find, put [][]byte) {
	p.scrubOnce.Do(func() {
		for _, s := range p.Secrets {
			p.find, p.put = append(p.find, []byte(s.Value)), append(p.put, []byte(s.Placeholder))
		}
	})
	return p.find, p.put
}

// asciiLower returns a copy of b with ASCII letters in lower case: the
// same length, byte for byte, unlike bytes.ToLower.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// scrubText replaces every secret's value in s with its placeholder.
func (p *Proxy) scrubText(s string) string {
	if len(p.Secrets) == 0 {
		return s
	}
	var b []byte
	emit := func(piece []byte) error { b = append(b, piece...); return nil }
	text := []byte(s)
	find, put := p.scrubValues()
	end, _ := replaceValues(text, text, find, put, len(text), emit)
	if end == 0 {
		return s
	}
	return string(append(b, text[end:]...))
}

// errFolded refuses a response header with a field line folded onto the
// one before (obs-fold): parsing joins the two with a space, which could
// make a value the scrubber never saw whole. RFC 9112 section 5.2 lets a
// proxy answer such a response with 502.
var errFolded = errors.New("the response header has a field line folded onto the one before (obs-fold), which is refused from a secret's host")

// scrubHeader returns raw, a response header as it came from a secret's
// host (the status line, the field lines, the empty line), with every
// secret's value replaced by its placeholder (the one rule) before
// anything parses or quotes it: so no field, status text or parse error
// made from it holds a value, escaped or not. Values are found in any
// ASCII case, since parsing recases field names. A header with no value
// in it is returned as it is; a scrubbed one must still fit in size
// bytes. A folded field line is refused (errFolded).
func (p *Proxy) scrubHeader(raw []byte, size int) ([]byte, error) {
	for rest := raw; ; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 || i+1 == len(rest) {
			break
		}
		if rest = rest[i+1:]; rest[0] == ' ' || rest[0] == '\t' {
			return nil, errFolded
		}
	}
	hay := asciiLower(raw)
	var out []byte
	emit := func(piece []byte) error {
		if len(out)+len(piece) > size {
			return fmt.Errorf("response header larger than %d bytes once the secrets' values in it are replaced with their placeholders", size)
		}
		out = append(out, piece...)
		return nil
	}
	find, put := p.scrubValues()
	lower := make([][]byte, len(find))
	for i, v := range find {
		lower[i] = asciiLower(v)
	}
	end, err := replaceValues(raw, hay, lower, put, len(raw), emit)
	if err != nil || end == 0 {
		return raw, err
	}
	if err := emit(raw[end:]); err != nil {
		return nil, err
	}
	return out, nil
}

// scrubber replaces secrets' values with their placeholders in a stream
// (the one rule), holding back the last bytes of each piece, where a
// value may begin that the next piece completes.
type scrubber struct {
	find, put [][]byte // see scrubValues
	keep      int      // the longest value's length - 1
	carry     []byte   // held back; at most keep bytes, in an array of its own
}

func (p *Proxy) newScrubber() *scrubber {
	sc := &scrubber{}
	sc.find, sc.put = p.scrubValues()
	for _, s := range p.Secrets {
		sc.keep = max(sc.keep, len(s.Value)-1)
	}
	sc.carry = make([]byte, 0, sc.keep)
	return sc
}

// write scrubs data, which begins with what was carried from the last
// piece, and passes on all of it but a new carry: the bytes from which
// a value could begin that data does not hold whole. Only values that
// begin before that are replaced, so that one a longer value holds is
// never replaced before the longer one could be seen.
func (sc *scrubber) write(data []byte, emit func([]byte) error) error {
	limit := len(data) - sc.keep
	end, err := replaceValues(data, data, sc.find, sc.put, limit, emit)
	if err != nil {
		return err
	}
	tail := max(end, limit)
	if err := emit(data[end:tail]); err != nil {
		return err
	}
	sc.carry = append(sc.carry[:0], data[tail:]...)
	return nil
}

// flush scrubs and passes on what is held back, at the end of the stream.
func (sc *scrubber) flush(emit func([]byte) error) error {
	end, err := replaceValues(sc.carry, sc.carry, sc.find, sc.put, len(sc.carry), emit)
	if err != nil {
		return err
	}
	return emit(sc.carry[end:])
}

// otherCoding returns the first coding other than allowed that the
// field lines vs name, "" if none: every line, and every element of each
// line's list, in any case, is allowed or empty. A response to a secret's
// host must be unencoded (Content-Encoding: identity) and framed only by
// chunking (Transfer-Encoding: chunked).
func otherCoding(vs []string, allowed string) string {
	for _, v := range vs {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.Trim(c, " \t"); c != "" && !strings.EqualFold(c, allowed) {
				return c
			}
		}
	}
	return ""
}
