//go:build linux

package attack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// network tries to reach the host and beyond from a run without network:
// the host's loopback services (a database or a Docker API bound to
// 127.0.0.1 is reachable from a container that shares the host's network
// namespace), abstract Unix sockets (per network namespace: CVE-2020-15257,
// containerd-shim's abstract socket reached from host-network containers),
// a Unix socket on the host's disk, the cloud metadata service, the
// host's other addresses, raw and packet sockets (CVE-2020-14386, an
// AF_PACKET overflow to root), netlink families beyond NETLINK_ROUTE, and
// changing the network namespace's interfaces, addresses and routes.
//
// args are the host's listeners as kind=address: tcp=, udp=, unix= (an
// abstract "@name" or a path). The host counts what reaches them.
func network(r *Report, args []string) {
	for _, arg := range args {
		kind, addr, _ := strings.Cut(arg, "=")
		switch kind {
		case "tcp":
			r.Try("connect tcp "+addr, dial("tcp", addr))
		case "udp":
			r.Try("udp exchange with "+addr, udpExchange(addr))
		case "unix":
			r.Try("connect unix "+addr, dial("unix", addr))
			if strings.HasPrefix(addr, "/") {
				r.Try("connect unix /proc/1/root"+addr, dial("unix", "/proc/1/root"+addr))
			}
		default:
			r.See("bad arg "+arg, "want kind=address")
		}
	}
	for _, addr := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "1.1.1.1:443", "10.0.2.2:22", "172.17.0.1:2375"} {
		r.Try("connect tcp "+addr, dial("tcp", addr))
	}
	r.Try("udp exchange with 8.8.8.8:53", udpExchange("8.8.8.8:53"))
	learned(r)
	sockets(r)
	r.Try("ioctl SIOCSIFFLAGS lo down", ifDown("lo"))
	routes(r)
}

// learned reads what the namespace says of addresses and gateways, and
// connects to each non-loopback one it finds.
func learned(r *Report) {
	var found []string
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) > 2 && f[2] != "00000000" {
				found = append(found, hexIPv4(f[2]))
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				found = append(found, n.IP.String())
			}
		}
	}
	r.See("learned addresses", "%s", strings.Join(found, " "))
	for _, ip := range found {
		r.Try("connect tcp learned "+ip+":22", dial("tcp", net.JoinHostPort(ip, "22")))
	}
}

// hexIPv4 turns /proc/net/route's little-endian hex into dotted form.
func hexIPv4(h string) string {
	var v uint32
	fmt.Sscanf(h, "%x", &v)
	return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String()
}

// sockets opens the sockets a breakout starts from: raw and packet sockets
// and the netlink families the policy leaves out.
func sockets(r *Report) {
	for _, s := range []struct {
		what                    string
		domain, typ, proto, htn int
	}{
		{"socket AF_INET SOCK_RAW ICMP", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP, 0},
		{"socket AF_INET SOCK_RAW IPPROTO_RAW", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW, 0},
		{"socket AF_INET6 SOCK_RAW ICMPV6", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6, 0},
		{"socket AF_PACKET SOCK_RAW", unix.AF_PACKET, unix.SOCK_RAW, 0, unix.ETH_P_ALL},
		{"socket AF_PACKET SOCK_DGRAM", unix.AF_PACKET, unix.SOCK_DGRAM, 0, unix.ETH_P_IP},
		{"socket AF_VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM, 0, 0},
		{"socket netlink NETFILTER", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER, 0},
		{"socket netlink XFRM", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_XFRM, 0},
		{"socket netlink AUDIT", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT, 0},
		{"socket netlink KOBJECT_UEVENT", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT, 0},
		{"socket netlink SOCK_DIAG", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG, 0},
		{"socket netlink GENERIC", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC, 0},
		{"socket netlink CONNECTOR", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_CONNECTOR, 0},
	} {
		proto := s.proto
		if s.htn != 0 {
			proto = int(htons(uint16(s.htn)))
		}
		fd, err := unix.Socket(s.domain, s.typ|unix.SOCK_CLOEXEC, proto)
		if r.Try(s.what, err) {
			unix.Close(fd)
		}
	}
}

// routes asks NETLINK_ROUTE, which the policy allows for reading, to
// change the namespace: a new interface, lo down, an address, a default
// route. Each needs CAP_NET_ADMIN over the network namespace.
func routes(r *Report) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		r.See("netlink route socket", "%v", err)
		return
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		r.See("netlink route bind", "%v", err)
		return
	}
	create := unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL
	// struct ifinfomsg: family, pad, type, index, flags, change.
	ifinfo := func(index int32, flags, change uint32) []byte {
		b := make([]byte, 16)
		binary.NativeEndian.PutUint32(b[4:], uint32(index))
		binary.NativeEndian.PutUint32(b[8:], flags)
		binary.NativeEndian.PutUint32(b[12:], change)
		return b
	}
	dummy := append(ifinfo(0, 0, 0), attr(unix.IFLA_IFNAME, []byte("sbxtest0\x00"))...)
	dummy = append(dummy, attr(unix.IFLA_LINKINFO, attr(unix.IFLA_INFO_KIND, []byte("dummy\x00")))...)
	r.Try("RTM_NEWLINK add a dummy interface", nlAsk(fd, unix.RTM_NEWLINK, create, dummy))
	r.Try("RTM_NEWLINK set lo down", nlAsk(fd, unix.RTM_NEWLINK, unix.NLM_F_REQUEST|unix.NLM_F_ACK, ifinfo(1, 0, unix.IFF_UP)))
	// struct ifaddrmsg: family, prefixlen, flags, scope, index.
	addr := []byte{unix.AF_INET, 24, 0, 0, 1, 0, 0, 0}
	addr = append(addr, attr(unix.IFA_LOCAL, []byte{10, 99, 0, 1})...)
	addr = append(addr, attr(unix.IFA_ADDRESS, []byte{10, 99, 0, 1})...)
	r.Try("RTM_NEWADDR add 10.99.0.1/24 to lo", nlAsk(fd, unix.RTM_NEWADDR, create, addr))
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope,
	// type, flags; a default route out of lo.
	route := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_LINK, unix.RTN_UNICAST, 0, 0, 0, 0}
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, 1)
	route = append(route, attr(unix.RTA_OIF, oif)...)
	r.Try("RTM_NEWROUTE add a default route", nlAsk(fd, unix.RTM_NEWROUTE, create, route))
}

// attr is one netlink attribute, padded to 4 bytes.
func attr(typ int, data []byte) []byte {
	n := 4 + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], uint16(typ))
	copy(b[4:], data)
	return b
}

// nlAsk sends one netlink request and returns the kernel's answer from its
// acknowledgement: nil when the request was carried out.
func nlAsk(fd, typ, flags int, body []byte) error {
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], uint16(typ))
	binary.NativeEndian.PutUint16(msg[6:], uint16(flags))
	binary.NativeEndian.PutUint32(msg[8:], uint32(typ)) // sequence number
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq != uint32(typ) || len(m.Data) < 4 {
				continue
			}
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return unix.Errno(-e)
			}
			return nil
		}
	}
}

// ifDown clears IFF_UP on interface name with the classic ioctl.
func ifDown(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() &^ unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dial connects and hangs up at once.
func dial(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// udpExchange sends a datagram to addr and waits briefly for an answer:
// the send alone succeeds into the run's own loopback, where nothing
// listens, so only a reply proves the host was reached.
func udpExchange(addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("empty reply")
	}
	return nil
}

// htons is the network byte order of v, for AF_PACKET's protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

func init() { register("net", network) }
