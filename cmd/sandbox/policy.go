package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/seccompprofile"
)

const policyUsage = `Usage: sandbox policy export

Prints the library's default seccomp policy as an OCI runtime-spec
LinuxSeccomp object (the shape of Docker's profiles), for review or as a
starting point for a profile to pass to sandbox run --seccomp FILE.json.

Read back by sandbox run, the profile decides exactly as the default does
(except that clone3's quiet ENOSYS becomes a reported one). Other runtimes
may differ: runc with libseccomp 2.5 drops a syscall's conditional rules
once it also has an unconditional one, so it allows every ioctl, including
the TIOCSTI and TIOCLINUX requests this policy refuses.
`

func policyMain(args []string, s streams) int {
	if len(args) != 1 || args[0] != "export" {
		fmt.Fprintf(s.stderr, "sandbox: policy: want \"sandbox policy export\"\n\n%s", policyUsage)
		return exitFailure
	}
	enc := json.NewEncoder(s.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(seccompprofile.ToOCI(sandbox.DefaultSeccompPolicy())); err != nil {
		fmt.Fprintf(s.stderr, "sandbox: policy export: %v\n", err)
		return exitFailure
	}
	return 0
}

// seccompFlag is --seccomp: "default", "unconfined" or a profile file.
type seccompFlag struct {
	value   string
	policy  *sandbox.SeccompPolicy // nil for "default" and "unconfined"
	unknown []string               // syscalls of the profile this architecture lacks
}

// unconfined reports whether the run is to have no filter.
func (f *seccompFlag) unconfined() bool { return f.value == "unconfined" }

func (f *seccompFlag) String() string { return f.value }

func (f *seccompFlag) Set(v string) error {
	*f = seccompFlag{value: v}
	if v == "default" || f.unconfined() {
		return nil
	}
	data, err := os.ReadFile(v)
	if err != nil {
		return fmt.Errorf("want default, unconfined or a profile FILE.json: %w", err)
	}
	f.policy, f.unknown, err = seccompprofile.FromDocker(data)
	if err != nil {
		// The flag package prints the message after the flag's name.
		return errors.New(strings.TrimPrefix(err.Error(), "sandbox: "))
	}
	return nil
}

// warnUnknown tells which syscalls of a profile were left out.
func (f *seccompFlag) warnUnknown(s streams) {
	if len(f.unknown) > 0 {
		fmt.Fprintf(s.stderr, "sandbox: --seccomp %s: %d syscalls unknown on %s, answered ENOSYS: %s\n",
			f.value, len(f.unknown), runtime.GOARCH, strings.Join(f.unknown, ", "))
	}
}
