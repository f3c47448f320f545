//go:build linux

// Command containerd makes, reads and removes one run's cgroup with the containerd
// driver (an optional argument names a pid to place in it first), for the
// size and package-init comparison.
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/fumehood/sandbox/bench/cgroupdrivers/containerd"
	"github.com/fumehood/sandbox/bench/cgroupdrivers/driver"
)

func main() {
	pid := 0
	if len(os.Args) > 1 {
		pid, _ = strconv.Atoi(os.Args[1])
	}
	u, err := driver.Exercise(containerd.Driver{}, pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%+v\n", u)
}
