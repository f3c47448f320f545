//go:build linux

// Command empty is the size comparison's baseline: a program that imports
// only golang.org/x/sys/unix, which every driver uses.
package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func main() { fmt.Println(unix.Getpid()) }
