//go:build linux

// Package attack holds the escape suite's attack programs: what a hostile
// program inside the sandbox tries, one class of attack per file, each
// modelled on a known container breakout or abuse. The root package's tests
// run them inside sandboxes (the test binary re-run as a helper, bound
// read-only) and assert, from the report and from the host, that every
// attempt was blocked or limited.
//
// An attack never decides by itself whether the sandbox held: it reports
// each attempt and what the kernel answered, and the test, which knows the
// host side, judges.
package attack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Report is what an attack prints as its last line of standard output.
type Report struct {
	Attack   string    `json:"attack"`
	Attempts []Attempt `json:"attempts"`
	// Seen holds observations the test judges itself (what a path
	// resolves to, which processes are visible).
	Seen map[string]string `json:"seen,omitempty"`
}

// Attempt is one try at an escape.
type Attempt struct {
	What   string `json:"what"`
	Worked bool   `json:"worked"`
	// Err is how the kernel refused: an errno name (EPERM) or a message.
	Err string `json:"err,omitempty"`
}

// Try records an attempt that worked when err is nil.
func (r *Report) Try(what string, err error) bool {
	r.Attempts = append(r.Attempts, Attempt{What: what, Worked: err == nil, Err: errName(err)})
	return err == nil
}

// See records an observation.
func (r *Report) See(key, format string, args ...any) {
	if r.Seen == nil {
		r.Seen = map[string]string{}
	}
	r.Seen[key] = fmt.Sprintf(format, args...)
}

// Worked lists the attempts that worked.
func (r *Report) Worked() []Attempt {
	var w []Attempt
	for _, a := range r.Attempts {
		if a.Worked {
			w = append(w, a)
		}
	}
	return w
}

// Find returns the first attempt whose description starts with prefix.
func (r *Report) Find(prefix string) (Attempt, bool) {
	for _, a := range r.Attempts {
		if strings.HasPrefix(a.What, prefix) {
			return a, true
		}
	}
	return Attempt{}, false
}

// errName is an errno's name (EPERM), else the error's text.
func errName(err error) string {
	if err == nil {
		return ""
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

// An attack tries its class of escapes and records them in r; args are
// what the test passes (host pids, addresses).
type attack func(r *Report, args []string)

var attacks = map[string]attack{}

// register adds an attack; each file registers its own.
func register(name string, a attack) {
	if attacks[name] != nil {
		panic("attack: " + name + " registered twice")
	}
	attacks[name] = a
}

// Names lists the registered attacks.
func Names() []string {
	var names []string
	for n := range attacks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RootMarker is a file that only the escape suite's image root holds.
// Every attack reports what it read there (Seen["root marker"], empty in
// any other root), so that the test knows which root it ran in: an image
// option that went unused would otherwise pass as the host's /usr.
const RootMarker = "/usr/share/sbxtest/root"

// Main runs the attack args[0] with the rest of args, prints its report as
// JSON on the last line of standard output, and returns the exit status.
// Some attacks (exhaustion, survival) are judged by how the run ended, and
// may never get to print a report.
func Main(args []string) int {
	if len(args) == 0 || attacks[args[0]] == nil {
		fmt.Fprintf(os.Stderr, "attack: want one of %s\n", strings.Join(Names(), ", "))
		return 2
	}
	r := &Report{Attack: args[0]}
	// Read first: some attacks use up the fds or memory a read needs.
	if b, err := os.ReadFile(RootMarker); err == nil {
		r.See("root marker", "%s", strings.TrimSpace(string(b)))
	}
	attacks[args[0]](r, args[1:])
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		return 2
	}
	fmt.Printf("\n%s\n", b)
	return 0
}

// Parse reads the report from an attack's standard output.
func Parse(stdout []byte) (*Report, error) {
	s := strings.TrimRight(string(stdout), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	var r Report
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("no attack report in the output: %w", err)
	}
	return &r, nil
}
