package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// requestOf returns a Request of kind with every field the kind needs
// set, and the others zero.
func requestOf(t *testing.T, kind RequestKind) Request {
	r := Request{ID: 9, Kind: kind}
	for _, name := range requestFields[kind].needs {
		setNonZero(t, name, reflect.ValueOf(&r).Elem().FieldByName(name))
	}
	return r
}

// TestRequestFieldsNameFields: every field of a Request belongs to some
// kind, and every name the kinds list is a field, so that a field added
// or renamed cannot slip past Check.
func TestRequestFieldsNameFields(t *testing.T) {
	carried := map[string]bool{}
	for kind, f := range requestFields {
		for _, name := range slices.Concat(f.needs, f.may) {
			if _, ok := reflect.TypeFor[Request]().FieldByName(name); !ok {
				t.Errorf("a %s request lists %s, which is no field of Request", kind, name)
			}
			carried[name] = true
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Request]()) {
		if f.Name != "ID" && f.Name != "Kind" && !carried[f.Name] {
			t.Errorf("Request.%s belongs to no kind: every request that sets it is refused", f.Name)
		}
	}
}

// TestRequestCheck: a request of each kind with what the kind needs
// passes, also through the spawner's socket; one without a field it
// needs, with a field of another kind, or of a kind the spawner does not
// know, is refused with an error that names the kind and the field.
func TestRequestCheck(t *testing.T) {
	refused := func(r Request, words ...string) {
		t.Helper()
		err := r.Check()
		if !errors.Is(err, ErrRequest) {
			t.Errorf("Check of %+v: %v, want an error wrapping ErrRequest", r, err)
			return
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Check of %+v: %q does not name %s", r, err, w)
			}
		}
	}
	for kind, f := range requestFields {
		r := requestOf(t, kind)
		if err := r.Check(); err != nil {
			t.Errorf("a %s request with what it needs: %v", kind, err)
		}
		enc, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		var back Request
		if err := json.Unmarshal(enc, &back); err != nil || back.Kind != kind || back.Check() != nil {
			t.Errorf("a %s request through the spawner's socket: %+v, %v", kind, back, err)
		}
		for _, name := range f.needs {
			r := requestOf(t, kind)
			reflect.ValueOf(&r).Elem().FieldByName(name).SetZero()
			refused(r, string(kind), name)
		}
		for _, field := range reflect.VisibleFields(reflect.TypeFor[Request]()) {
			if field.Name == "ID" || field.Name == "Kind" || slices.Contains(f.needs, field.Name) || slices.Contains(f.may, field.Name) {
				continue
			}
			r := requestOf(t, kind)
			setNonZero(t, field.Name, reflect.ValueOf(&r).Elem().FieldByIndex(field.Index))
			refused(r, string(kind), field.Name)
		}
	}
	refused(Request{ID: 1}, `""`)
	refused(Request{ID: 1, Kind: "restart"}, `"restart"`)
	// The kind of a request is its Kind, never what its fields suggest.
	refused(Request{ID: 1, Kind: Kill, Signal: 9}, "kill", "Signal")
	refused(Request{ID: 1, Kind: Fill, Spec: &Spec{}, Pool: -1}, "fill", "Pool")
	refused(Request{ID: 1, Kind: Dial, Live: 2, Network: "tcp4", Address: "127.0.0.1:1", DialTimeout: -1}, "dial", "DialTimeout")
}
