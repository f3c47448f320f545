//go:build linux && !amd64

package forkplan

import "syscall"

// SharesMemory says whether a Clone with Shared set gets a child that
// shares the caller's memory (on amd64), or a copy of it (elsewhere).
const SharesMemory = false

// forkShared gives the child a copy of the memory: sharing needs a clone
// that starts the child on its own stack, which only amd64 has here.
func forkShared(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	return forkAndRun(args, c)
}

// awaitShared has nothing to wait for: the child has its own memory.
func awaitShared(*childArgs, int) {}
