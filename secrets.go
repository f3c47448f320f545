package sandbox

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fumehood/sandbox/internal/egress"
	"github.com/fumehood/sandbox/internal/wire"
)

// Secret is a value the program never holds: an API key, a token. The
// program's environment holds a placeholder under Name instead, and the
// egress proxy, in the caller's process, puts Value in its place in the
// request headers it sends to Hosts (see "Secrets" in the package
// documentation). Value never enters the sandbox, the Result, errors or
// logs.
type Secret struct {
	// Name is the environment variable that holds the placeholder inside
	// the sandbox: letters, digits and "_", not starting with a digit.
	Name string
	// Value is the real value. It goes in a header field, so it must not
	// hold CR, LF, NUL or another control character but tab, nor begin
	// or end with a space or tab (which a header loses); it may be at
	// most MaxSecretBytes long.
	Value string
	// Hosts are where Value may be sent: host names in Egress.Allow's
	// syntax ("api.example.com", "*.example.com", "api.example.com:8443"),
	// each allowed by Egress.Allow on all of its ports. Address ranges
	// are refused: the proxy's authority signs names only. A name without
	// a port means ports 80 and 443, and on port 80 the value travels in
	// plain HTTP: give "api.example.com:443" to send it over TLS only.
	Hosts []string
}

// MaxSecretBytes bounds a Secret's Value.
const MaxSecretBytes = egress.MaxSecretBytes

// maxSecretName bounds a Secret's Name, which its placeholder holds.
const maxSecretName = 256

// placeholderPrefix begins every placeholder; the secret's name and 128
// random bits follow.
const placeholderPrefix = "sandbox-secret-"

// Lifetimes of a Sandbox's certificate authority: it is made with the
// first run, and a Sandbox that is not live makes a new one for a run
// that starts when less than authorityRenew of it is left, so that no run
// meets an expired one. A live sandbox keeps its authority for its life:
// Options.Live.MaxLifetime and an hour if that is longer.
const (
	authorityLifetime = 7 * 24 * time.Hour
	authorityRenew    = 24 * time.Hour
)

// secretSet is a Sandbox's secrets: the checked Egress.Secrets, and from
// the first run on their placeholders and the authority of its proxy.
type secretSet struct {
	given []Secret
	hosts []*egress.Rules
	trust []byte // Options.TrustedCAs, for the proxy's upstream roots

	mu     sync.Mutex
	made   []egress.Secret // nil until the first run
	auth   *egress.Authority
	roots  *x509.CertPool
	closed bool
}

// checkSecrets validates Egress.Secrets against the allowlist and
// returns the Sandbox's secret set (nil without secrets). It keeps its
// own copy: later changes to the caller's slice do not reach it.
func (o *resolved) checkSecrets(rules *egress.Rules) (*secretSet, error) {
	if len(o.Secrets) == 0 {
		return nil, nil
	}
	env := map[string]bool{}
	for _, kv := range o.Env {
		k, _, _ := strings.Cut(kv, "=")
		env[k] = true
	}
	ss := &secretSet{trust: o.TrustedCAs}
	names := map[string]int{}
	for i, sec := range o.Secrets {
		field := fmt.Sprintf("Options.Network (Egress.Secrets[%d]", i) // closed after the field
		// The value is never quoted: errors name the secret by Name.
		hidden := fmt.Sprintf("%d bytes", len(sec.Value))
		bad := egress.BadValue(sec.Value)
		switch {
		case sec.Name == "":
			return nil, optionErr(field+".Name)", "", "is empty: name the environment variable that is to hold the placeholder")
		case !validEnvName(sec.Name):
			return nil, optionErr(field+".Name)", sec.Name, "is not a valid environment variable name: use letters, digits and _, not starting with a digit")
		case len(sec.Name) > maxSecretName:
			return nil, optionErr(field+".Name)", sec.Name[:32]+"...", "is longer than %d bytes", maxSecretName)
		case env[sec.Name]:
			return nil, optionErr(field+".Name)", sec.Name, "is also set by Options.Env; the secret's placeholder is to be its value: remove one")
		case sec.Value == "":
			return nil, optionErr(field+".Value)", hidden, "is empty (secret %s)", sec.Name)
		case strings.ContainsAny(sec.Value, "\r\n\x00"):
			return nil, optionErr(field+".Value)", hidden, "holds CR, LF or NUL, which cannot go in a header line (secret %s)", sec.Name)
		case bad != "":
			return nil, optionErr(field+".Value)", hidden, "%s (secret %s)", bad, sec.Name)
		case len(sec.Value) > MaxSecretBytes:
			return nil, optionErr(field+".Value)", hidden, "is longer than %d bytes (MaxSecretBytes; secret %s)", MaxSecretBytes, sec.Name)
		case len(sec.Hosts) == 0:
			return nil, optionErr(field+".Hosts)", "", "is empty: name the hosts secret %s may be sent to", sec.Name)
		}
		if j, dup := names[sec.Name]; dup {
			return nil, optionErr(field+".Name)", sec.Name, "is also the name of Egress.Secrets[%d]; each secret needs a name of its own", j)
		}
		names[sec.Name] = i
		hosts, err := egress.ParseRules(sec.Hosts)
		if err != nil {
			oe := &OptionError{Option: field + ".Hosts)", Value: strings.Join(sec.Hosts, " "), Reason: err.Error()}
			if re, ok := errors.AsType[*egress.RuleError](err); ok && re.Index >= 0 {
				oe.Option, oe.Value, oe.Reason = fmt.Sprintf("%s.Hosts[%d])", field, re.Index), re.Entry, re.Reason
			}
			return nil, oe
		}
		if why := rules.Uncovered(hosts); why != "" {
			return nil, optionErr(field+".Hosts)", strings.Join(sec.Hosts, " "), "%s; a secret may be sent only to host names Egress.Allow allows (secret %s)", why, sec.Name)
		}
		sec.Hosts = slices.Clone(sec.Hosts)
		ss.given = append(ss.given, sec)
		ss.hosts = append(ss.hosts, hosts)
	}
	return ss, nil
}

func validEnvName(s string) bool {
	for i, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// runSecrets is what one run gets of its Sandbox's secrets.
type runSecrets struct {
	secrets []egress.Secret
	auth    *egress.Authority
	roots   *x509.CertPool
}

// forRun readies the secrets for a run of cfg, cmd's wire form: their
// placeholders go in its environment and the authority's certificate in
// its trust store. The first run makes the placeholders and the
// authority; see authorityRenew.
func (ss *secretSet) forRun(cfg *wire.Config, cmd *Cmd, live bool, maxLifetime time.Duration) (runSecrets, error) {
	if ss == nil {
		return runSecrets{}, nil
	}
	for i, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		for _, sec := range ss.given {
			if k == sec.Name {
				return runSecrets{}, optionErr(fmt.Sprintf("Cmd.Env[%d]", i), k, "sets %s, which holds the placeholder of a secret (Egress.Secrets)", k)
			}
		}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return runSecrets{}, fmt.Errorf("sandbox: run: %w", ErrClosed)
	}
	if ss.made == nil {
		for i, sec := range ss.given {
			var b [16]byte
			if _, err := rand.Read(b[:]); err != nil {
				return runSecrets{}, fmt.Errorf("sandbox: secret %s: placeholder: %w", sec.Name, err)
			}
			ss.made = append(ss.made, egress.Secret{Name: sec.Name, Value: sec.Value, Hosts: ss.hosts[i],
				Placeholder: placeholderPrefix + sec.Name + "-" + hex.EncodeToString(b[:])})
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if len(ss.trust) > 0 {
			roots.AppendCertsFromPEM(ss.trust)
		}
		ss.roots = roots
	}
	if ss.auth == nil || !live && time.Until(ss.auth.Expires()) < authorityRenew {
		lifetime := authorityLifetime
		if live && maxLifetime+time.Hour > lifetime {
			lifetime = maxLifetime + time.Hour
		}
		auth, err := egress.NewAuthority(ss.made, lifetime)
		if err != nil {
			return runSecrets{}, fmt.Errorf("sandbox: the egress proxy's certificate authority for Egress.Secrets: %w", err)
		}
		ss.auth = auth
	}
	env := cfg.Program.Env
	for _, sec := range ss.made {
		env = append(env, sec.Name+"="+sec.Placeholder)
	}
	cfg.Program.Env = env
	trust := slices.Clip(cfg.Spec.TrustedCAs)
	trust = append(trust, "# the egress proxy's authority for Egress.Secrets\n"...)
	cfg.Spec.TrustedCAs = append(trust, ss.auth.CertificatePEM()...)
	return runSecrets{secrets: ss.made, auth: ss.auth, roots: ss.roots}, nil
}

// serve gives a run's proxy its secrets.
func (rs runSecrets) serve(p *egress.Proxy) {
	p.Secrets, p.Authority, p.UpstreamRoots = rs.secrets, rs.auth, rs.roots
}

// close drops the authority's key and the values: a closed Sandbox holds
// neither.
func (ss *secretSet) close() {
	if ss == nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	if ss.auth != nil {
		ss.auth.Close()
		ss.auth = nil
	}
	ss.made = nil
}
