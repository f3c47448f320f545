//go:build linux

package launch

import (
	"os"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// programSender is how a prepared init is given its program: on sock,
// the launcher's end of its sync socket, into block.
type programSender struct {
	sock  *os.File
	block *recipe.ProgramBlock
}

// send is how the prepared init of h is given its program: h.msg, the
// program as Take encoded it for the block, with the fds, in one message.
func (pp *programSender) send(h *Handle) func(p wire.Program, fds []int) error {
	return func(_ wire.Program, fds []int) error {
		return unix.Sendmsg(int(pp.sock.Fd()), h.msg, unix.UnixRights(fds...), nil, 0)
	}
}
