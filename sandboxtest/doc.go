// Package sandboxtest runs untrusted snippets in sandboxes from Go tests,
// as net/http/httptest runs servers: New(t, opts) returns a [Sandbox] bound
// to the test, whose /workspace is a directory from t.TempDir() that the
// test fills and reads on the host ([Sandbox.Dir]) and which t.Cleanup
// closes; it skips the test, saying what is missing, when the host cannot
// build the sandboxes opts ask for ([sandbox.Probe], run once per process,
// or a Run refused with [sandbox.ErrNotSupported]). [Sandbox.Shell],
// [Sandbox.Python], [Sandbox.Go], [Sandbox.GoFile] (compiled on the host
// with CGO_ENABLED=0), [Sandbox.Binary] and [Sandbox.Run] each run one
// program in a fresh sandbox under a timeout ([Sandbox.Timeout], cut short
// to end before the test binary's -timeout) and return a [Result], whose
// Expect methods report a failed expectation with t.Errorf and a summary of
// the run: the command, how it ended, the syscalls the seccomp policy
// refused and the head and tail of its output; a run that could not be made
// at all, such as a program not found or a Go snippet that does not
// compile, ends the test with t.Fatalf. Runs are as independent as any two
// sandboxes (each has its own namespaces, and its own cgroup where there is
// one), so tests may call t.Parallel; a Sandbox reports to the test that
// made it, so make one in each subtest.
package sandboxtest
