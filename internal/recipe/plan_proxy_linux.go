//go:build linux

package recipe

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// proxyListener adds the steps that listen on 127.0.0.1:ProxyPort in the
// run's network namespace and send the socket to the caller over the
// proxy channel (planProxyFd). The init keeps no copy, nor the channel.
func (b *planner) proxyListener() {
	addr := fmt.Sprintf("127.0.0.1:%d", b.cfg.ProxyPort)
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "network", Op: op, Path: addr} }
	fd := b.slot()
	b.call(w("proxy socket"), unix.SYS_SOCKET, forkplan.Val(unix.AF_INET), forkplan.Val(unix.SOCK_STREAM|unix.SOCK_CLOEXEC), forkplan.Val(0)).Save(fd)
	sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], uint16(b.cfg.ProxyPort))
	b.call(w("bind proxy listener"), unix.SYS_BIND, forkplan.In(fd), forkplan.Ptr(sa), forkplan.Val(unix.SizeofSockaddrInet4))
	b.call(w("listen for the proxy"), unix.SYS_LISTEN, forkplan.In(fd), forkplan.Val(unix.SOMAXCONN))
	b.sendMarked(w("hand over proxy listener"), planProxyFd, wire.ProxyMark, fd)
	b.close(fd)
	b.call(w("close"), unix.SYS_CLOSE, forkplan.Val(planProxyFd))
}
