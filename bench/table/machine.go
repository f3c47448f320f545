package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// printMachine prints what the figures were taken on and what each row
// runs.
func printMachine(bwrapArgv []string, limitsNote string) {
	var uts unix.Utsname
	kernel := "unknown"
	if unix.Uname(&uts) == nil {
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	version := "unknown"
	if out, err := exec.Command(bwrapArgv[0], "--version").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	uid := fmt.Sprint(os.Getuid())
	if u, err := user.LookupId(uid); err == nil {
		uid += " (" + u.Username + ")"
	}
	fmt.Printf("machine: kernel %s, %d CPUs, %s, uid %s, %s\n", kernel, runtime.NumCPU(), version, uid, runtime.Version())
	fmt.Println(limitsNote)
	fmt.Println()
	fmt.Println("rows:")
	fmt.Println("  floor  fork+exec+wait of /bin/true from Go (os/exec), no isolation")
	fmt.Println("  bwrap  " + strings.Join(bwrapArgv, " "))
	fmt.Println("         (the sandbox's namespaces and mounts; no cgroup, no seccomp)")
	fmt.Println("  cold   sandbox.New(sandbox.Options{}).Run(ctx, sandbox.Command(\"/bin/true\")): every namespace,")
	fmt.Println("         pivot_root, cgroup limits, seccomp, through the spawner")
	fmt.Println("  warm   the same with Options{Pool: 2}: sandboxes prepared ahead in the spawner, refilled in the")
	fmt.Println("         background (while the other rows run)")
	fmt.Println("  live   the same with Options{Live: true}: /bin/true enters one running sandbox, started at the")
	fmt.Println("         first iteration, as a new process (every namespace joined, cgroup, seccomp), and is reaped")
	fmt.Println("  image  the same with Options{Image: ...}: /bin/true from an image of two layers made here (the host's")
	fmt.Println("         /bin/true and its libraries; a file in /etc), stored before the warm-up; the root is an overlay of its")
	fmt.Println("         layers where the kernel allows one, its hard-linked tree elsewhere")
	fmt.Println("  oneshot bench/table/oneshot /bin/true: the smallest Go command on the library (CGO_ENABLED=0),")
	fmt.Println("         a process of its own each time: one Sandbox made in process, one run, exit")
	fmt.Println("  cli    sandbox run -- /bin/true: the command-line tool (CGO_ENABLED=0), a process of its own each")
	fmt.Println("         time, which makes the same sandbox in process")
	fmt.Println("  cliimg sandbox run --image-store STORE --image bench.invalid/true@sha256:... -- /bin/true: the same in")
	fmt.Println("         the image row's image, named by digest, which the store holds (no registry is asked); stored")
	fmt.Println("         before the warm-up")
	fmt.Println()
}
