//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"

	"github.com/fumehood/sandbox/internal/egress"
	"golang.org/x/sys/unix"
)

// The egress proxy of an *Egress run. The init, inside the run's
// network namespace, listens on ProxyAddr and hands the listening socket
// to the caller over a channel of its own (internal/wire's proxy.go),
// then execs the program. The caller serves
// the proxy on that socket: connections are accepted inside the run's
// namespace, while the proxy dials from the caller's. So the run has one
// way out, an HTTP proxy on its own loopback, and no route, interface or
// resolver of the host's.
//
// Why a listening socket and not a forwarder (a process in the run
// relaying 127.0.0.1 to a Unix socket bound into it): the socket needs no
// process in the run that the program could see, signal or outlive, and
// no Unix socket path in its filesystem. The channel goes straight from
// the init to the caller, so with a spawner the listener never passes
// through it, and the proxy's resolver and report stay in the caller's
// process.

// runProxy is the caller's side of one run's proxy.
type runProxy struct {
	conn   *os.File // our end of the channel
	child  *os.File // the init's end, until it is passed on
	proxy  *egress.Proxy
	served chan struct{} // closed when Serve returned; nil until started

	stopped bool // stop ran; the report is below
	report  []Connection
	dropped int
}

// proxyCPUs is the CPU limit the proxy's work budget is a share of:
// Options.Limits.CPUs, and for a run without a CPU limit the host's CPUs, all of
// which it may use.
func proxyCPUs(o *resolved) float64 {
	if cpus := orDefault(o.Limits.CPUs, DefaultCPUs); cpus > 0 {
		return cpus
	}
	return float64(runtime.NumCPU())
}

func newRunProxy(rules *egress.Rules, resolver Resolver, cpus float64) (*runProxy, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress proxy channel: socketpair: %w", err)
	}
	p := &runProxy{
		conn:  os.NewFile(uintptr(fds[0]), "proxy-channel"),
		child: os.NewFile(uintptr(fds[1]), "proxy-channel-child"),
		proxy: &egress.Proxy{Rules: rules, CPUs: cpus},
	}
	if resolver != nil {
		p.proxy.Resolver = resolver
	}
	return p, nil
}

// closeChild closes our copy of the init's end once the init has it.
func (p *runProxy) closeChild() {
	if p.child != nil {
		p.child.Close()
		p.child = nil
	}
}

// start takes the listener and serves it. Called once the program runs:
// the init sent the listener before its exec, so it is waiting by now.
func (p *runProxy) start() error {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(p.conn.Fd()), buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	files := sysutil.ReceivedFiles(oob[:max(oobn, 0)])
	if err == nil && (n != 1 || buf[0] != wire.ProxyMark || len(files) != 1) {
		err = errors.New("malformed message from the init")
	}
	if err != nil {
		sysutil.CloseFiles(files)
		return &SetupError{Stage: "network", Op: "receive proxy listener", Path: ProxyAddr, Err: err}
	}
	ln, err := net.FileListener(files[0])
	files[0].Close()
	if err != nil {
		return &SetupError{Stage: "network", Op: "serve proxy listener", Path: ProxyAddr, Err: err}
	}
	p.served = make(chan struct{})
	go func() {
		// Whatever ends Serve closes the listener: a failed proxy leaves
		// the run without a way out, never with a wider one.
		p.proxy.Serve(ln)
		ln.Close()
		close(p.served)
	}()
	return nil
}

// stop ends every connection and returns the report; it also releases
// what a run that never started holds. Later calls return the same.
func (p *runProxy) stop() ([]Connection, int) {
	if !p.stopped {
		p.stopped = true
		p.closeChild()
		p.conn.Close()
		p.proxy.Close()
		if p.served != nil {
			<-p.served
		}
		p.report, p.dropped = p.proxy.Report(), p.proxy.Dropped()
	}
	return p.report, p.dropped
}
