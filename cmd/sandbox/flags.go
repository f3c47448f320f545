package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/fumehood/sandbox"
)

// bindSpec is one --bind or --ro-bind, remembered with the flag that gave it
// so that an error New finds in it can name the flag.
type bindSpec struct {
	flag string // "bind" or "ro-bind"
	spec string // as given on the command line
	bind sandbox.Bind
}

// bindList collects --bind and --ro-bind in the order they were given.
type bindList struct {
	specs []bindSpec
}

// bindFlag is the flag.Value of one of the two bind flags; both append to the
// same bindList.
type bindFlag struct {
	list     *bindList
	name     string
	writable bool
}

func (f *bindFlag) String() string {
	if f == nil || f.list == nil {
		return ""
	}
	var s []string
	for _, b := range f.list.specs {
		if b.flag == f.name {
			s = append(s, b.spec)
		}
	}
	return strings.Join(s, ",")
}

func (f *bindFlag) Set(spec string) error {
	b, err := parseBind(spec, f.writable)
	if err != nil {
		return err
	}
	f.list.specs = append(f.list.specs, bindSpec{flag: f.name, spec: spec, bind: b})
	return nil
}

// binds returns the Options.Binds of the list.
func (l *bindList) binds() []sandbox.Bind {
	var bs []sandbox.Bind
	for _, s := range l.specs {
		bs = append(bs, s.bind)
	}
	return bs
}

// parseBind parses SRC[:DST]. A relative SRC is taken from the current
// directory; DST, when given, must be an absolute path inside the sandbox
// (New checks it further). SRC may not contain a colon.
func parseBind(spec string, writable bool) (sandbox.Bind, error) {
	src, dst, hasDst := strings.Cut(spec, ":")
	if src == "" {
		return sandbox.Bind{}, errors.New("want SRC[:DST], SRC is empty")
	}
	if hasDst && dst == "" {
		return sandbox.Bind{}, errors.New("want SRC[:DST], DST is empty after ':'")
	}
	if hasDst && !strings.HasPrefix(dst, "/") {
		return sandbox.Bind{}, fmt.Errorf("DST %q must be an absolute path inside the sandbox", dst)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return sandbox.Bind{}, fmt.Errorf("SRC %q: %w", src, err)
	}
	return sandbox.Bind{Source: abs, Target: dst, Writable: writable}, nil
}

// envList collects --env K=V.
type envList []string

func (e *envList) String() string {
	if e == nil {
		return ""
	}
	return strings.Join(*e, ",")
}

func (e *envList) Set(kv string) error {
	if err := checkEnvVar(kv); err != nil {
		return err
	}
	*e = append(*e, kv)
	return nil
}

// checkEnvVar accepts KEY=VALUE with a non-empty KEY without '=' or NUL.
func checkEnvVar(kv string) error {
	k, _, ok := strings.Cut(kv, "=")
	switch {
	case !ok:
		return errors.New("want KEY=VALUE, found no '='")
	case k == "":
		return errors.New("want KEY=VALUE, KEY is empty")
	case strings.ContainsRune(kv, 0):
		return errors.New("contains a NUL byte")
	}
	return nil
}

// absDir is a flag.Value for a host directory, made absolute when set.
type absDir string

func (d *absDir) String() string {
	if d == nil {
		return ""
	}
	return string(*d)
}

func (d *absDir) Set(dir string) error {
	if dir == "" {
		return errors.New("empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%q: %w", dir, err)
	}
	*d = absDir(abs)
	return nil
}
