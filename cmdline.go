package sandbox

import "fmt"

// The bounds of a program's command line. A sandbox's program gets its
// argv and environment from execve, which refuses any one string of more
// than 128 KiB (the kernel's MAX_ARG_STRLEN, counting the NUL), and the
// run's configuration, which holds both, travels to the spawner as one
// message; Run checks both bounds before it starts anything, so that a
// command line too long for either is an *OptionError naming the field,
// never a failure of the spawner or of the program's execve.
const (
	// MaxArgString is the most bytes one string of Cmd.Args, Cmd.Env or
	// Options.Env ("KEY=value", whole) may hold.
	MaxArgString = 128<<10 - 1

	// MaxCommandLine is the most bytes the program's argv and
	// environment may hold together, counting each string with its
	// NUL, as execve does: Cmd.Args, then Options.Env with Cmd.Env and
	// the variables the sandbox sets. It is the same for every kind of
	// run (cold, pooled, InProcess, a session's).
	MaxCommandLine = 256 << 10
)

// checkStrings checks the strings of one field against MaxArgString and
// returns their size as execve counts it.
func checkStrings(field string, ss []string) (int, error) {
	n := 0
	for i, s := range ss {
		if len(s) > MaxArgString {
			return 0, optionErr(fmt.Sprintf("%s[%d]", field, i), abbrev(s),
				"is %d bytes, more than the %d (MaxArgString) execve takes in one string; pass long data in a file or on stdin", len(s), MaxArgString)
		}
		n += len(s) + 1
	}
	return n, nil
}

// checkCommandLine checks cmd's argv and environment under o against
// MaxArgString and MaxCommandLine, naming the field with the most of it.
func checkCommandLine(o *resolved, cmd *Cmd, root *rootView) error {
	env := o.program(cmd, root).Env
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	sizes := make([]int, 3)
	fields := []string{"Cmd.Args", "Cmd.Env", "Options.Env"}
	for i, ss := range [][]string{args, cmd.Env, o.Env} {
		n, err := checkStrings(fields[i], ss)
		if err != nil {
			return err
		}
		sizes[i] = n
	}
	total := sizes[0]
	for _, kv := range env {
		total += len(kv) + 1
	}
	if total <= MaxCommandLine {
		return nil
	}
	most := 0
	for i := range sizes {
		if sizes[i] > sizes[most] {
			most = i
		}
	}
	return optionErr(fields[most], fmt.Sprintf("%d strings, %d bytes", len([][]string{args, cmd.Env, o.Env}[most]), sizes[most]),
		"makes a command line of %d bytes (Cmd.Args %d, environment %d), more than the %d (MaxCommandLine) a run takes; pass long data in a file or on stdin",
		total, sizes[0], total-sizes[0], MaxCommandLine)
}

// abbrev is s cut short for an error message.
func abbrev(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + fmt.Sprintf("... (%d bytes)", len(s))
}
