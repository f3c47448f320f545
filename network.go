package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/fumehood/sandbox/internal/egress"
	"github.com/fumehood/sandbox/internal/report"
)

// Network is what a run can reach over the network, Options.Network:
// *Egress or HostNetworkUnsafe. Only those implement it. Nil, the default,
// gives the run a network namespace holding only loopback, up, so programs
// of one run can talk to each other on 127.0.0.1. Nothing leaves the
// namespace and there is no name resolution beyond /etc/hosts.
type Network interface{ isNetwork() }

// Egress adds one way out of the run's own network namespace: an HTTP
// proxy at ProxyAddr inside the run, served by the process that called
// Run, which reaches only the hosts Allow allows. CONNECT carries TLS
// untouched (but to the hosts of Secrets, see Secret); plain http://
// requests are forwarded. The run still has no DNS: the proxy resolves a
// name once the allowlist allowed it, and refuses loopback, private,
// link-local (the cloud metadata service) and the other special ranges on
// the resolved address unless a rule names that range, and every address
// on the caller's own interfaces unless a rule names exactly that address.
// The proxy's CPU time for a run is budgeted: 0.5 s (egress.CPUBurst), then
// 10% (egress.CPUShare) of the run's CPU limit, Limits.CPUs, or of the
// host's CPU count for a run without one; past the burst the proxy reads
// from the run only as fast as that allows. HTTP_PROXY, HTTPS_PROXY,
// http_proxy, https_proxy and NO_PROXY point the program at it, unless
// Options.Env or Cmd.Env set them. Result.Connections reports every
// attempt, and every connection that sent no request.
//
// Whatever the run sends, its proxy makes the caller hold at most about 9
// MiB of memory (64 connections at once, each at most 96 KiB besides 2 MiB
// of shared read buffers, and a report of at most 1,000 attempts of at
// most about 1 KiB each) and 129 descriptors (two per connection and the
// listener). Request and response headers are limited to 32 KiB and 128
// fields (431 or 502 otherwise), and a connection must send its first
// request within 30 seconds.
type Egress struct {
	// Allow is the allowlist, one entry a host; New refuses it empty:
	//
	//	"pypi.org"                an exact name, on ports 80 and 443
	//	"*.pythonhosted.org"      names under the suffix (not the suffix itself)
	//	"api.example.com:8443"    one port; "example.com:8000-8100" a range
	//	"10.1.2.0/24:5432"        an IP range: literal addresses in it, and,
	//	                          for names too, the opening of a refused range
	//	"[fd00::/8]:443"          an IPv6 range with a port
	//
	// Names resolving into loopback, private, link-local (169.254.169.254,
	// the metadata service), unique-local, multicast and the other special
	// ranges are refused unless a range entry lies inside that range; the
	// metadata address itself opens only with an entry for exactly it. An
	// entry allows one port or range; list a host twice for two.
	Allow []string
	// Resolver resolves the names Allow allows; nil means
	// net.DefaultResolver. Tests point it at their own servers.
	Resolver Resolver
	// Secrets are values the program never holds (see Secret and
	// "Secrets" in the package documentation): its environment holds a
	// placeholder for each, and the proxy puts the value in the headers
	// of requests to the secret's Hosts, terminating HTTPS to them with a
	// certificate authority made for the Sandbox, which the trust store
	// includes. Every host must be allowed by Allow. Nil means none.
	Secrets []Secret
}

// HostNetworkUnsafe shares the host's network namespace: the program
// reaches everything the host does, its loopback services and the cloud
// metadata service included, and can listen on the host's addresses. The
// host's /etc/resolv.conf is provided. Only for code you trust.
type HostNetworkUnsafe struct{}

func (*Egress) isNetwork()           {}
func (HostNetworkUnsafe) isNetwork() {}

// netMode is the network of a resolved Options.
type netMode int

const (
	netNone netMode = iota
	netAllow
	netHost
)

// String returns the mode's name as the command-line tool and the audit
// trail spell it: "none", "allow" or "host".
func (n netMode) String() string {
	switch n {
	case netAllow:
		return "allow"
	case netHost:
		return "host"
	}
	return "none"
}

// ProxyAddr is where the egress proxy of an *Egress run listens, inside
// the run's own network namespace.
const ProxyAddr = "127.0.0.1:3128"

// proxyPort is ProxyAddr's port.
const proxyPort = 3128

// noProxy is NO_PROXY for an *Egress run: loopback stays inside the run.
const noProxy = "localhost,127.0.0.1,::1"

// Resolver looks up the addresses of a host name for the egress proxy;
// *net.Resolver is one. It is asked only for names the allowlist allows,
// rooted (with a trailing dot).
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Connection is one attempt of an *Egress run to reach a host through
// the egress proxy: one CONNECT, or one plain HTTP request, or a
// connection to it that sent no request. It is the proxy's own record,
// handed on as it is; its fields say what each holds.
type Connection = report.Connection

// checkNetwork parses an *Egress's allowlist; nil without one.
func (o *resolved) checkNetwork() (*egress.Rules, error) {
	if o.Network != netAllow {
		return nil, nil
	}
	rules, err := egress.ParseRules(o.Egress)
	if err != nil {
		oe := &OptionError{Option: "Options.Network (Egress.Allow)", Value: fmt.Sprint(o.Egress), Reason: err.Error()}
		var re *egress.RuleError
		if errors.As(err, &re) {
			if re.Index >= 0 {
				oe.Option, oe.Value = fmt.Sprintf("Options.Network (Egress.Allow[%d])", re.Index), re.Entry
			}
			oe.Reason = re.Reason
		}
		return nil, oe
	}
	return rules, nil
}

// proxyEnv is what points an *Egress program at the proxy.
func proxyEnv() []string {
	u := "http://" + ProxyAddr
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy}
}
