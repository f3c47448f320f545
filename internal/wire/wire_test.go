package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestSpecEqualCoversEveryField: the spawner's pool gives a prepared
// sandbox only to a run whose Spec is Equal to the one it was prepared
// from, so Equal must tell apart Specs that differ in any one field; one
// it left out would let a run take a sandbox built without what it asked
// for. Each field in turn is set to a value other than its zero (for a
// slice, an empty one too); the Spec must not be Equal to the zero Spec,
// must be Equal to itself and to its copy through the spawner's socket.
func TestSpecEqualCoversEveryField(t *testing.T) {
	typ := reflect.TypeFor[Spec]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var s Spec
		v := reflect.ValueOf(&s).Elem().Field(i)
		if !v.CanSet() {
			t.Errorf("Spec.%s is unexported: it does not reach the spawner", f.Name)
			continue
		}
		variants := []func(){func() { setNonZero(t, f.Name, v) }}
		if v.Kind() == reflect.Slice {
			variants = append(variants, func() { v.Set(reflect.MakeSlice(v.Type(), 0, 0)) })
		}
		for _, set := range variants {
			v.SetZero()
			set()
			if s.Equal(&Spec{}) || (&Spec{}).Equal(&s) {
				t.Errorf("a Spec with only %s set to %v is Equal to the zero Spec", f.Name, v)
			}
			c := s
			if !s.Equal(&c) {
				t.Errorf("a Spec with only %s set is not Equal to its copy", f.Name)
			}
			enc, err := json.Marshal(&s)
			if err != nil {
				t.Fatalf("Spec.%s: %v", f.Name, err)
			}
			var back Spec
			if err := json.Unmarshal(enc, &back); err != nil || !back.Equal(&s) {
				t.Errorf("Spec.%s = %v does not survive the spawner's socket: %+v, %v", f.Name, v, back, err)
			}
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
	case reflect.Uint8, reflect.Uint16, reflect.Uint64:
		v.SetUint(7)
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		setNonZero(t, name, e)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Struct:
		for i := range v.NumField() {
			setNonZero(t, name, v.Field(i))
		}
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		setNonZero(t, name, e.Elem())
		v.Set(e)
	default:
		t.Fatalf("Spec.%s: no non-zero value for a %s; add one here", name, v.Type())
	}
}

// TestSpecEqualFieldByField: Specs that differ in one part of a field (a
// Bind's Writable, a window's Cols, a byte of the filter) are not Equal.
func TestSpecEqualFieldByField(t *testing.T) {
	base := func() Spec {
		return Spec{Binds: []Bind{{Source: "/s", Target: "/t"}}, Terminal: &Winsize{Rows: 24, Cols: 80}, Seccomp: []byte{1, 2, 3}}
	}
	for name, change := range map[string]func(s *Spec){
		"Binds[0].Writable": func(s *Spec) { s.Binds[0].Writable = true },
		"a second Bind":     func(s *Spec) { s.Binds = append(s.Binds, s.Binds[0]) },
		"Terminal.Cols":     func(s *Spec) { s.Terminal.Cols = 81 },
		"Terminal nil":      func(s *Spec) { s.Terminal = nil },
		"Seccomp[2]":        func(s *Spec) { s.Seccomp[2] = 4 },
		"Seccomp nil":       func(s *Spec) { s.Seccomp = nil },
	} {
		a, b := base(), base()
		if !a.Equal(&b) {
			t.Fatal("two Specs built alike are not Equal")
		}
		change(&b)
		if a.Equal(&b) || b.Equal(&a) {
			t.Errorf("Specs that differ in %s are Equal", name)
		}
	}
}
