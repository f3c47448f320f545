package sandboxtest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fumehood/sandbox"
)

// shownBytes is how much of each captured stream a summary shows: its
// first and last halves, which hold the usual clues (the first error, the
// traceback's end), around a line saying how much is left out.
const shownBytes = 2048

// maxCommandLine bounds the command line a summary shows.
const maxCommandLine = 200

// String summarises the run for a failure message: the command, how it
// ended, the syscalls the policy refused and the head and tail of each
// captured stream, one per line. It is what the Expect methods report.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run: %s\n", commandLine(r.cmd))
	res := r.Result
	if res == nil {
		b.WriteString("no result: the run could not be made\n")
		return b.String()
	}
	switch res.Outcome {
	case sandbox.Exited:
		fmt.Fprintf(&b, "outcome: exited, exit code %d\n", res.ExitCode)
	case sandbox.Signaled:
		fmt.Fprintf(&b, "outcome: signaled, signal %d (%v)\n", int(res.Signal), res.Signal)
	case sandbox.Timeout:
		fmt.Fprintf(&b, "outcome: timeout, killed after the run's timeout of %v\n", r.timeout)
	case sandbox.SeccompKilled:
		fmt.Fprintf(&b, "outcome: seccomp kill, at the refused syscall %s\n", res.Violation)
	default:
		fmt.Fprintf(&b, "outcome: %s\n", res.Outcome)
	}
	if res.OOMKills > 0 {
		fmt.Fprintf(&b, "out-of-memory kills: %d\n", res.OOMKills)
	}
	if res.PidsLimitHit {
		b.WriteString("a fork failed at the pids limit\n")
	}
	if len(res.Denials) > 0 {
		b.WriteString("refused syscalls: ")
		for i, d := range res.Denials {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%v) x%d", d.Syscall, d.Errno, d.Count)
		}
		b.WriteString("\n")
	}
	stream(&b, "stdout", res.Stdout, res.StdoutBytes, res.StdoutTruncated)
	stream(&b, "stderr", res.Stderr, res.StderrBytes, res.StderrTruncated)
	return b.String()
}

// stream writes one captured stream, indented, at most shownBytes of it.
func stream(b *strings.Builder, name string, out []byte, written int64, truncated bool) {
	if len(out) == 0 && written == 0 {
		fmt.Fprintf(b, "%s: empty\n", name)
		return
	}
	fmt.Fprintf(b, "%s (%d bytes", name, written)
	if truncated {
		fmt.Fprintf(b, ", %d captured (Options.Limits.Output)", len(out))
	}
	b.WriteString("):\n")
	text := string(out)
	if len(out) > shownBytes {
		head, tail := cutRunes(text, shownBytes/2)
		text = head + fmt.Sprintf("\n[... %d bytes not shown ...]\n", len(out)-len(head)-len(tail)) + tail
	}
	text = strings.TrimSuffix(strings.ToValidUTF8(text, "\uFFFD"), "\n")
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString("\t" + line + "\n")
	}
}

// cutRunes returns about n bytes from each end of s, not splitting a rune.
func cutRunes(s string, n int) (head, tail string) {
	h, t := n, len(s)-n
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:h], s[t:]
}

// commandLine shows cmd as a shell would take it, shortened to
// maxCommandLine bytes.
func commandLine(cmd *sandbox.Cmd) string {
	if cmd == nil {
		return "<nil>"
	}
	args := make([]string, len(cmd.Args))
	for i, a := range cmd.Args {
		if a == "" || strings.ContainsFunc(a, needsQuote) {
			a = strconv.Quote(a)
		}
		args[i] = a
	}
	line := strings.Join(args, " ")
	if len(line) > maxCommandLine {
		line, _ = cutRunes(line, maxCommandLine)
		line += "..."
	}
	return line
}

func needsQuote(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
}
