package egress

import (
	"bytes"
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
	Value       string // the real value: no CR, LF or NUL
	Hosts       *Rules // where Value may be sent: host names, not ranges
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
// of their placeholders in h's values, and asks for an unencoded response
// there (so the response can be scrubbed). A placeholder of a secret not
// bound there, in h or in uri, is a refusal: its text names the secret.
// bound says whether host:port is a secret host.
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
	}
	return bound, ""
}

// scrubText replaces every secret's value in s with its placeholder.
func (p *Proxy) scrubText(s string) string {
	for i := range p.Secrets {
		if sec := &p.Secrets[i]; strings.Contains(s, sec.Value) {
			s = strings.ReplaceAll(s, sec.Value, sec.Placeholder)
		}
	}
	return s
}

// scrubName replaces every secret's value in a header name, in any case:
// names are canonicalized as they are parsed.
func (p *Proxy) scrubName(k string) string {
	for i := range p.Secrets {
		sec := &p.Secrets[i]
		lower, value := strings.ToLower(k), strings.ToLower(sec.Value)
		if len(lower) != len(k) || !strings.Contains(lower, value) {
			continue
		}
		var b strings.Builder
		for from := 0; ; {
			j := strings.Index(lower[from:], value)
			if j < 0 {
				b.WriteString(k[from:])
				break
			}
			b.WriteString(k[from : from+j])
			b.WriteString(sec.Placeholder)
			from += j + len(value)
		}
		k = b.String()
	}
	return k
}

// scrubber replaces secrets' values with their placeholders in a stream,
// keeping back the last bytes of each piece that may begin a value the
// next piece completes.
type scrubber struct {
	secrets []Secret
	keep    int    // the longest value's length - 1
	carry   []byte // held back; at most keep bytes, in an array of its own
}

func (p *Proxy) newScrubber() *scrubber {
	sc := &scrubber{secrets: p.Secrets}
	for _, s := range p.Secrets {
		sc.keep = max(sc.keep, len(s.Value)-1)
	}
	sc.carry = make([]byte, 0, sc.keep)
	return sc
}

// header scrubs a response's status text and header names and values.
func (sc *scrubber) header(p *Proxy, resp *http.Response) {
	resp.Status = p.scrubText(resp.Status)
	for k, vs := range resp.Header {
		for j, v := range vs {
			vs[j] = p.scrubText(v)
		}
		if clean := p.scrubName(k); clean != k {
			delete(resp.Header, k)
			resp.Header[clean] = append(resp.Header[clean], vs...)
		}
	}
}

// write scrubs data, which begins with what was carried from the last
// piece, and passes on all of it but a new carry.
func (sc *scrubber) write(data []byte, emit func([]byte) error) error {
	pos := 0
	for {
		at, which := -1, -1
		for i := range sc.secrets {
			v := sc.secrets[i].Value
			if j := bytes.Index(data[pos:], []byte(v)); j >= 0 && (at < 0 || j < at || j == at && len(v) > len(sc.secrets[which].Value)) {
				at, which = j, i
			}
		}
		if at < 0 {
			break
		}
		if err := emit(data[pos : pos+at]); err != nil {
			return err
		}
		if err := emit([]byte(sc.secrets[which].Placeholder)); err != nil {
			return err
		}
		pos += at + len(sc.secrets[which].Value)
	}
	tail := max(pos, len(data)-sc.keep)
	if err := emit(data[pos:tail]); err != nil {
		return err
	}
	sc.carry = append(sc.carry[:0], data[tail:]...)
	return nil
}
