package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fumehood/sandbox"
)

const (
	// maxBody caps a request body, in bytes.
	maxBody = 1 << 20
	// maxCode caps "code": it travels as one argument of the interpreter
	// (sh -c CODE), and the kernel refuses an argument of 128 KiB or more.
	maxCode = 128<<10 - 1
)

// runRequest is the body of POST /v1/runs. Either Command, or Code with
// Language, says what to run.
type runRequest struct {
	Command  []string          `json:"command"`  // argv, looked up in the sandbox's PATH
	Code     string            `json:"code"`     // a program's text, run with Language's interpreter
	Language string            `json:"language"` // "sh", "bash" or "python"
	Stdin    string            `json:"stdin"`    // the program's standard input; empty means /dev/null
	Env      map[string]string `json:"env"`      // added to PATH, HOME and LANG
	Limits   requestLimits     `json:"limits"`
	Network  string            `json:"network"` // "none" (the default) or "allow"
	Egress   []string          `json:"egress"`  // with "allow": entries of the server's -egress list
	// SeccompKill ends the run at the first refused syscall (cause
	// seccomp_kill) instead of failing that syscall with EPERM.
	SeccompKill bool `json:"seccomp_kill"`
	// Secrets names secrets of the tenant's policy to give the sandbox:
	// each an environment variable holding a placeholder, which the
	// egress proxy replaces with the value on the way to its hosts.
	Secrets []string `json:"secrets"`
	// Stream asks for output as it comes, as JSON lines (as does the
	// header Accept: application/x-ndjson).
	Stream bool `json:"stream"`
}

// requestLimits are a request's limits. An omitted (or zero) limit is the
// server's maximum, except the timeout, which is -default-timeout.
type requestLimits struct {
	Timeout quantity `json:"timeout"` // "5s", "1m30s", or a number of seconds
	Memory  quantity `json:"memory"`  // bytes, or "64M", "1G" (powers of 1024)
	CPUs    float64  `json:"cpus"`    // CPUs' worth of time, e.g. 0.5
	Pids    int64    `json:"pids"`    // processes and threads
	Output  quantity `json:"output"`  // bytes kept of each of stdout and stderr, as memory
}

// quantity is a JSON number or string, kept as text and parsed by validate,
// so that a wrong value is reported with the field it is in.
type quantity string

// UnmarshalJSON keeps a string's content, and anything else as it is
// written. It never fails; validate does.
func (q *quantity) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*q = quantity(s)
	} else {
		*q = quantity(b)
	}
	return nil
}

// limitSet is a request's resolved limits that become sandbox.Options. It is
// comparable: equal sets can share a Sandbox.
type limitSet struct {
	memory, pids, output int64
	cpus                 float64
	seccompKill          bool
}

// runSpec is a validated request.
type runSpec struct {
	argv     []string
	language string // "" for a command
	env      []string
	stdin    string
	timeout  time.Duration
	limits   limitSet
	egress   []string // nil: network "none"
	stream   bool
	session  string // the session's id, for a run in one
	secrets  []sandbox.Secret
}

// apiError is a request the server refuses: the HTTP status, the request
// field at fault (if one is), and why.
type apiError struct {
	status int
	field  string
	msg    string
	// quota names the tenant's quota a 429 is for ("sessions", "runs",
	// "rate"), retry when to try again; empty for the server's own.
	quota string
	retry time.Duration
	label string // the tenant's label in metrics, for a quota's
}

func (e *apiError) Error() string { return e.msg }

func badField(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, field: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

// decodeRequest reads a run's request body strictly: see decodeJSON.
func decodeRequest(body io.Reader) (*runRequest, *apiError) {
	var req runRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		return nil, aerr
	}
	return &req, nil
}

// decodeJSON reads a request body into v strictly: one JSON object, no
// unknown fields, at most maxBody bytes (the caller wraps body in a
// MaxBytesReader).
func decodeJSON(body io.Reader, v any) *apiError {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		return badField("body", "holds more than one JSON value")
	}
	var tooLarge *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, field: "body",
			msg: fmt.Sprintf("body: larger than %d bytes", tooLarge.Limit)}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return badField(typeErr.Field, "want %s, not %s", jsonType(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return badField(name, "unknown field")
	}
	return badField("body", "not a JSON object: %v", err)
}

// jsonType names a Go kind as JSON calls it.
func jsonType(kind string) string {
	switch kind {
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int64", "int", "float64":
		return "a number"
	}
	return kind
}

// language is how code in one language is run.
type language struct {
	argv    []string // the interpreter's argv, before the code
	missing string   // why this host cannot run it; "" when it can
}

// validate checks req against the server's maxima and resolves it.
func (c *config) validate(req *runRequest, languages map[string]language) (*runSpec, *apiError) {
	spec := &runSpec{stdin: req.Stdin, stream: req.Stream}
	lang, known := languages[req.Language]
	names := strings.Join(slices.Sorted(maps.Keys(languages)), ", ")
	switch {
	case len(req.Command) > 0 && (req.Code != "" || req.Language != ""):
		return nil, badField("command", "give either command, or code with language, not both")
	case len(req.Command) > 0:
		for i, a := range req.Command {
			if strings.ContainsRune(a, 0) || (i == 0 && a == "") {
				return nil, badField(fmt.Sprintf("command[%d]", i), "must be a non-empty string without NUL")
			}
		}
		spec.argv = req.Command
	case req.Code == "" && req.Language == "":
		return nil, badField("command", "missing: give command (an argv array), or code with language")
	case req.Language == "":
		return nil, badField("language", "missing: say which language code is in (%s)", names)
	case !known:
		return nil, badField("language", "%q is not one of %s", req.Language, names)
	case lang.missing != "":
		// Known, but not here: the server, not the request, lacks it.
		return nil, &apiError{status: http.StatusNotImplemented, field: "language",
			msg: fmt.Sprintf("language: %q is not available on this server: %s", req.Language, lang.missing)}
	case req.Code == "":
		return nil, badField("code", "missing: the %s program to run", req.Language)
	case len(req.Code) > maxCode || strings.ContainsRune(req.Code, 0):
		return nil, badField("code", "must be at most %d bytes, without NUL", maxCode)
	default:
		spec.argv = append(slices.Clone(lang.argv), req.Code)
		spec.language = req.Language
	}
	var err *apiError
	if spec.env, err = envOf(req.Env); err != nil {
		return nil, err
	}
	if spec.timeout, err = c.timeoutOf(req.Limits.Timeout); err != nil {
		return nil, err
	}
	if spec.limits, spec.egress, err = c.sandboxOf(req.Limits, req.Network, req.Egress, req.SeccompKill); err != nil {
		return nil, err
	}
	if spec.secrets, err = c.secretsOf(req.Secrets); err != nil {
		return nil, err
	}
	return spec, nil
}

// envOf checks a request's env and makes it a Cmd's or the Options' Env.
func envOf(env map[string]string) ([]string, *apiError) {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(env[k], 0) {
			return nil, badField("env", "%q: want a name without '=' or NUL and a value without NUL", k)
		}
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// sandboxOf resolves what a request asks of the sandbox itself, its limits
// but the timeout and its network, against the server's maxima. egress is
// nil for network "none".
func (c *config) sandboxOf(l requestLimits, network string, reqEgress []string, seccompKill bool) (limits limitSet, egress []string, err *apiError) {
	if limits.memory, err = sizeField("limits.memory", l.Memory, c.maxMemory, sandbox.MinMemory, c.whose()); err != nil {
		return limitSet{}, nil, err
	}
	if limits.output, err = sizeField("limits.output", l.Output, c.maxOutput, 1, c.whose()); err != nil {
		return limitSet{}, nil, err
	}
	switch cpus := l.CPUs; {
	case cpus == 0:
		limits.cpus = c.maxCPUs
	case cpus < 0.01:
		return limitSet{}, nil, badField("limits.cpus", "%v: must be at least 0.01", cpus)
	case cpus > c.maxCPUs:
		return limitSet{}, nil, badField("limits.cpus", "%v is above %s maximum %v", cpus, c.whose(), c.maxCPUs)
	default:
		limits.cpus = cpus
	}
	switch pids := l.Pids; {
	case pids == 0:
		limits.pids = c.maxPids
	case pids < 0:
		return limitSet{}, nil, badField("limits.pids", "%d: must be positive", pids)
	case pids > c.maxPids:
		return limitSet{}, nil, badField("limits.pids", "%d is above %s maximum %d", pids, c.whose(), c.maxPids)
	default:
		limits.pids = pids
	}
	limits.seccompKill = seccompKill

	switch network {
	case "", "none":
		if len(reqEgress) > 0 {
			return limitSet{}, nil, badField("egress", "needs network \"allow\"")
		}
	case "allow":
		if len(c.egress) == 0 {
			return limitSet{}, nil, badField("network", "\"allow\" is not offered: %s %s list is empty", c.whose(), c.listName("egress"))
		}
		if len(reqEgress) == 0 {
			return limitSet{}, nil, badField("egress", "missing: network \"allow\" needs the hosts to allow, from %s", strings.Join(c.egress, ","))
		}
		for i, e := range reqEgress {
			if !slices.Contains(c.egress, e) {
				return limitSet{}, nil, badField(fmt.Sprintf("egress[%d]", i), "%q is not in %s %s list %s", e, c.whose(), c.listName("egress"), strings.Join(c.egress, ","))
			}
		}
		egress = reqEgress
	default:
		return limitSet{}, nil, badField("network", "%q: want \"none\" or \"allow\"", network)
	}
	return limits, egress, nil
}

// timeoutOf resolves limits.timeout: a Go duration ("5s") or a number of
// seconds; empty means -default-timeout.
func (c *config) timeoutOf(q quantity) (time.Duration, *apiError) {
	s := string(q)
	if s == "" {
		return c.defaultTimeout, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		// Seconds, checked before they are converted, which could overflow.
		if !(f > 0) || f > c.maxTimeout.Seconds() {
			return 0, badField("limits.timeout", "%s: want more than 0 and at most %s maximum %s", s, c.whose(), c.maxTimeout)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, badField("limits.timeout", "%q: want a duration such as \"5s\" or a number of seconds", s)
	case d <= 0:
		return 0, badField("limits.timeout", "%q: must be positive", s)
	case d > c.maxTimeout:
		return 0, badField("limits.timeout", "%q is above %s maximum %s", s, c.whose(), c.maxTimeout)
	}
	return d, nil
}

// sizeField resolves a size limit; empty means the maximum.
func sizeField(field string, q quantity, maximum, minimum int64, whose string) (int64, *apiError) {
	if q == "" {
		return maximum, nil
	}
	n, err := parseSize(string(q))
	switch {
	case err != nil:
		return 0, badField(field, "%v", err)
	case n < minimum:
		return 0, badField(field, "%q: must be at least %s", q, formatSize(minimum))
	case n > maximum:
		return 0, badField(field, "%q is above %s maximum %s", q, whose, formatSize(maximum))
	}
	return n, nil
}

// parseSize reads a positive number of bytes, optionally with the unit K,
// M or G (powers of 1024, either case), which "i", "B" or "iB" may follow:
// 4096, 64K, 512M, 1GiB.
func parseSize(s string) (int64, error) {
	num, mult := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"), int64(1)
	if i := strings.LastIndexAny(num, "KMG"); i >= 0 && i == len(num)-1 {
		mult = 1 << (10 * (strings.IndexByte("KMG", num[i]) + 1))
		num = num[:i]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want a positive whole number of bytes, optionally with K, M or G (e.g. 64M)", s)
	}
	return n * mult, nil
}

// formatSize writes n bytes in the largest of G, M and K that divides it.
func formatSize(n int64) string {
	for i, u := range []string{"G", "M", "K"} {
		if size := int64(1) << (10 * (3 - i)); n%size == 0 {
			return strconv.FormatInt(n/size, 10) + u
		}
	}
	return strconv.FormatInt(n, 10)
}
