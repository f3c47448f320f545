package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// A Problem is one thing wrong with the deployment files, named by file
// and by the path of the field in it.
type Problem struct {
	File  string // relative to deploy/, e.g. "kubernetes/service.yaml"
	Field string // e.g. "spec.ports[0].targetPort"; "" for the file as a whole
	Msg   string
}

// String says the file, the field and what is wrong, as "file: field: msg".
func (p Problem) String() string {
	if p.Field == "" {
		return p.File + ": " + p.Msg
	}
	return p.File + ": " + p.Field + ": " + p.Msg
}

// kinds are the manifests the validator knows, by "apiVersion kind", each
// with the Go type it decodes into. A kind missing here fails: a manifest
// nobody checks is a manifest that can break unnoticed.
var kinds = map[string]func() any{
	"apps/v1 Deployment":                     func() any { return new(appsv1.Deployment) },
	"apps/v1 StatefulSet":                    func() any { return new(appsv1.StatefulSet) },
	"v1 Service":                             func() any { return new(corev1.Service) },
	"autoscaling/v2 HorizontalPodAutoscaler": func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"policy/v1 PodDisruptionBudget":          func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1 NetworkPolicy":     func() any { return new(networkingv1.NetworkPolicy) },
	// The agent-sandbox controller's (agentsandbox.go).
	"agents.x-k8s.io/v1beta1 Sandbox":                    func() any { return new(Sandbox) },
	"extensions.agents.x-k8s.io/v1beta1 SandboxTemplate": func() any { return new(SandboxTemplate) },
	"extensions.agents.x-k8s.io/v1beta1 SandboxWarmPool": func() any { return new(SandboxWarmPool) },
}

// knownKinds lists kinds for messages.
func knownKinds() string {
	var k []string
	for name := range kinds {
		k = append(k, name)
	}
	sort.Strings(k)
	return strings.Join(k, ", ")
}

// splitDocuments splits a YAML stream at its "---" lines and drops the
// documents that hold nothing but comments and blank lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimRight(line, " \t\r\n")
		if t == "---" || strings.HasPrefix(t, "--- ") {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

// decodeManifest decodes one YAML document strictly into the Go type of
// its kind. Problems name file and, where one is at fault, the field.
func decodeManifest(file string, doc []byte) (any, []Problem) {
	// YAMLToJSONStrict refuses a key given twice, which a plain YAML
	// decoder would resolve silently to the last one.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, []Problem{{File: file, Msg: "not valid YAML: " + oneLine(err.Error())}}
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(j, &meta); err != nil {
		return nil, []Problem{{File: file, Msg: fmt.Sprintf("not a Kubernetes object: %v", err)}}
	}
	newObj, ok := kinds[meta.APIVersion+" "+meta.Kind]
	if !ok {
		return nil, []Problem{{File: file, Field: "kind", Msg: fmt.Sprintf("%q %q is not a kind this validator checks (it knows %s)", meta.APIVersion, meta.Kind, knownKinds())}}
	}
	obj := newObj()
	if ps := decodeStrict(file, j, obj); len(ps) > 0 {
		return nil, ps
	}
	return obj, nil
}

// decodeStrict decodes the JSON j into obj, refusing fields obj's type does
// not have. encoding/json matches names regardless of case, which the API
// server does not ("Procmount" is not "procMount"), and names an unknown
// field without saying where it is; so unknownFields walks the document
// along the type first, matching names exactly and giving each stray
// field's full path, and the decoder then catches values of the wrong type.
func decodeStrict(file string, j []byte, obj any) []Problem {
	var tree any
	if err := json.Unmarshal(j, &tree); err != nil {
		return []Problem{{File: file, Msg: fmt.Sprintf("not JSON after conversion from YAML: %v", err)}}
	}
	var paths []string
	unknownFields(tree, reflect.TypeOf(obj), "", &paths)
	if len(paths) > 0 {
		var ps []Problem
		for _, p := range paths {
			ps = append(ps, Problem{File: file, Field: p, Msg: fmt.Sprintf("unknown field (%T has no such field)", obj)})
		}
		return ps
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	err := dec.Decode(obj)
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return []Problem{{File: file, Field: te.Field, Msg: fmt.Sprintf("a JSON %s where %T wants %s", te.Value, obj, te.Type)}}
	}
	return []Problem{{File: file, Msg: fmt.Sprintf("does not decode into %T: %v", obj, err)}}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// unknownFields appends to paths the path of every key in the decoded JSON
// v that type t has no field for, following encoding/json's rules: fields
// by their json tag (or name), embedded and ",inline" structs flattened
// into their parent. A type with its own UnmarshalJSON (Quantity,
// IntOrString, Time) is a leaf.
func unknownFields(v any, t reflect.Type, path string, paths *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := map[string]reflect.Type{}
		jsonFields(t, fields)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				*paths = append(*paths, p)
				continue
			}
			unknownFields(m[k], ft, p, paths)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, e := range m {
			unknownFields(e, t.Elem(), path+"["+strconv.Quote(k)+"]", paths)
		}
	case reflect.Slice, reflect.Array:
		s, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range s {
			unknownFields(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", paths)
		}
	}
}

// jsonFields adds the JSON names of struct type t's fields to fields.
func jsonFields(t reflect.Type, fields map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		inline := strings.Contains(","+opts+",", ",inline,") || (f.Anonymous && name == "")
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
}

// oneLine joins a multi-line message (the YAML decoder's) into one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
