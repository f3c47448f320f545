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
	mode   sandbox.Network
	egress []string
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
		*f = netFlag{value: v, mode: sandbox.NetworkNone}
	case v == "host":
		*f = netFlag{value: v, mode: sandbox.NetworkHostUnsafe}
	case v == "allow":
		return fmt.Errorf(`"allow" needs its list: allow:HOST[,HOST...], e.g. allow:pypi.org,files.pythonhosted.org`)
	case isAllow:
		// Entries are checked by the library, which names the wrong one.
		*f = netFlag{value: v, mode: sandbox.NetworkAllow, egress: strings.Split(list, ",")}
	default:
		return fmt.Errorf(`must be "none", "allow:HOST[,HOST...]" or "host"`)
	}
	return nil
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
