//go:build linux

package recipe

import (
	"github.com/fumehood/sandbox/internal/forkplan"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// terminal adds the program's terminal: a pty of the sandbox's devpts
// as the program's 0, 1, 2 and controlling terminal, its master sent to
// the launcher.
func (b *planner) terminal() {
	ws := b.cfg.Terminal
	if ws == nil {
		return
	}
	w := func(op string) forkplan.Where { return forkplan.Where{Stage: "terminal", Op: op, Path: ptmxPath} }
	m, p := b.slot(), b.slot()
	b.call(w("open"), unix.SYS_OPENAT, forkplan.Val(unix.AT_FDCWD), forkplan.Str(ptmxPath),
		forkplan.Val(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)).Save(m)
	b.call(w("ioctl TIOCSPTLCK"), unix.SYS_IOCTL, forkplan.In(m), forkplan.Val(unix.TIOCSPTLCK), forkplan.Ptr(new(int32)))
	b.call(w("ioctl TIOCSWINSZ"), unix.SYS_IOCTL, forkplan.In(m), forkplan.Val(unix.TIOCSWINSZ),
		forkplan.Ptr(&unix.Winsize{Row: ws.Rows, Col: ws.Cols}))
	b.call(w("ioctl TIOCGPTPEER"), unix.SYS_IOCTL, forkplan.In(m), forkplan.Val(unix.TIOCGPTPEER),
		forkplan.Val(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)).Save(p)
	b.call(w("ioctl TIOCSCTTY"), unix.SYS_IOCTL, forkplan.In(p), forkplan.Val(unix.TIOCSCTTY), forkplan.Val(0))
	for fd := range 3 {
		b.call(w("dup3"), unix.SYS_DUP3, forkplan.In(p), forkplan.Val(fd), forkplan.Val(0))
	}
	b.close(p)
	b.sendMarked(w("send master"), planConnFd, wire.TerminalMark, m)
	b.close(m)
}
