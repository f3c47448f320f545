//go:build linux && (!amd64 || forkplan_copy)

package forkplan

import "syscall"

// SharesMemory says whether a Clone with Shared set gets a child that
// shares the caller's memory (on amd64), or a copy of it (elsewhere, and
// built with the tag forkplan_copy).
const SharesMemory = false

// forkShared gives the child a copy of the memory: sharing needs a clone
// that starts the child on its own stack, which only amd64 has here, and
// a vfork wait the runtime knows of (shared_linux_amd64.go).
func forkShared(args *cloneArgs, c *childArgs) (uintptr, syscall.Errno) {
	return forkAndRun(args, c)
}
