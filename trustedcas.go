package sandbox

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/fumehood/sandbox/internal/recipe"
)

// parseTrustedCAs checks Options.TrustedCAs and returns it as plain PEM
// certificates, without the comments and headers it may carry.
func parseTrustedCAs(data []byte) ([]byte, error) {
	if len(data) > recipe.MaxTrustBundle {
		return nil, optionErr("Options.TrustedCAs", fmt.Sprintf("%d bytes", len(data)), "is larger than %d bytes", recipe.MaxTrustBundle)
	}
	var out bytes.Buffer
	rest := data
	for n := 0; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 || n == 0 {
				if n == 0 {
					return nil, optionErr("Options.TrustedCAs", fmt.Sprintf("%d bytes", len(data)), "holds no PEM certificate")
				}
				return nil, optionErr("Options.TrustedCAs", fmt.Sprintf("%d bytes", len(data)),
					"has %d bytes after certificate %d that are not PEM", len(bytes.TrimSpace(rest)), n)
			}
			return out.Bytes(), nil
		}
		if block.Type != "CERTIFICATE" {
			return nil, optionErr("Options.TrustedCAs", block.Type, "PEM block %d is a %s, want CERTIFICATE", n+1, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, optionErr("Options.TrustedCAs", fmt.Sprintf("certificate %d", n+1), "is malformed: %v", err)
		}
		fmt.Fprintf(&out, "# %s\n", strings.ReplaceAll(cert.Subject.String(), "\n", " "))
		pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})
	}
}
