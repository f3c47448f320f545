//go:build !linux

package main

import (
	"errors"

	"github.com/fumehood/sandbox"
)

// The library runs nothing here, so the tool never needs a terminal of
// its own: these keep it building.

func isTerminal(int) bool { return false }

type ttySaved struct{}

func makeRaw() (*ttySaved, error) { return nil, errors.New("no terminal support on this system") }

func (*ttySaved) restore() {}

func windowSize() (rows, cols uint16) { return 0, 0 }

func relayResizes(*sandbox.Cmd) (stop func()) { return func() {} }
