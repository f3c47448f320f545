package validate

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The Kubernetes test's network: every address lives in network
// namespaces the test makes and deletes, none in the host's. The control
// plane's namespace holds a bridge, the fabric; each node's namespace is
// joined to it by a veth made inside the control plane's namespace, with
// its peer moved straight into the node's, so no device is ever made in
// the host's namespace. Each node's pods get a /24 of podNet, routed
// through the fabric to that node.
const (
	fabricNet     = "10.250.0"     // .1 the control plane, .1N node N
	podNet        = "10.251"       // node N's pods: 10.251.N.0/24
	serviceSubnet = "10.96.0.0/16" // ClusterIPs, which kube-proxy gives in each node
)

// fabric is the test's set of network namespaces: the control plane's
// and one per node, named after this process so that runs on one machine
// do not meet.
type fabric struct {
	cp    string   // the control plane's namespace
	nodes []string // the nodes' namespaces, node N at N-1
}

// nodeIP is the fabric address of node n (from 1).
func nodeIP(n int) string { return fmt.Sprintf("%s.%d", fabricNet, 10+n) }

// cpIP is the control plane's fabric address.
const cpIP = fabricNet + ".1"

// podCIDR is the pod range of node n (from 1).
func podCIDR(n int) string { return fmt.Sprintf("%s.%d.0/24", podNet, n) }

// newFabric makes the control plane's namespace and nodes namespaces for
// nodes, wired and routed, and deletes them at the test's end. It skips
// the test where the machine cannot: not root, or no ip (iproute2).
func newFabric(t *testing.T, nodes int) *fabric {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("the Kubernetes test's network namespaces need root, and this runs as uid %d", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (Debian's iproute2) is missing: it makes the test's network namespaces")
	}
	prefix := fmt.Sprintf("k8stest-%d", os.Getpid())
	f := &fabric{cp: prefix + "-cp"}
	t.Cleanup(func() { f.delete(t) })
	ipOK(t, "netns", "add", f.cp)
	ipOK(t, "-n", f.cp, "link", "set", "lo", "up")
	ipOK(t, "-n", f.cp, "link", "add", "br0", "type", "bridge")
	ipOK(t, "-n", f.cp, "addr", "add", cpIP+"/24", "dev", "br0")
	ipOK(t, "-n", f.cp, "link", "set", "br0", "up")
	nsOK(t, f.cp, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	for n := 1; n <= nodes; n++ {
		ns := fmt.Sprintf("%s-n%d", prefix, n)
		f.nodes = append(f.nodes, ns)
		ipOK(t, "netns", "add", ns)
		ipOK(t, "-n", ns, "link", "set", "lo", "up")
		port := fmt.Sprintf("n%d", n)
		ipOK(t, "-n", f.cp, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
		ipOK(t, "-n", f.cp, "link", "set", port, "master", "br0", "up")
		ipOK(t, "-n", ns, "addr", "add", nodeIP(n)+"/24", "dev", "eth0")
		ipOK(t, "-n", ns, "link", "set", "eth0", "up")
		ipOK(t, "-n", ns, "route", "add", "default", "via", cpIP)
		nsOK(t, ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
		// The other nodes' pods are reached through their node.
		ipOK(t, "-n", f.cp, "route", "add", podCIDR(n), "via", nodeIP(n))
	}
	return f
}

// delete deletes the namespaces, and with them every device and route
// in them; it fails the test if one is left.
func (f *fabric) delete(t *testing.T) {
	for _, ns := range append([]string{f.cp}, f.nodes...) {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if name == f.cp || strings.HasPrefix(name, strings.TrimSuffix(f.cp, "-cp")+"-n") {
			t.Errorf("network namespace %s is left after the test", name)
		}
	}
}

// ipOK runs ip with args and fails the test if it fails.
func ipOK(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// nsOK runs argv in the network namespace ns and fails the test if it
// fails.
func nsOK(t *testing.T, ns string, argv ...string) string {
	t.Helper()
	out, err := inNetns(ns, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %s: %v\n%s", ns, strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// inNetns is argv run in the network namespace ns (by ip netns exec,
// which execs it: the command's pid is the program's).
func inNetns(ns string, argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
}

// inNamespace runs f on a thread in the network namespace ns, so that
// the sockets f makes are ns's and stay so. The thread goes back to the
// host's namespace after; if it cannot, it is left locked, and so ends
// with the goroutine instead of serving another.
func inNamespace(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		err = f()
		if setns(self) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// dialer connects from inside the network namespace ns: for an
// http.Transport's DialContext, or a client's.
func dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNamespace(ns, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// listen listens on addr inside the network namespace ns.
func listen(ns, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNamespace(ns, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// TestFabric: the nodes reach each other and the control plane through
// the fabric, a node's pod range is routed to it, and nothing of the
// test's network is left in the host's namespace list afterwards.
func TestFabric(t *testing.T) {
	f := newFabric(t, 2)
	// An address of node 2's pods, given to node 2's loopback, is
	// reached from node 1 through the control plane's routes.
	pod := podNet + ".2.7"
	ipOK(t, "-n", f.nodes[1], "addr", "add", pod+"/32", "dev", "lo")
	for _, c := range []struct{ from, to, addr string }{
		{f.nodes[0], f.nodes[1], nodeIP(2) + ":7001"},
		{f.nodes[1], f.cp, cpIP + ":7002"},
		{f.nodes[0], f.nodes[1], pod + ":7003"},
	} {
		l, err := listen(c.to, c.addr)
		if err != nil {
			t.Fatalf("listen on %s in %s: %v", c.addr, c.to, err)
		}
		go func() {
			if conn, err := l.Accept(); err == nil {
				conn.Write([]byte("hi from " + c.to))
				conn.Close()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := dialer(c.from)(ctx, "tcp", c.addr)
		cancel()
		if err != nil {
			t.Errorf("from %s, dial %s: %v", c.from, c.addr, err)
			l.Close()
			continue
		}
		got, _ := io.ReadAll(conn)
		conn.Close()
		l.Close()
		if string(got) != "hi from "+c.to {
			t.Errorf("from %s, %s said %q, want %q", c.from, c.addr, got, "hi from "+c.to)
		}
	}
	// The host's namespace cannot reach the fabric: none of its
	// addresses is the host's, and no route leads there.
	if out, _ := exec.Command("ip", "-4", "addr").Output(); strings.Contains(string(out), fabricNet+".") {
		t.Errorf("a fabric address is in the host's network namespace:\n%s", out)
	}
	// This machine may answer a connection to any address it routes out
	// (a proxy in front of the outside world), so the check is that the
	// fabric's own listener is not what answers.
	l, err := listen(f.cp, cpIP+":7004")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("the fabric"))
			conn.Close()
		}
	}()
	if c, err := net.DialTimeout("tcp", cpIP+":7004", time.Second); err == nil {
		c.SetReadDeadline(time.Now().Add(time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) == "the fabric" {
			t.Errorf("the host's namespace reached the control plane's listener at %s:7004", cpIP)
		}
	}
}
