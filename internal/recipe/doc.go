// Package recipe is what a sandbox is, written once, and its compilation
// into the plan an init runs. Compile runs in the launcher (the spawner,
// or an InProcess caller) before the clone; the plan's steps run in the
// init, a child cloned without a Go runtime (internal/forkplan), which
// builds the sandbox with raw system calls and execs the program through
// the exec shim (internal/execshim). The caller's binary never starts for
// it.
//
// What cannot be known ahead, the plan decides from facts of the host
// (which system directories are symlinks, what /etc provides), of a
// Rootfs (its entries, its /etc), and from a model of the tree it builds;
// beneath what the model cannot see into (a host tree, the workspace),
// the child finds its way with each step's errno.
//
// The init is pid 1 of the new namespaces and execs the program in its
// own place, so the program is pid 1: its exit makes the kernel kill
// everything else in the namespace at once, and nothing of the launcher
// stays in the sandbox beside it. The cost: a signal the program sends
// itself without a handler is ignored, as for any pid 1 (a terminal's
// Ctrl-C is handled for it by the caller), and orphans are reaped only
// when it exits.
//
// The files, in the order the plan runs:
//
//   - recipe_linux.go, etc.go, namespaces_linux.go: the tables (system
//     directories, /dev, /proc masks, /etc, rlimits, namespaces,
//     capabilities)
//   - hostfacts_linux.go: what a plan takes from the host, read once
//   - plan_linux.go: Compile, the planner, and the child's fds
//   - plan_identity_linux.go: the go-ahead, ids and capabilities
//   - plan_root_linux.go, plan_tree_linux.go, plan_rootfs_linux.go: the
//     new root, its mounts and the model of its tree
//   - plan_etc_linux.go, plan_proc_linux.go, plan_dev_linux.go: /etc (with
//     the trust store), /proc, /dev
//   - plan_process_linux.go, plan_proxy_linux.go, plan_terminal_linux.go,
//     plan_filter_linux.go: hostname, loopback, the egress proxy's
//     listener, rlimits, signals, the working directory, the terminal,
//     the seccomp filter
//   - plan_program_linux.go, program_block_linux.go: how a prepared init
//     waits for its program
//   - plan_exec_linux.go, plan_shim_linux.go, shim_linux.go: the execve,
//     through the exec shim
package recipe
