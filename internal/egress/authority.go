package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Authority is a certificate authority made for one sandbox, with which
// the proxy terminates TLS to the hosts its secrets are bound to. Its key
// is made in memory and never leaves it; its certificate is what the
// sandbox's trust store adds. The certificate is name-constrained
// (critical) to the secrets' host names (a DNS constraint admits the
// names beneath it too) and excludes every IP address, so even a leaf it
// signed by mistake would verify for no other host; and the proxy asks it
// for a leaf only for a host a secret is bound to, when a CONNECT to that
// host arrives.
type Authority struct {
	cert    *x509.Certificate
	pem     []byte
	names   []string // the permitted DNS domains, as in the certificate
	expires time.Time

	mu      sync.Mutex
	key     *ecdsa.PrivateKey // nil once closed
	leafKey *ecdsa.PrivateKey // one key for every leaf; nil once closed
	leaves  map[string]*tls.Certificate
}

// maxLeaves bounds the leaves an Authority keeps; a wildcard host lets the
// sandbox ask for many names, so past it the cache starts over.
const maxLeaves = 64

// ErrAuthorityClosed is returned for a leaf asked of a closed Authority.
var ErrAuthorityClosed = errors.New("egress: certificate authority closed")

// NewAuthority makes an authority for the host names of secrets, valid
// from a few minutes ago for lifetime. A secret bound to anything but
// names (an address range) is an error: the authority signs names only.
func NewAuthority(secrets []Secret, lifetime time.Duration) (*Authority, error) {
	var names []string
	for _, s := range secrets {
		if s.Hosts == nil {
			return nil, fmt.Errorf("egress: secret %s has no hosts", s.Name)
		}
		if len(s.Hosts.nets) > 0 {
			return nil, fmt.Errorf("egress: secret %s is bound to an address range (%s); secrets are bound to host names", s.Name, s.Hosts.nets[0].entry)
		}
		for _, n := range s.Hosts.names {
			c := n.name
			if n.wildcard {
				c = "." + n.name // subdomains only
			}
			if !slices.Contains(names, c) {
				names = append(names, c)
			}
		}
	}
	if len(names) == 0 {
		return nil, errors.New("egress: no secret host names to make an authority for")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress: authority key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress: leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sandbox egress proxy (secrets)", Organization: []string{"fumehood sandbox"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(lifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},

		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         names,
		ExcludedIPRanges: []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress: authority certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress: authority certificate: %w", err)
	}
	return &Authority{
		cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		names: names, expires: tmpl.NotAfter,
		key: key, leafKey: leafKey, leaves: map[string]*tls.Certificate{},
	}, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("egress: serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// Certificate returns the authority's certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// CertificatePEM returns the authority's certificate in PEM form, for a
// trust store.
func (a *Authority) CertificatePEM() []byte { return slices.Clone(a.pem) }

// Expires is when the authority's certificate, and every leaf, ends.
func (a *Authority) Expires() time.Time { return a.expires }

// Close drops the authority's keys and leaves: it signs nothing after.
func (a *Authority) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.key, a.leafKey, a.leaves = nil, nil, nil
}

// Closed reports whether Close dropped the authority's keys.
func (a *Authority) Closed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.key == nil
}

// permits says whether name (normalized) lies under the authority's
// constraints, as a verifier applies them.
func (a *Authority) permits(name string) bool {
	for _, c := range a.names {
		if sub, ok := strings.CutPrefix(c, "."); ok {
			if strings.HasSuffix(name, c) && len(name) > len(sub)+1 {
				return true
			}
		} else if name == c || strings.HasSuffix(name, "."+c) {
			return true
		}
	}
	return false
}

// leaf returns a certificate for name, a normalized host name under the
// authority's constraints, made the first time it is asked for. It
// reports whether it made one, for the CPU budget.
func (a *Authority) leaf(name string) (*tls.Certificate, bool, error) {
	if !a.permits(name) {
		return nil, false, fmt.Errorf("egress: %s is not a secret host; the authority signs only %s", name, strings.Join(a.names, ", "))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.key == nil {
		return nil, false, ErrAuthorityClosed
	}
	if c := a.leaves[name]; c != nil {
		return c, false, nil
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, false, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    a.cert.NotBefore,
		NotAfter:     a.expires,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, false, fmt.Errorf("egress: leaf for %s: %w", name, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: a.leafKey}
	if len(a.leaves) >= maxLeaves {
		clear(a.leaves)
	}
	a.leaves[name] = c
	return c, true, nil
}
