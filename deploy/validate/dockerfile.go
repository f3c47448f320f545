package validate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Dockerfile is what the checks need from deploy/Dockerfile. It is read
// line by line (see parseDockerfile), not with BuildKit's parser, which
// would bring BuildKit's dependencies for the few instructions used here.
type Dockerfile struct {
	Stages []Stage
}

// Stage is one FROM and the instructions after it.
type Stage struct {
	Name   string // the "AS name", if any
	Line   int    // of the FROM
	Instrs []Instr
}

// Instr is one instruction, continuation lines joined.
type Instr struct {
	Cmd  string // upper case: RUN, COPY, USER, ...
	Args string // the rest of the instruction
	Line int    // where it starts
}

// Final is the stage the image is made of: the last one.
func (d *Dockerfile) Final() *Stage {
	if len(d.Stages) == 0 {
		return nil
	}
	return &d.Stages[len(d.Stages)-1]
}

// Stage returns the stage called name, or nil.
func (d *Dockerfile) Stage(name string) *Stage {
	for i := range d.Stages {
		if strings.EqualFold(d.Stages[i].Name, name) {
			return &d.Stages[i]
		}
	}
	return nil
}

// Last returns the stage's last instruction cmd, which is the one that
// counts for USER, ENTRYPOINT and CMD, or nil.
func (s *Stage) Last(cmd string) *Instr {
	for i := len(s.Instrs) - 1; i >= 0; i-- {
		if s.Instrs[i].Cmd == cmd {
			return &s.Instrs[i]
		}
	}
	return nil
}

// All returns the stage's instructions cmd in order.
func (s *Stage) All(cmd string) []Instr {
	var out []Instr
	for _, in := range s.Instrs {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// parseDockerfile reads a Dockerfile the way the builder splits it into
// instructions: a line ending in a backslash continues on the next, lines
// starting with "#" are comments (parser directives such as "# syntax="
// included) even between continued lines, and the first word of an
// instruction is its name in any case. Instructions before the first FROM
// (global ARGs) belong to no stage and are dropped.
func parseDockerfile(text string) (*Dockerfile, error) {
	d := &Dockerfile{}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var full strings.Builder
		for {
			cont := strings.HasSuffix(line, `\`)
			full.WriteString(strings.TrimSuffix(line, `\`))
			if !cont {
				break
			}
			full.WriteString(" ")
			// Comment and blank lines inside a continuation are skipped.
			for i+1 < len(lines) {
				next := strings.TrimSpace(lines[i+1])
				if next != "" && !strings.HasPrefix(next, "#") {
					break
				}
				i++
			}
			if i+1 >= len(lines) {
				return nil, fmt.Errorf("line %d: continuation at the end of the file", start)
			}
			i++
			line = strings.TrimSpace(lines[i])
		}
		cmd, args, _ := strings.Cut(full.String(), " ")
		cmd = strings.ToUpper(cmd)
		args = strings.TrimSpace(args)
		if cmd == "FROM" {
			f := strings.Fields(args)
			s := Stage{Line: start}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.Name = f[2]
			}
			d.Stages = append(d.Stages, s)
			continue
		}
		if len(d.Stages) == 0 {
			continue
		}
		st := &d.Stages[len(d.Stages)-1]
		st.Instrs = append(st.Instrs, Instr{Cmd: cmd, Args: args, Line: start})
	}
	if len(d.Stages) == 0 {
		return nil, fmt.Errorf("no FROM instruction")
	}
	return d, nil
}

// execForm decodes an instruction's JSON array (exec) form. ok is false
// for the shell form, which runs the command under /bin/sh -c.
func execForm(args string) (argv []string, ok bool) {
	if !strings.HasPrefix(args, "[") {
		return nil, false
	}
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		return nil, false
	}
	return argv, true
}

// copyArgs splits a COPY instruction into its --from stage, its sources and
// its destination.
func copyArgs(args string) (from string, srcs []string, dest string, err error) {
	words, ok := execForm(args)
	if !ok {
		words, err = shellWords(args)
		if err != nil {
			return "", nil, "", err
		}
	}
	var rest []string
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, "--from="); ok {
			from = v
			continue
		}
		if strings.HasPrefix(w, "--") && len(rest) == 0 {
			continue // --chown, --chmod, --link: not needed here
		}
		rest = append(rest, w)
	}
	if len(rest) < 2 {
		return "", nil, "", fmt.Errorf("COPY needs a source and a destination: %q", args)
	}
	return from, rest[:len(rest)-1], rest[len(rest)-1], nil
}

// goBuild is a "go build" command found in a RUN instruction.
type goBuild struct {
	Env     map[string]string // assignments before "go", e.g. CGO_ENABLED=0
	Output  string            // -o
	Package string            // the package argument
}

// goBuildFlagsWithValue are the go build flags that take a value as the
// next word; the others are booleans.
var goBuildFlagsWithValue = map[string]bool{
	"-o": true, "-p": true, "-tags": true, "-ldflags": true, "-gcflags": true,
	"-asmflags": true, "-mod": true, "-modfile": true, "-buildmode": true,
	"-compiler": true, "-installsuffix": true, "-overlay": true, "-pgo": true,
	"-pkgdir": true, "-toolexec": true, "-gccgoflags": true, "-C": true,
}

// findGoBuild finds the first "go build" command in a RUN instruction's
// shell text (commands joined by && or ;).
func findGoBuild(run string) (*goBuild, error) {
	words, err := shellWords(run)
	if err != nil {
		return nil, err
	}
	// Split into simple commands at the shell's separators.
	var cmds [][]string
	cur := []string{}
	for _, w := range words {
		if w == "&&" || w == ";" || w == "||" || w == "|" || w == "&" {
			cmds = append(cmds, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, w)
	}
	cmds = append(cmds, cur)
	for _, c := range cmds {
		b := &goBuild{Env: map[string]string{}}
		i := 0
		for i < len(c) && strings.Contains(c[i], "=") && !strings.HasPrefix(c[i], "-") {
			k, v, _ := strings.Cut(c[i], "=")
			b.Env[k] = v
			i++
		}
		if i+1 >= len(c) || c[i] != "go" || c[i+1] != "build" {
			continue
		}
		var pkgs []string
		for j := i + 2; j < len(c); j++ {
			w := c[j]
			if !strings.HasPrefix(w, "-") {
				pkgs = append(pkgs, w)
				continue
			}
			name, val, hasVal := strings.Cut(strings.Replace(w, "--", "-", 1), "=")
			if !hasVal && goBuildFlagsWithValue[name] {
				if j+1 >= len(c) {
					return nil, fmt.Errorf("go build: %s needs a value", name)
				}
				j++
				val = c[j]
			}
			if name == "-o" {
				b.Output = val
			}
		}
		if len(pkgs) != 1 {
			return nil, fmt.Errorf("go build: want one package, have %q", pkgs)
		}
		b.Package = pkgs[0]
		return b, nil
	}
	return nil, nil
}

// shellWords splits s into words as a POSIX shell would for the simple
// cases a Dockerfile RUN uses: blanks separate, single and double quotes
// group, a backslash escapes the next character outside single quotes, and
// the operators ;, &, |, && and || are words of their own.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				if i+1 < len(s) {
					i++
					cur.WriteByte(s[i])
				}
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote = c
			inWord = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			// An operator is a word of its own even when not blank-separated.
			switch {
			case c == ';':
				words = append(words, ";")
			case (c == '&' || c == '|') && i+1 < len(s) && s[i+1] == c:
				words = append(words, string([]byte{c, c}))
				i++
			case c == '&' || c == '|':
				words = append(words, string(c))
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
