//go:build linux

package launch

import (
	"os"

	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// plannedProgram is how a prepared planned init is given its program: on
// sock, the launcher's end of its sync socket, into block.
type plannedProgram struct {
	sock  *os.File
	block *recipe.ProgramBlock
}

// send is how the prepared planned init of h is given its program: h.msg,
// the program as the pool's take encoded it for the block before it sent
// it on h.program, with the fds, in one message.
func (pp *plannedProgram) send(h *Handle) func(p wire.Program, fds []int) error {
	return func(_ wire.Program, fds []int) error {
		return unix.Sendmsg(int(pp.sock.Fd()), h.msg, unix.UnixRights(fds...), nil, 0)
	}
}
