// Oneshot is the smallest Go command built on the library: it makes one
// Sandbox in process, with a fresh workspace, as `sandbox run` makes its
// own, runs its arguments once and exits with their status.
//
// bench/table times it as the oneshot row. It links only the library, so
// the row is what any Go command pays for one sandboxed run (the Go
// runtime's start, the library's package inits, a first run in a new
// process, the exit), and cli/oneshot is what the command-line tool adds
// to that.
//
// Usage:
//
//	oneshot PROGRAM [ARG...]
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/fumehood/sandbox"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oneshot PROGRAM [ARG...]")
		os.Exit(2)
	}
	sb := sandbox.New(sandbox.Options{Start: sandbox.InProcess{}, Workspace: sandbox.FreshWorkspace{}})
	res, err := sb.Run(context.Background(), sandbox.Command(os.Args[1], os.Args[2:]...))
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oneshot:", err)
		os.Exit(1)
	}
}
