//go:build linux

package recipe

import "golang.org/x/sys/unix"

// cloneFlags are the namespaces every sandbox gets.
const cloneFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWNET |

	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// initCaps are the capabilities, inside the new user namespace only, that
// the init keeps to build the sandbox: mounts, pivot_root and hostname
// (SYS_ADMIN), loopback (NET_ADMIN), and emptying the bounding set
// (SETPCAP). It drops them all before it execs the program.
var initCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP}

// CloneFlags is the namespaces of a sandbox: all of cloneFlags, but
// the network namespace where the run takes the host's network.
func CloneFlags(hostNetwork bool) uintptr {
	flags := uintptr(cloneFlags)
	if hostNetwork {
		flags &^= unix.CLONE_NEWNET
	}
	return flags
}
