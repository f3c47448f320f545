// Package launch is the launcher: the code that starts one sandbox and
// serves it until its init is reaped. It runs in the spawner for every
// Sandbox but an InProcess one, whose caller runs it itself.
//
// A launch makes the run's cgroup with its limits, compiles the
// sandbox's plan (internal/recipe), clones the init with it
// (internal/forkplan), writes its id maps and lets it go, then reads its
// verdict: the program runs, or the step that failed. It answers the
// filter's notifications while the run lasts (the seccomp supervisor,
// which also tells the caller's audit trail of each refusal and, with
// exec auditing, each exec, as it happens: Handle.Events), reaps the init
// and reports how it ended and what it used. A prepared
// init, for the spawner's pool, builds its sandbox and waits for its
// program. The messages are internal/wire's (init.go).
//
//   - launch_linux.go: Handle, Launch, and a run's teardown
//   - start_linux.go: the clone, id maps and go-ahead
//   - files_linux.go: the files an init gets besides stdio
//   - verdict_linux.go: the init's report of its setup
//   - prepared_linux.go, program_linux.go: prepared inits and how their
//     program reaches them
//   - limits_linux.go: the run's cgroup, or rlimits in its place
//   - supervise_linux.go: the seccomp supervisor, and the audit events it
//     sends
//   - probe_linux.go: a probe of the namespaces or of an overlay, started
//     the way an init is
package launch
