package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// commandLineOf is a Cmd whose argv and environment under s take exactly
// size bytes as execve counts them: sh, told to print the number of its
// arguments, the bytes in them, and the length of $BIG, fills the rest
// with arguments (when env is false) or with BIG and more variables.
func commandLineOf(t *testing.T, s *Sandbox, size int, env bool) (c *Cmd, args, argBytes, big int) {
	t.Helper()
	script := `n=0; for a; do n=$((n+${#a})); done; echo $# $n ${#BIG}`
	c = Command("/bin/sh", "-c", script, "sh")
	used := 0
	for _, a := range c.Args {
		used += len(a) + 1
	}
	for _, kv := range s.cfg.program(c, s.root()).Env {
		used += len(kv) + 1
	}
	rest := size - used
	if rest < 0 {
		t.Fatalf("the command alone takes %d bytes, more than %d", used, size)
	}
	if !env {
		for rest > 0 {
			n := min(rest-1, MaxArgString)
			c.Args = append(c.Args, strings.Repeat("a", n))
			args++
			argBytes += n
			rest -= n + 1
		}
		return c, args, argBytes, 0
	}
	for i := 0; rest > 0; i++ {
		key := "BIG="
		if i > 0 {
			key = fmt.Sprintf("BIG%d=", i)
		}
		n := min(rest-1, MaxArgString)
		if n < len(key) {
			t.Fatalf("%d bytes left over, too few for another variable", rest)
		}
		c.Env = append(c.Env, key+strings.Repeat("b", n-len(key)))
		if i == 0 {
			big = n - len(key)
		}
		rest -= n + 1
	}
	return c, 0, 0, big
}

// TestCommandLineLimits runs, on each path a run takes, a command line of
// exactly MaxCommandLine bytes (the program sees all of it) and one of a
// byte more (an *OptionError naming the field, before the Cmd is taken).
func TestCommandLineLimits(t *testing.T) {
	requireSandbox(t)
	kinds := []struct {
		name string
		o    Options
	}{
		{"cold", Options{Workspace: FreshWorkspace{}}},
		{"pooled", Options{Start: Pool{Size: 1}}},
		{"InProcess", Options{Start: InProcess{}, Workspace: FreshWorkspace{}}},
		{"session", Options{}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			// Cold: these programs are too large for a prepared sandbox.
			s := newColdTest(t, k.o)
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			for _, env := range []bool{false, true} {
				field := "Cmd.Args"
				if env {
					field = "Cmd.Env"
				}
				c, args, argBytes, big := commandLineOf(t, s, MaxCommandLine, env)
				res, err := s.Run(context.Background(), c)
				if err != nil {
					t.Fatalf("%s: a command line of MaxCommandLine bytes: %v", field, err)
				}
				want := fmt.Sprintf("%d %d %d", args, argBytes, big)
				if got := strings.TrimSpace(string(res.Stdout)); got != want || res.ExitCode != 0 {
					t.Errorf("%s: at MaxCommandLine the program saw %q (exit %d, stderr %q), want %q", field, got, res.ExitCode, res.Stderr, want)
				}

				before, _ := runsOf(s)
				c, _, _, _ = commandLineOf(t, s, MaxCommandLine+1, env)
				_, err = s.Run(context.Background(), c)
				var oe *OptionError
				if !errors.Is(err, ErrInvalidOption) || !errors.As(err, &oe) || oe.Option != field {
					t.Fatalf("%s: a command line of MaxCommandLine+1 bytes: got %v, want an *OptionError for %s", field, err, field)
				}
				for _, n := range []int{MaxCommandLine + 1, MaxCommandLine} {
					if !strings.Contains(err.Error(), fmt.Sprint(n)) {
						t.Errorf("%s: the error does not give %d: %v", field, n, err)
					}
				}
				if after, _ := runsOf(s); c.used || after != before {
					t.Errorf("%s: a command line over the limit was run (Cmd taken %v, runs %d then %d)", field, c.used, before, after)
				}
			}
		})
	}
}

// TestCommandLineStringLimit: one string longer than execve takes is an
// *OptionError naming it, in Cmd.Args, Cmd.Env and Options.Env.
func TestCommandLineStringLimit(t *testing.T) {
	requireSandbox(t)
	long := strings.Repeat("x", MaxArgString)
	s := newColdTest(t, Options{Workspace: FreshWorkspace{}})
	for _, env := range []bool{false, true} {
		c := Command("/bin/sh", "-c", `echo $((${#1}+${#L}))`, "sh", long)
		if env {
			c = Command("/bin/sh", "-c", `echo $((${#1}+${#L}))`)
			c.Env = []string{"L=" + long[2:]}
		}
		res, err := s.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("a string of MaxArgString bytes (in the environment: %v): %v", env, err)
		}
		want := MaxArgString
		if env {
			want -= 2
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != fmt.Sprint(want) {
			t.Errorf("a string of MaxArgString bytes (in the environment: %v): the program saw %q, want %d", env, got, want)
		}
	}
	for _, tc := range []struct {
		field string
		cmd   *Cmd
	}{
		{"Cmd.Args[4]", Command("/bin/sh", "-c", `true`, "sh", long+"x")},
		{"Cmd.Env[0]", &Cmd{Path: "/bin/true", Env: []string{"L=" + long[1:]}}},
	} {
		_, err := s.Run(context.Background(), tc.cmd)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != tc.field || !strings.Contains(err.Error(), fmt.Sprint(MaxArgString)) {
			t.Errorf("%s of MaxArgString+1 bytes: got %v, want an *OptionError for %s giving the limit", tc.field, err, tc.field)
		}
	}
	bad := New(Options{Env: []string{"L=" + long[1:]}})
	defer bad.Close()
	var oe *OptionError
	if err := bad.Err(); !errors.As(err, &oe) || oe.Option != "Options.Env[0]" {
		t.Errorf("Options.Env[0] of MaxArgString+1 bytes: New's Err is %v, want an *OptionError for it", err)
	}
	var many []string
	for i := 0; i*(MaxArgString+1) <= MaxCommandLine; i++ {
		many = append(many, fmt.Sprintf("V%d=%s", i, long[:MaxArgString-4]))
	}
	bad2 := New(Options{Env: many})
	defer bad2.Close()
	if err := bad2.Err(); !errors.As(err, &oe) || oe.Option != "Options.Env" || !strings.Contains(err.Error(), fmt.Sprint(MaxCommandLine)) {
		t.Errorf("an Options.Env of more than MaxCommandLine bytes: New's Err is %v, want an *OptionError for it", err)
	}
}

// TestSpawnerSocketCarriesCommandLine: the spawner's socket, sized by
// sizeSendBuffer, sends a message of the size it reports and refuses one
// byte more, and a run's request with a command line of MaxCommandLine
// bytes (and the default seccomp filter) fits both it and what an
// unprivileged caller gets at Debian's default net.core.wmem_max.
func TestSpawnerSocketCarriesCommandLine(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	unix.SetNonblock(fds[0], true)
	limit := sizeSendBuffer(fds[0])
	if err := unix.Sendmsg(fds[0], make([]byte, limit), nil, nil, 0); err != nil {
		t.Errorf("a message of the %d bytes sizeSendBuffer reports: %v", limit, err)
	}
	if limit < wire.MaxMessage {
		if err := unix.Sendmsg(fds[0], make([]byte, limit+1), nil, nil, 0); err != unix.EMSGSIZE {
			t.Errorf("a message of %d bytes, one more than sizeSendBuffer reports: %v, want EMSGSIZE", limit+1, err)
		}
	}

	s := New(Options{Workspace: FreshWorkspace{}})
	defer s.Close()
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	c, _, _, _ := commandLineOf(t, s, MaxCommandLine, false)
	cfg := s.cfg.config(c, s.filter, s.root())
	msg, err := json.Marshal(wire.Request{ID: 1 << 60, Kind: wire.Start, Spec: &cfg.Spec, Program: &cfg.Program, Owner: "x", Pool: maxPool})
	if err != nil {
		t.Fatal(err)
	}
	const debianUnprivileged = 2*212992 - 32 // twice net.core.wmem_max, less what the kernel keeps
	t.Logf("a request of MaxCommandLine: %d bytes; the socket takes %d here, %d for an unprivileged caller at Debian's defaults", len(msg), limit, debianUnprivileged)
	if len(msg) > min(limit, debianUnprivileged) {
		t.Errorf("a request with a command line of MaxCommandLine is %d bytes, more than the %d the socket takes here or the %d of an unprivileged caller at Debian's defaults",
			len(msg), limit, debianUnprivileged)
	}
}
