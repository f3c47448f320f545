package validate

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// flagKind says how a server flag's value is read.
type flagKind int

const (
	flagString flagKind = iota
	flagBool
	flagInt
	flagFloat
	flagDuration
	flagSize
	flagAddr
)

// serverFlags are the flags of "sandbox serve" with their defaults: the
// service's own, the access flags (authentication, Host and Origin) and
// -tenants. A flag missing here is a typo in a manifest,
// which would stop the server at start ("flag provided but not defined").
// -max-concurrent defaults to runtime.NumCPU(), the node's CPUs in a
// container, so it has no default here: the checks require it be set.
var serverFlags = map[string]struct {
	kind flagKind
	def  string
}{
	"addr":             {flagAddr, "127.0.0.1:8080"},
	"max-concurrent":   {flagInt, ""},
	"max-queue":        {flagInt, "16"},
	"default-timeout":  {flagDuration, "10s"},
	"max-timeout":      {flagDuration, "60s"},
	"max-memory":       {flagSize, "512M"},
	"max-cpus":         {flagFloat, "1"},
	"max-pids":         {flagInt, "256"},
	"max-output":       {flagSize, "1M"},
	"egress":           {flagString, ""},
	"best-effort":      {flagBool, "false"},
	"pool":             {flagInt, "0"},
	"log-format":       {flagString, "json"},
	"shutdown-timeout": {flagDuration, "10s"},
	"max-sessions":     {flagInt, "16"},
	"max-idle-timeout": {flagDuration, "10m"},
	"max-lifetime":     {flagDuration, "1h"},
	"replica":          {flagString, ""},
	"peer-url":         {flagString, ""},
	"images":           {flagString, ""},
	"image-store":      {flagString, ""},
	"max-connections":  {flagInt, "0"},
	"audit":            {flagString, ""},
	"tenants":          {flagString, ""},

	"api-keys":             {flagString, ""},
	"oidc-issuer":          {flagString, ""},
	"oidc-audience":        {flagString, ""},
	"oidc-tenant-claim":    {flagString, ""},
	"oidc-ca":              {flagString, ""},
	"tls-cert":             {flagString, ""},
	"tls-key":              {flagString, ""},
	"client-ca":            {flagString, ""},
	"allow-host":           {flagString, ""},
	"allow-origin":         {flagString, ""},
	"insecure-no-auth":     {flagBool, "false"},
	"max-conns-per-client": {flagInt, "0"},
}

// fileFlags are the flags whose value is a file the server reads: in a pod
// each must come from a read-only volume, and secretFileFlags from a
// Secret, since they hold keys or key hashes.
var (
	fileFlags       = []string{"api-keys", "tenants", "tls-cert", "tls-key", "client-ca", "oidc-ca"}
	secretFileFlags = []string{"api-keys", "tls-key"}
)

// subcommand is the first argument of the server's command line: the
// image's ENTRYPOINT is the sandbox binary, which serves HTTP only as
// "sandbox serve".
const subcommand = "serve"

// parseServeArgs reads a command line that starts with the subcommand and
// goes on with its flags (parseServerArgs); the argProblems' indices count
// the subcommand.
func parseServeArgs(args []string) (*serverArgs, []argProblem) {
	if len(args) == 0 || args[0] != subcommand {
		first := "nothing"
		if len(args) > 0 {
			first = fmt.Sprintf("%q", args[0])
		}
		sa, probs := parseServerArgs(nil)
		return sa, append(probs, argProblem{0, fmt.Sprintf("the arguments begin with %s, want %q: the sandbox binary serves HTTP only as \"sandbox %s\"", first, subcommand, subcommand)})
	}
	sa, probs := parseServerArgs(args[1:])
	for k, i := range sa.at {
		sa.at[k] = i + 1
	}
	for j := range probs {
		probs[j].i++
	}
	return sa, probs
}

// serverArgs are the server's flags as a command line sets them.
type serverArgs struct {
	set map[string]string // flag name -> value as given
	at  map[string]int    // flag name -> index of the argument that set it
}

// parseServerArgs reads args the way Go's flag package does: "-name=value",
// "--name=value", "-name value" for flags that are not booleans, and a bare
// "-name" for booleans. It stops at "--" or the first non-flag argument,
// which the server would take as a positional argument: that is an error.
func parseServerArgs(args []string) (*serverArgs, []argProblem) {
	sa := &serverArgs{set: map[string]string{}, at: map[string]int{}}
	var probs []argProblem
	for i := 0; i < len(args); i++ {
		a, start := args[i], i
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			probs = append(probs, argProblem{i, fmt.Sprintf("%q is not a flag; sandbox serve takes no arguments", a)})
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		f, ok := serverFlags[name]
		if !ok {
			probs = append(probs, argProblem{i, fmt.Sprintf("-%s is not a flag of sandbox serve", name)})
			continue
		}
		if !hasVal {
			if f.kind == flagBool {
				val = "true"
			} else if i+1 < len(args) {
				i++
				val = args[i]
			} else {
				probs = append(probs, argProblem{i, fmt.Sprintf("-%s needs a value", name)})
				continue
			}
		}
		if _, dup := sa.set[name]; dup {
			probs = append(probs, argProblem{i, fmt.Sprintf("-%s is given twice; the last one would win", name)})
		}
		if err := checkFlagValue(f.kind, val); err != nil {
			probs = append(probs, argProblem{i, fmt.Sprintf("-%s=%s: %v", name, val, err)})
			continue
		}
		sa.set[name] = val
		sa.at[name] = start
	}
	return sa, probs
}

// argProblem is a problem with the argument at index i.
type argProblem struct {
	i   int
	msg string
}

// value returns the flag's value: as set, or its default.
func (sa *serverArgs) value(name string) string {
	if v, ok := sa.set[name]; ok {
		return v
	}
	return serverFlags[name].def
}

// port returns -addr's port.
func (sa *serverArgs) port() int {
	p, _ := addrPort(sa.value("addr"))
	return p
}

func (sa *serverArgs) duration(name string) time.Duration {
	d, _ := time.ParseDuration(sa.value(name))
	return d
}

func (sa *serverArgs) int(name string) int64 {
	n, _ := strconv.ParseInt(sa.value(name), 10, 64)
	return n
}

func (sa *serverArgs) float(name string) float64 {
	f, _ := strconv.ParseFloat(sa.value(name), 64)
	return f
}

func (sa *serverArgs) size(name string) int64 {
	n, _ := parseSize(sa.value(name))
	return n
}

func checkFlagValue(k flagKind, v string) error {
	var err error
	switch k {
	case flagBool:
		_, err = strconv.ParseBool(v)
	case flagInt:
		var n int64
		if n, err = strconv.ParseInt(v, 10, 64); err == nil && n < 0 {
			err = fmt.Errorf("negative")
		}
	case flagFloat:
		var f float64
		if f, err = strconv.ParseFloat(v, 64); err == nil && (f <= 0 || math.IsInf(f, 0)) {
			err = fmt.Errorf("want a positive number")
		}
	case flagDuration:
		var d time.Duration
		if d, err = time.ParseDuration(v); err == nil && d <= 0 {
			err = fmt.Errorf("want a positive duration")
		}
	case flagSize:
		_, err = parseSize(v)
	case flagAddr:
		_, err = addrPort(v)
	}
	return err
}

// addrPort returns the port of a listen address such as ":8080".
func addrPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// parseSize reads a byte count with an optional binary unit K, M or G and
// an optional "i" and "B" after it (512M, 1GiB, 4096), as the sandbox
// command-line tool reads sizes.
func parseSize(s string) (int64, error) {
	num := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "b"), "i")
	mult := int64(1)
	if num != "" {
		switch num[len(num)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			num = num[:len(num)-1]
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want a number of bytes, optionally with K, M or G", s)
	}
	return n * mult, nil
}
