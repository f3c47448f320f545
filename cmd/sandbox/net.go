package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/fumehood/sandbox"
)

// netFlag is --net: "none", "allow:LIST" (comma-separated allowlist
// entries) or "host".
type netFlag struct {
	value  string
	host   bool     // "host"
	egress []string // the list of "allow:LIST"; nil otherwise
}

func (f *netFlag) String() string {
	if f == nil || f.value == "" {
		return "none"
	}
	return f.value
}

func (f *netFlag) Set(v string) error {
	list, isAllow := strings.CutPrefix(v, "allow:")
	switch {
	case v == "none":
		*f = netFlag{value: v}
	case v == "host":
		*f = netFlag{value: v, host: true}
	case v == "allow":
		return fmt.Errorf(`"allow" needs its list: allow:HOST[,HOST...], e.g. allow:pypi.org,files.pythonhosted.org`)
	case isAllow:
		// Entries are checked by the library, which names the wrong one.
		*f = netFlag{value: v, egress: strings.Split(list, ",")}
	default:
		return fmt.Errorf(`must be "none", "allow:HOST[,HOST...]" or "host"`)
	}
	return nil
}

// network is the sandbox.Network of the flag, with secrets for the proxy
// to put in: --secret needs --net allow:LIST.
func (f *netFlag) network(secrets []sandbox.Secret) (sandbox.Network, error) {
	switch {
	case f.egress != nil:
		return &sandbox.Egress{Allow: f.egress, Secrets: secrets}, nil
	case len(secrets) > 0:
		return nil, fmt.Errorf("--secret needs --net allow:HOST[,HOST...], whose egress proxy puts the secrets in (--net is %s)", f)
	case f.host:
		return sandbox.HostNetworkUnsafe{}, nil
	}
	return nil, nil
}

// printConnections prints the proxy's report of a --net allow run on
// stderr: one line an attempt that was refused or failed upstream.
func printConnections(w io.Writer, prog string, res *sandbox.Result) {
	for _, c := range res.Connections {
		switch {
		case !c.Allowed:
			fmt.Fprintf(w, "sandbox: %s: egress refused: %s %s:%d: %s\n", prog, c.Method, c.Host, c.Port, c.Reason)
		case c.Error != "":
			fmt.Fprintf(w, "sandbox: %s: egress to %s:%d failed: %s\n", prog, c.Host, c.Port, c.Error)
		}
	}
	if res.ConnectionsDropped > 0 {
		fmt.Fprintf(w, "sandbox: %s: %d more egress attempts not reported\n", prog, res.ConnectionsDropped)
	}
}
