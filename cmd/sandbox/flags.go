package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
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

// Size units of parseSize: each a power of 1024.
var sizeUnits = map[string]int64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

// parseSize parses a size in bytes: a whole number, or a number with the
// suffix K, M or G (powers of 1024, in either case) optionally followed by
// "i", "iB" or "B", e.g. 4096, 100k, 512M, 1GiB, 1.5G. A fraction needs a
// suffix; the result is rounded down to a whole byte.
func parseSize(s string) (int64, error) {
	num := strings.TrimRight(s, "iIbB")
	suffix := s[len(num):]
	unit := ""
	if num != "" && strings.ContainsRune("kKmMgG", rune(num[len(num)-1])) {
		unit, num = strings.ToLower(num[len(num)-1:]), num[:len(num)-1]
	}
	switch strings.ToLower(suffix) {
	case "", "b", "i", "ib":
	default:
		return 0, fmt.Errorf("%q: want a number of bytes, optionally with K, M or G (e.g. 512M, 1GiB)", s)
	}
	if unit == "" && suffix != "" && strings.ToLower(suffix) != "b" {
		return 0, fmt.Errorf("%q: %q needs a unit K, M or G before it", s, suffix)
	}
	if num == "" || strings.ContainsAny(num[:1], "+-") {
		return 0, fmt.Errorf("%q: want a number of bytes, optionally with K, M or G (e.g. 512M, 1GiB)", s)
	}
	mult := sizeUnits[unit]
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%q: too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || !strings.Contains(num, ".") ||
		strings.ContainsAny(num, "eExXpP_") {
		return 0, fmt.Errorf("%q: want a number of bytes, optionally with K, M or G (e.g. 512M, 1GiB)", s)
	}
	if unit == "" {
		return 0, fmt.Errorf("%q: a fraction of a byte; give a whole number, or a unit K, M or G", s)
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(v), nil
}

// formatSize writes n bytes in the largest of G, M and K that divides it,
// as parseSize reads it back: 536870912 is "512M".
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// isUnlimited reports whether s asks for no limit: "unlimited", "-1" or a
// zero ("0", "0.0").
func isUnlimited(s string) bool {
	if strings.EqualFold(s, "unlimited") || s == "-1" {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == 0
}

// sizeFlag is a flag.Value for a size in bytes (see parseSize). With
// unlimited set, "0", "-1" and "unlimited" store -1, an Options field's
// "no limit"; without, the size must be positive. The field is left alone
// unless the flag is given, so that the library's default applies.
type sizeFlag struct {
	v         *int64
	text      string
	unlimited bool
}

func (f *sizeFlag) String() string {
	if f == nil {
		return ""
	}
	return f.text
}

func (f *sizeFlag) Set(s string) error {
	if f.unlimited && isUnlimited(s) {
		*f.v, f.text = -1, s
		return nil
	}
	n, err := parseSize(s)
	switch {
	case err != nil:
		return err
	case n == 0 && f.unlimited:
		n = -1
	case n == 0:
		return fmt.Errorf("%q: must be more than 0 bytes", s)
	}
	*f.v, f.text = n, s
	return nil
}

// cpusFlag is the flag.Value of --cpus: a number of CPUs, or "0", "-1" or
// "unlimited" for no limit (stored as -1). The library checks the range.
type cpusFlag struct {
	v    *float64
	text string
}

func (f *cpusFlag) String() string {
	if f == nil {
		return ""
	}
	return f.text
}

func (f *cpusFlag) Set(s string) error {
	if isUnlimited(s) {
		*f.v, f.text = -1, s
		return nil
	}
	n, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(n) || math.IsInf(n, 0):
		return fmt.Errorf("%q: want a number of CPUs, e.g. 0.5 or 2, or \"unlimited\"", s)
	case n < 0:
		return fmt.Errorf("%q: must not be negative (use \"unlimited\" for no limit)", s)
	}
	*f.v, f.text = n, s
	return nil
}

// pidsFlag is the flag.Value of --pids: a number of processes and threads,
// or "0", "-1" or "unlimited" for no limit (stored as -1).
type pidsFlag struct {
	v    *int64
	text string
}

func (f *pidsFlag) String() string {
	if f == nil {
		return ""
	}
	return f.text
}

func (f *pidsFlag) Set(s string) error {
	if isUnlimited(s) {
		*f.v, f.text = -1, s
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("%q: want a whole number of processes, or \"unlimited\"", s)
	case n < 0:
		return fmt.Errorf("%q: must not be negative (use \"unlimited\" for no limit)", s)
	}
	*f.v, f.text = n, s
	return nil
}

// pemFile is a flag.Value for a file of PEM certificates, read when set;
// New checks what it holds.
type pemFile struct {
	name string
	data []byte
}

func (f *pemFile) String() string {
	if f == nil {
		return ""
	}
	return f.name
}

func (f *pemFile) Set(name string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	*f = pemFile{name: name, data: data}
	return nil
}
