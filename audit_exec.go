package sandbox

import "github.com/fumehood/sandbox/internal/seccomp"

// Programs executed (Options.Audit.Exec): the filter hands every execve and
// execveat to the supervisor, which records the path and lets it run. A
// policy that refuses an exec, or decides one by its arguments, keeps its
// meaning only if the audit does not replace its rule; so the audit needs
// a policy that allows both calls whatever their arguments, as the
// default does, and says so otherwise.

// auditExecs makes f notify execve and execveat for the supervisor to
// record and let run, in place of allowing them.
func auditExecs(f *seccomp.Filter, option string) error {
	for _, name := range []string{"execve", "execveat"} {
		nr, ok := seccomp.Number(name)
		if !ok {
			continue // not a syscall of this architecture
		}
		found := false
		for i := range f.Rules {
			r := &f.Rules[i]
			if r.Nr != nr {
				continue
			}
			if len(r.Conds) > 0 || r.Action != seccomp.Allow {
				return optionErr("Options.Audit.Exec", "true", "needs %s to allow %s whatever its arguments, and one of its rules for it decides otherwise",
					option, name)
			}
			r.Action, found = seccomp.NotifyContinue(), true
		}
		if !found {
			if f.Default != seccomp.Allow {
				return optionErr("Options.Audit.Exec", "true", "needs %s to allow %s, which its Default (%s) decides", option, name, SeccompAction(f.Default))
			}
			f.Rules = append(f.Rules, seccomp.Rule{Nr: nr, Action: seccomp.NotifyContinue()})
		}
	}
	return nil
}
