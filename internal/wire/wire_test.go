package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestSpecKeyCoversEveryField: the spawner's pool takes a prepared sandbox
// for a run only when the run's encoded Spec equals the pool's, so every
// field of Spec must change the encoding; a field left out of it (json:"-",
// unexported) would let a run take a sandbox built without it. Each field
// in turn is set to a value other than its zero, and the encoding must
// differ from the zero Spec's and from every other field's.
func TestSpecKeyCoversEveryField(t *testing.T) {
	zero, err := json.Marshal(&Spec{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{string(zero): "the zero Spec"}
	typ := reflect.TypeFor[Spec]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var s Spec
		v := reflect.ValueOf(&s).Elem().Field(i)
		if !v.CanSet() {
			t.Errorf("Spec.%s is unexported: the encoding, and so the pool's key, leaves it out", f.Name)
			continue
		}
		setNonZero(t, f.Name, v)
		enc, err := json.Marshal(&s)
		if err != nil {
			t.Fatalf("Spec.%s: %v", f.Name, err)
		}
		if other, ok := seen[string(enc)]; ok {
			t.Errorf("a Spec with only %s set encodes as %s does: %s", f.Name, other, enc)
		}
		seen[string(enc)] = "Spec." + f.Name
		var back Spec
		if err := json.Unmarshal(enc, &back); err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("Spec.%s does not survive its encoding: %+v, %v", f.Name, back, err)
		}
	}
}

// setNonZero sets v, a field of a zero Spec, to a value other than zero.
func setNonZero(t *testing.T, name string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint8, reflect.Uint64:
		v.SetUint(7)
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		if e.Kind() == reflect.Struct {
			setNonZero(t, name, e.Field(0))
		} else {
			setNonZero(t, name, e)
		}
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	default:
		t.Fatalf("Spec.%s: no non-zero value for a %s; add one here", name, v.Type())
	}
}

// TestRequestCarriesSpecBytes: the Spec a caller encodes reaches the
// spawner as those very bytes, which the pool compares.
func TestRequestCarriesSpecBytes(t *testing.T) {
	spec, err := json.Marshal(&Spec{Hostname: "a<b>&c", Binds: []Bind{{Source: "/s", Target: "/t"}}, Seccomp: []byte{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := json.Marshal(Request{ID: 1, Spec: spec, Program: &Program{Path: "/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	var got Request
	if err := json.Unmarshal(msg, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Spec, spec) {
		t.Errorf("the spawner read the Spec as\n%s\nthe caller encoded\n%s", got.Spec, spec)
	}
}
