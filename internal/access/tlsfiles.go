package access

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// loadPair reads the server's certificate and key.
func loadPair(cert, key string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("%w: -tls-cert %s, -tls-key %s: %w", ErrConfig, cert, key, err)
	}
	return &c, nil
}

// loadPool reads a PEM file of CA certificates, for the flag named.
func loadPool(flag, file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w: %s %s: no PEM certificate in it", ErrConfig, flag, file)
	}
	return pool, nil
}

// tlsConfig serves the certificate reloaded from its files, and with a
// client CA asks for a client certificate: one is verified if given, and
// a request without one may still authenticate with a bearer token.
func (g *Guard) tlsConfig() *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return g.cert.get(), nil
		},
	}
	if g.clientCAs != nil {
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = g.clientCAs
	}
	return c
}
