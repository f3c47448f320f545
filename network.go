package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/fumehood/sandbox/internal/egress"
	"github.com/fumehood/sandbox/internal/report"
)

// Network says what a run can reach over the network. Every mode but
// NetworkHostUnsafe gives the run a network namespace of its own.
type Network int

const (
	// NetworkNone, the default: the run's namespace holds only loopback,
	// up, so programs of one run can talk to each other on 127.0.0.1.
	// Nothing leaves the namespace and there is no name resolution beyond
	// /etc/hosts.
	NetworkNone Network = iota

	// NetworkAllow adds one way out: an HTTP proxy at ProxyAddr inside
	// the run, served by the process that called Run, which reaches only
	// the hosts Options.Egress allows. CONNECT carries TLS untouched
	// (but to the hosts of Options.Secrets, see Secret); plain http://
	// requests are forwarded. The run still has no DNS: the
	// proxy resolves a name once the allowlist allowed it, and refuses
	// loopback, private, link-local (the cloud metadata service) and the
	// other special ranges on the resolved address unless a rule names
	// that range, and every address on the caller's own interfaces
	// unless a rule names exactly that address. The proxy's CPU time for
	// a run is budgeted: 0.5 s (egress.CPUBurst), then 10% (egress.CPUShare)
	// of the run's CPU limit, Options.CPUs, or of the host's CPU count for
	// a run without one; past the burst the proxy reads from the run only
	// as fast as that allows. HTTP_PROXY, HTTPS_PROXY, http_proxy,
	// https_proxy and NO_PROXY point the program at it, unless Options.Env
	// or Cmd.Env set them. Result.Connections reports every attempt, and every
	// connection that sent no request.
	//
	// Whatever the run sends, its proxy makes the caller hold at most
	// about 9 MiB of memory (64 connections at once, each at most 96 KiB
	// besides 2 MiB of shared read buffers, and a report of at most 1,000
	// attempts of at most about 1 KiB each) and 129 descriptors (two per
	// connection and the listener). Request and response headers are
	// limited to 32 KiB and 128 fields (431 or 502 otherwise), and a
	// connection must send its first request within 30 seconds.
	NetworkAllow

	// NetworkHostUnsafe shares the host's network namespace: the program
	// reaches everything the host does, its loopback services and the
	// cloud metadata service included, and can listen on the host's
	// addresses. The host's /etc/resolv.conf is provided. Only for code
	// you trust.
	NetworkHostUnsafe
)

// ProxyAddr is where the egress proxy of a NetworkAllow run listens, inside
// the run's own network namespace.
const ProxyAddr = "127.0.0.1:3128"

// proxyPort is ProxyAddr's port.
const proxyPort = 3128

// noProxy is NO_PROXY for NetworkAllow: loopback stays inside the run.
const noProxy = "localhost,127.0.0.1,::1"

// String returns the mode's name as the command-line tool spells it:
// "none", "allow" or "host".
func (n Network) String() string {
	switch n {
	case NetworkNone:
		return "none"
	case NetworkAllow:
		return "allow"
	case NetworkHostUnsafe:
		return "host"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Resolver looks up the addresses of a host name for the egress proxy;
// *net.Resolver is one. It is asked only for names the allowlist allows,
// rooted (with a trailing dot).
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Connection is one attempt of a NetworkAllow run to reach a host through
// the egress proxy: one CONNECT, or one plain HTTP request, or a
// connection to it that sent no request. It is the proxy's own record,
// handed on as it is; its fields say what each holds.
type Connection = report.Connection

// checkNetwork validates the network fields and parses the allowlist.
func (o *Options) checkNetwork() (*egress.Rules, error) {
	switch o.Network {
	case NetworkNone, NetworkHostUnsafe:
		if len(o.Egress) > 0 {
			return nil, optionErr("Options.Egress", fmt.Sprint(o.Egress), "is only used with Network: NetworkAllow (Network is %s)", o.Network)
		}
		if o.EgressResolver != nil {
			return nil, optionErr("Options.EgressResolver", "set", "is only used with Network: NetworkAllow (Network is %s)", o.Network)
		}
		return nil, nil
	case NetworkAllow:
		rules, err := egress.ParseRules(o.Egress)
		if err != nil {
			oe := &OptionError{Option: "Options.Egress", Value: fmt.Sprint(o.Egress), Reason: err.Error()}
			var re *egress.RuleError
			if errors.As(err, &re) {
				if re.Index >= 0 {
					oe.Option, oe.Value = fmt.Sprintf("Options.Egress[%d]", re.Index), re.Entry
				}
				oe.Reason = re.Reason
			}
			return nil, oe
		}
		return rules, nil
	}
	return nil, optionErr("Options.Network", fmt.Sprint(int(o.Network)), "must be NetworkNone, NetworkAllow or NetworkHostUnsafe")
}

// proxyEnv is what points a NetworkAllow program at the proxy.
func proxyEnv() []string {
	u := "http://" + ProxyAddr
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy}
}
