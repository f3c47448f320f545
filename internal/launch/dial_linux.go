//go:build linux

package launch

import (
	"net/netip"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/sysutil"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// Dial connects to address on network ("tcp4", "tcp6": an IP literal and
// port; "unix": a socket's path inside the sandbox) from inside the live
// sandbox of target, through a dialer (recipe.CompileDial), and returns
// the connected socket. Nothing is opened on the host's network.
func Dial(target *Handle, network, address string, timeout time.Duration) (*os.File, *wire.SetupError) {
	fail := func(op string, err error) (*os.File, *wire.SetupError) {
		return nil, &wire.SetupError{Stage: "dial", Op: op, Path: address, Errno: sysutil.ErrnoOf(err), Text: err.Error()}
	}
	if target == nil || target.live == nil {
		return fail("find the live sandbox", unix.ESRCH)
	}
	domain, addr, flags, err := sockaddrOf(network, address, target.live.hostNetwork)
	if err != nil {
		return fail("address", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("socketpair", err)
	}
	parent, child := os.NewFile(uintptr(pair[0]), "dial-parent"), os.NewFile(uintptr(pair[1]), "dial-child")
	defer parent.Close()
	defer child.Close()
	li := target.live
	li.mu.RLock()
	if li.pidfd < 0 {
		li.mu.RUnlock()
		return fail("find the live sandbox", unix.ESRCH)
	}
	plan, se := recipe.CompileDial(int(child.Fd()), li.pidfd, flags, domain, addr, unix.NsecToTimeval(timeout.Nanoseconds()), network+" "+address)
	if se != nil {
		li.mu.RUnlock()
		return nil, se
	}
	pid, err := plan.Start(forkplan.Clone{CgroupFD: -1})
	li.mu.RUnlock()
	if err != nil {
		return fail("clone", err)
	}
	child.Close()
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(parent.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return fail("read the dialer's report", err)
	}
	files := sysutil.ReceivedFiles(oob[:oobn])
	if n == 1 && buf[0] == wire.DialMark && len(files) == 1 {
		return files[0], nil
	}
	sysutil.CloseFiles(files)
	f, perr := plan.ParseFailure(buf[:n])
	if perr != nil {
		return fail("read the dialer's report", perr)
	}
	return nil, &wire.SetupError{Stage: f.Where.Stage, Op: f.Where.Op, Path: f.Where.Path, Errno: int(f.Errno)}
}

// sockaddrOf is the socket domain and struct sockaddr of address on
// network, and the namespaces of the sandbox a dialer joins to reach it.
func sockaddrOf(network, address string, hostNetwork bool) (int, []byte, uintptr, error) {
	var netns uintptr = unix.CLONE_NEWUSER | unix.CLONE_NEWNET
	if hostNetwork {
		netns = 0
	}
	switch network {
	case "unix":
		var sa unix.RawSockaddrUnix
		if len(address) == 0 || len(address) >= len(sa.Path) {
			return 0, nil, 0, unix.EINVAL
		}
		sa.Family = unix.AF_UNIX
		for i := range len(address) {
			sa.Path[i] = int8(address[i])
		}
		size := int(unsafe.Offsetof(sa.Path)) + len(address) + 1
		flags := unix.CLONE_NEWUSER | unix.CLONE_NEWNS | netns
		if address[0] == '@' {
			// Abstract: a name in the network namespace, no NUL.
			sa.Path[0] = 0
			size--
			flags = netns
		}
		return unix.AF_UNIX, unsafe.Slice((*byte)(unsafe.Pointer(&sa)), size), uintptr(flags), nil
	case "tcp4", "tcp6":
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return 0, nil, 0, unix.EINVAL
		}
		port := [2]byte{byte(ap.Port() >> 8), byte(ap.Port())}
		if network == "tcp4" && ap.Addr().Is4() {
			sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
			sa.Port = *(*uint16)(unsafe.Pointer(&port))
			return unix.AF_INET, unsafe.Slice((*byte)(unsafe.Pointer(&sa)), unsafe.Sizeof(sa)), netns, nil
		}
		if network == "tcp6" && ap.Addr().Is6() {
			sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
			sa.Port = *(*uint16)(unsafe.Pointer(&port))
			if z := ap.Addr().Zone(); z != "" {
				id, _ := strconv.Atoi(z)
				sa.Scope_id = uint32(id)
			}
			return unix.AF_INET6, unsafe.Slice((*byte)(unsafe.Pointer(&sa)), unsafe.Sizeof(sa)), netns, nil
		}
	}
	return 0, nil, 0, unix.EINVAL
}
