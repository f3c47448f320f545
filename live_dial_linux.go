//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/fumehood/sandbox/internal/wire"
)

// defaultDialTimeout bounds a DialContext whose ctx has no deadline: a
// connect waits only on a listener whose backlog is full.
const defaultDialTimeout = 30 * time.Second

func (s *Sandbox) dial(ctx context.Context, network, address string) (net.Conn, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: network, Addr: dialAddr{network, address}, Err: err}
	}
	netw, addr, err := dialTarget(network, address)
	if err != nil {
		return nil, opErr(err)
	}
	l, release, err := s.live.beginCall(ctx, s)
	if err != nil {
		return nil, opErr(err)
	}
	defer release()
	timeout := defaultDialTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	se, f, err := l.sp.callFile(ctx, wire.Request{Kind: wire.Dial, Live: l.id, Network: netw, Address: addr, DialTimeout: timeout})
	if err != nil {
		return nil, opErr(l.explain(err))
	}
	if se != nil {
		var cause error = errors.New(se.Text)
		if se.Errno != 0 {
			cause = os.NewSyscallError(se.Op, syscall.Errno(se.Errno))
		}
		return nil, opErr(l.explain(fmt.Errorf("in the live sandbox: %w", cause)))
	}
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, opErr(err)
	}
	return c, nil
}

// dialTarget checks a DialContext's network and address, and returns
// them as the dialer takes them: "tcp4" or "tcp6" with an IP literal and
// port, or "unix" with an absolute path or an abstract "@name". No name is
// resolved but localhost: the sandbox has no resolver to ask.
func dialTarget(network, address string) (string, string, error) {
	switch network {
	case "unix":
		if !strings.HasPrefix(address, "/") && !strings.HasPrefix(address, "@") {
			return "", "", optionErr("address", address, "must be an absolute path inside the sandbox, or @name for an abstract socket")
		}
		return "unix", address, nil
	case "tcp", "tcp4", "tcp6":
	default:
		return "", "", optionErr("network", network, `is not one DialContext knows: "tcp", "tcp4", "tcp6" or "unix"`)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", "", optionErr("address", address, "is not host:port: %v", err)
	}
	if host == "localhost" || host == "" {
		host = "127.0.0.1"
		if network == "tcp6" {
			host = "::1"
		}
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil {
		return "", "", optionErr("address", address, "needs an IP address of the sandbox or localhost, and a numeric port (no name is resolved): %v", err)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	switch {
	case ap.Addr().Is4() && network != "tcp6":
		return "tcp4", ap.String(), nil
	case ap.Addr().Is6() && network != "tcp4":
		return "tcp6", ap.String(), nil
	}
	return "", "", optionErr("address", address, "is not an address of network %s", network)
}

// dialAddr is a DialContext's address, for its errors.
type dialAddr struct{ network, address string }

func (a dialAddr) Network() string { return a.network }
func (a dialAddr) String() string  { return a.address }
