// Command sandbox runs a command in a fresh sandbox built by the
// github.com/fumehood/sandbox package, and reports what the host can
// provide.
//
// Usage:
//
//	sandbox run [flags] -- COMMAND [ARG...]
//	sandbox mcp [flags]
//	sandbox pull [flags] REF
//	sandbox images [prune] [flags]
//	sandbox probe [--json]
//	sandbox policy export
//	sandbox help [COMMAND]
//
// Every run has a seccomp filter: the library's default policy, a Docker or
// OCI profile given with --seccomp FILE.json, or none with --seccomp
// unconfined. Refused syscalls fail with their errno and are listed in
// "denials" with --json, and on stderr with -v; --seccomp-kill ends the run
// at the first.
//
// A run has no network but loopback. --net allow:LIST lets it reach the
// listed hosts through an HTTP proxy the tool serves for the run (the
// program sees HTTP_PROXY and HTTPS_PROXY, and has no DNS); refused
// attempts are listed on stderr, every attempt in "connections" with
// --json. --net host shares the host's network (unsafe).
//
// Each run's memory, CPU and processes are limited by a cgroup made for the
// run, to the library's defaults unless --memory, --cpus or --pids say
// otherwise. Where no writable cgroup exists, run refuses unless
// --best-effort lets rlimits stand in.
//
// When its stdin and stdout are terminals, "sandbox run" gives the program
// a terminal of its own, a pty made in the sandbox (-t/--tty forces one,
// --no-tty pipes): "sandbox run -- bash" is an interactive shell with job
// control. The tool's terminal is raw meanwhile and is put back exactly as
// it was.
//
// "sandbox mcp" serves the Model Context Protocol, over stdio or, with
// --http ADDR, streamable HTTP: each MCP session gets a sandbox session of
// its own, whose tools run commands and code, read and write its
// workspace, take and restore snapshots and, with --live, start, list and
// signal background processes. It takes run's limit, network and seccomp
// flags; "sandbox help mcp" lists its tools and flags.
//
// "sandbox run --image REF" runs the program in a container image's
// filesystem instead of the host's /usr: REF is a registry reference or,
// in skopeo's transport names, oci:DIR[:TAG], oci-archive:FILE[:TAG] or
// docker-archive:FILE. The image is pulled into a store on the host once
// ("sandbox pull" does it ahead, with a progress bar on a terminal);
// "sandbox images" lists the store and "sandbox images prune" empties it
// of what no sandbox uses. "sandbox mcp --image REF" gives every session
// that image.
//
// The exit status of "sandbox run" is the program's own exit status; 128+N
// when a signal N killed it; 137 (128+SIGKILL) when the OOM killer ended it
// at the --memory limit; 159 (128+SIGSYS) when --seccomp-kill ended it at a
// refused syscall; 124 when --timeout killed it; 126 or 127 when the
// program is not executable or not found inside the sandbox; 125 when the
// sandbox itself failed or the command line was wrong.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses of the tool itself, as timeout(1) and env(1) use them.
const (
	exitTimeout  = 124      // --timeout killed the program
	exitFailure  = 125      // the sandbox failed, or the command line was wrong
	exitNotFound = 127      // the program was not found in the sandbox
	exitSeccomp  = 128 + 31 // --seccomp-kill ended the run, as a death by SIGSYS would
)

// usage is the top-level help text.
const usage = `sandbox runs a command in a fresh Linux sandbox: new user, pid, mount,
network, ipc, uts and cgroup namespaces; a read-only root with the host's
/usr, /bin, /lib* (or a container image's files, --image REF); a generated
/etc; tmpfs /tmp and /workspace; no network but loopback (--net allow:HOSTS
opens an HTTP proxy to those hosts only); an unprivileged user with no
capabilities. Each run gets a cgroup limiting its memory, CPU and processes
(--memory, --cpus, --pids); where none can be made (an unprivileged user
without a delegated cgroup), run refuses unless --best-effort lets rlimits
stand in. A seccomp filter refuses the syscalls only an attacker needs
(--seccomp, --seccomp-kill).

Usage:
  sandbox run [flags] -- COMMAND [ARG...]   run COMMAND in a new sandbox
  sandbox mcp [flags]                       serve the Model Context Protocol (stdio, or --http ADDR)
  sandbox serve [flags]                     serve the HTTP API of runs and sessions (internal/service/openapi.yaml)
  sandbox pull [flags] REF                  store the container image REF for run --image
  sandbox images [prune] [flags]            list the stored images, or remove those not in use
  sandbox probe [--json]                    report what this host provides
  sandbox policy export                     print the default seccomp policy as OCI JSON
  sandbox help [COMMAND]                    show this text, or a command's flags

Exit status of run: the program's own; 128+N if signal N killed it; 137 if
it ran out of --memory; 159 if --seccomp-kill ended it; 124 on --timeout; 126/127 if the program is not
executable/not found in the sandbox; 125 if the sandbox failed or the
command line was wrong.

"sandbox mcp" serves the Model Context Protocol: an agent's tools (run,
run_code, read_file, write_file, list_files, delete_file, snapshot, restore,
reset; with --live also start_process, list_processes, signal_process) run
in a sandbox session per MCP session.

"sandbox run --image REF" runs COMMAND in a container image's files: REF is
a registry reference (python:3.12-slim), oci:DIR[:TAG], oci-archive:FILE or
docker-archive:FILE; it is pulled once into a store on this host.

Run "sandbox help run" for the flags of run, "sandbox help mcp" for mcp's,
"sandbox help pull" and "sandbox help images" for theirs.
`

// streams are the tool's standard streams, replaceable in tests.
type streams struct {
	stdin          *os.File
	stdout, stderr io.Writer
}

func main() {
	os.Exit(cli(os.Args[1:], streams{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}))
}

// cli runs the tool with the arguments after the program name and returns
// its exit status.
func cli(args []string, s streams) int {
	if len(args) == 0 {
		fmt.Fprint(s.stderr, usage)
		return exitFailure
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		return runMain(rest, s)
	case "probe":
		return probeMain(rest, s)
	case "mcp":
		return mcpMain(rest, s)
	case "serve":
		return serveMain(rest)
	case "pull":
		return pullMain(rest, s)
	case "images":
		return imagesMain(rest, s)
	case "policy":
		return policyMain(rest, s)
	case "help", "-h", "-help", "--help":
		return helpMain(rest, s)
	default:
		fmt.Fprintf(s.stderr, "sandbox: unknown command %q\n%s", cmd, seeHelp(""))
		return exitFailure
	}
}

// seeHelp is the line after a usage error, pointing at the help of cmd
// (or of the tool, when cmd is empty) instead of repeating it.
func seeHelp(cmd string) string {
	if cmd == "" {
		return "Run \"sandbox help\" for the commands.\n"
	}
	return fmt.Sprintf("Run \"sandbox help %s\" for its flags.\n", cmd)
}

func helpMain(args []string, s streams) int {
	if len(args) == 0 {
		fmt.Fprint(s.stdout, usage)
		return 0
	}
	switch args[0] {
	case "run":
		printRunUsage(s.stdout, newRunFlags())
	case "probe":
		printProbeUsage(s.stdout, newProbeFlags())
	case "mcp":
		printMCPUsage(s.stdout, newMCPFlags())
	case "serve":
		return serveMain([]string{"-h"})
	case "pull":
		return pullMain([]string{"-h"}, s)
	case "images":
		return imagesMain([]string{"-h"}, s)
	case "policy":
		fmt.Fprint(s.stdout, policyUsage)
	default:
		fmt.Fprintf(s.stderr, "sandbox: help: unknown command %q\n%s", args[0], seeHelp(""))
		return exitFailure
	}
	return 0
}
