package seccompprofile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fumehood/sandbox"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// FromDocker converts a seccomp profile in Docker's JSON format
// (moby's profiles/seccomp, as `docker run --security-opt seccomp=FILE`
// takes it) to a policy, as FromOCI does once Docker's own fields
// are resolved the way moby resolves them for a container with no
// capabilities, on this host:
//
//   - "name" is a one-syscall "names"; a rule must not have both.
//   - archMap, if given (and architectures not), contributes the entry for
//     this host's architecture and its subArchitectures.
//   - A rule whose includes.caps names any capability does not apply (the
//     program holds none); excludes.caps never excludes.
//   - includes.arches and excludes.arches are matched against this host's
//     architecture in moby's spelling ("amd64", "arm64"), not against
//     sub-architectures.
//   - includes.minKernel and excludes.minKernel ("<kernel>.<major>", e.g.
//     "5.8") are compared with the running kernel's version. An empty
//     minKernel is no condition.
//
// Fields this package does not know are ignored, as Docker adds fields over
// time; a field of the wrong JSON type is a *Error naming it.
// Unlike Docker, an empty profile does not turn the filter off: it is an
// error for want of a defaultAction.
func FromDocker(data []byte) (*sandbox.SeccompPolicy, []string, error) {
	var d dockerProfile
	if err := decodeJSON("", data, &d); err != nil {
		return nil, nil, err
	}
	prof := &profile{
		defaultAction:    d.DefaultAction,
		defaultErrnoRet:  d.DefaultErrnoRet,
		listenerPath:     d.ListenerPath,
		listenerMetadata: d.ListenerMetadata,
	}
	arches, err := decodeStrings("architectures", d.Architectures)
	if err != nil {
		return nil, nil, err
	}
	prof.arches = arches
	archMap, err := decodeList("archMap", d.ArchMap)
	if err != nil {
		return nil, nil, err
	}
	if len(arches) > 0 && len(archMap) > 0 {
		return nil, nil, &Error{Field: "archMap", Reason: "is given with architectures; use one"}
	}
	for i, raw := range archMap {
		path := fmt.Sprintf("archMap[%d]", i)
		var m dockerArchMap
		if err := decodeJSON(path, raw, &m); err != nil {
			return nil, nil, err
		}
		subs, err := decodeStrings(path+".subArchitectures", m.SubArchitectures)
		if err != nil {
			return nil, nil, err
		}
		if m.Architecture == string(nativeOCIArch()) && len(prof.arches) == 0 {
			prof.arches = append([]field{{path + ".architecture", m.Architecture}}, subs...)
		}
	}
	if prof.flags, err = decodeStrings("flags", d.Flags); err != nil {
		return nil, nil, err
	}
	syscalls, err := decodeList("syscalls", d.Syscalls)
	if err != nil {
		return nil, nil, err
	}
	kernel := sync.OnceValues(runningKernel)
	for i, raw := range syscalls {
		e, applies, err := decodeDockerSyscall(fmt.Sprintf("syscalls[%d]", i), raw, kernel)
		if err != nil {
			return nil, nil, err
		}
		if applies {
			prof.syscalls = append(prof.syscalls, e)
		}
	}
	return prof.policy()
}

// Docker's profile format, as far as the sandbox reads it. Lists are kept
// raw and decoded one element at a time, so that an error names the
// element: encoding/json's own paths have no indexes.
type dockerProfile struct {
	DefaultAction    specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet  *uint                    `json:"defaultErrnoRet"`
	Architectures    json.RawMessage          `json:"architectures"`
	ArchMap          json.RawMessage          `json:"archMap"`
	Flags            json.RawMessage          `json:"flags"`
	ListenerPath     string                   `json:"listenerPath"`
	ListenerMetadata string                   `json:"listenerMetadata"`
	Syscalls         json.RawMessage          `json:"syscalls"`
}

type dockerArchMap struct {
	Architecture     string          `json:"architecture"`
	SubArchitectures json.RawMessage `json:"subArchitectures"`
}

type dockerSyscall struct {
	Name     string                   `json:"name"`
	Names    json.RawMessage          `json:"names"`
	Action   specs.LinuxSeccompAction `json:"action"`
	ErrnoRet *uint                    `json:"errnoRet"`
	Args     json.RawMessage          `json:"args"`
	Comment  string                   `json:"comment"`
	Includes json.RawMessage          `json:"includes"`
	Excludes json.RawMessage          `json:"excludes"`
}

type dockerFilter struct {
	Caps      json.RawMessage `json:"caps"`
	Arches    json.RawMessage `json:"arches"`
	MinKernel *string         `json:"minKernel"`
}

// decodeDockerSyscall decodes the entry at path, and says whether it
// applies to the sandbox's program on this host.
func decodeDockerSyscall(path string, raw json.RawMessage, kernel func() (kernelVersion, error)) (profileSyscall, bool, error) {
	e := profileSyscall{field: path}
	var d dockerSyscall
	if err := decodeJSON(path, raw, &d); err != nil {
		return e, false, err
	}
	e.action, e.errnoRet = d.Action, d.ErrnoRet
	names, err := decodeStrings(path+".names", d.Names)
	if err != nil {
		return e, false, err
	}
	switch {
	case d.Name != "" && len(names) > 0:
		return e, false, &Error{Field: path, Reason: "has both name and names; use one"}
	case d.Name != "":
		e.names = []field{{path + ".name", d.Name}}
	default:
		e.names = names
	}
	args, err := decodeList(path+".args", d.Args)
	if err != nil {
		return e, false, err
	}
	e.args = make([]specs.LinuxSeccompArg, len(args))
	for i, a := range args {
		if err := decodeJSON(fmt.Sprintf("%s.args[%d]", path, i), a, &e.args[i]); err != nil {
			return e, false, err
		}
	}
	// moby's order: excludes (arches, caps, minKernel), then includes.
	excludes, err := decodeDockerFilter(path+".excludes", d.Excludes)
	if err != nil {
		return e, false, err
	}
	includes, err := decodeDockerFilter(path+".includes", d.Includes)
	if err != nil {
		return e, false, err
	}
	if slices.Contains(excludes.arches, runtime.GOARCH) {
		return e, false, nil
	}
	if excludes.minKernel != nil {
		k, err := kernel()
		if err != nil {
			return e, false, minKernelErr(path+".excludes", err)
		}
		if !k.less(*excludes.minKernel) {
			return e, false, nil
		}
	}
	if len(includes.arches) > 0 && !slices.Contains(includes.arches, runtime.GOARCH) {
		return e, false, nil
	}
	if len(includes.caps) > 0 {
		return e, false, nil
	}
	if includes.minKernel != nil {
		k, err := kernel()
		if err != nil {
			return e, false, minKernelErr(path+".includes", err)
		}
		if k.less(*includes.minKernel) {
			return e, false, nil
		}
	}
	return e, true, nil
}

// dockerConditions is a decoded includes or excludes.
type dockerConditions struct {
	caps, arches []string
	minKernel    *kernelVersion
}

func decodeDockerFilter(path string, raw json.RawMessage) (dockerConditions, error) {
	var c dockerConditions
	var f dockerFilter
	if err := decodeJSON(path, raw, &f); err != nil {
		return c, err
	}
	caps, err := decodeStrings(path+".caps", f.Caps)
	if err != nil {
		return c, err
	}
	arches, err := decodeStrings(path+".arches", f.Arches)
	if err != nil {
		return c, err
	}
	for _, f := range caps {
		c.caps = append(c.caps, f.value)
	}
	for _, f := range arches {
		c.arches = append(c.arches, f.value)
	}
	if f.MinKernel != nil && *f.MinKernel != "" {
		v, ok := parseMinKernel(*f.MinKernel)
		if !ok {
			return c, &Error{Field: path + ".minKernel", Value: *f.MinKernel, Reason: `is not "<kernel>.<major>", e.g. "5.8"`}
		}
		c.minKernel = &v
	}
	return c, nil
}

// minKernelErr says that the minKernel under path cannot be checked.
func minKernelErr(path string, err error) error {
	return &sandbox.UnsupportedError{Feature: "seccomp profile " + path + ".minKernel", Reason: "the running kernel's version is unknown",
		Err: err, Hint: "convert Docker profiles on the Linux host that runs the sandbox"}
}

// kernelVersion is a kernel's version and major revision: 5 and 8 in
// "5.8.0-63-generic".
type kernelVersion struct {
	kernel, major uint64
}

// less reports whether k is older than v.
func (k kernelVersion) less(v kernelVersion) bool {
	return k.kernel < v.kernel || k.kernel == v.kernel && k.major < v.major
}

// parseMinKernel parses a minKernel as moby does: two numbers below 256,
// not both 0.
func parseMinKernel(s string) (kernelVersion, bool) {
	a, b, ok := strings.Cut(s, ".")
	if !ok || strings.Contains(b, ".") {
		return kernelVersion{}, false
	}
	k, err1 := strconv.ParseUint(a, 10, 8)
	m, err2 := strconv.ParseUint(b, 10, 8)
	if err1 != nil || err2 != nil || k == 0 && m == 0 {
		return kernelVersion{}, false
	}
	return kernelVersion{k, m}, true
}

// kernelRelease returns the running kernel's release, as uname -r prints
// it. A variable, for tests.
var kernelRelease = func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b)), err
}

// runningKernel is the running kernel's version and major revision.
func runningKernel() (kernelVersion, error) {
	rel, err := kernelRelease()
	if err != nil {
		return kernelVersion{}, err
	}
	var k kernelVersion
	if _, err := fmt.Sscanf(rel, "%d.%d", &k.kernel, &k.major); err != nil {
		return kernelVersion{}, fmt.Errorf("release %q: %w", rel, err)
	}
	return k, nil
}

// decodeJSON decodes data into v, and words a type error as a
// *Error naming the field under path.
func decodeJSON(path string, data []byte, v any) error {
	if len(data) == 0 {
		return nil // a json.RawMessage the profile left out
	}
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		at := path
		if te.Field != "" {
			if at != "" {
				at += "."
			}
			at += te.Field
		}
		return &Error{Field: at, Reason: "is a JSON " + te.Value + ", want " + jsonWant(te.Type)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &Error{Field: path, Reason: fmt.Sprintf("is not JSON: %v (at byte %d)", se, se.Offset)}
	}
	return &Error{Field: path, Reason: "cannot be read: " + err.Error()}
}

// jsonWant describes the JSON value a Go type takes.
func jsonWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an unsigned integer"
	case reflect.Slice:
		return "an array"
	case reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonWant(t.Elem())
	}
	return t.String()
}

// decodeList decodes a JSON array (or null) into its elements.
func decodeList(path string, raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	err := decodeJSON(path, raw, &items)
	return items, err
}

// decodeStrings decodes a JSON array of strings, each with its path.
func decodeStrings(path string, raw json.RawMessage) ([]field, error) {
	items, err := decodeList(path, raw)
	if err != nil {
		return nil, err
	}
	out := make([]field, len(items))
	for i, it := range items {
		out[i].path = fmt.Sprintf("%s[%d]", path, i)
		if err := decodeJSON(out[i].path, it, &out[i].value); err != nil {
			return nil, err
		}
	}
	return out, nil
}
