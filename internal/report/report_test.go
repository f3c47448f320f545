package report

import (
	"encoding/json"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// TestRoundTrip marshals each shape and reads it back: what a process
// writes is what the next one reads.
func TestRoundTrip(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, v := range []any{
		&Limit{Name: "memory", Value: "536870912 bytes", Enforced: true, By: "cgroup v2"},
		&Denial{Syscall: "ptrace", Errno: syscall.EPERM, Count: 3},
		&Denial{Syscall: "syscall_999", Errno: 4095, Count: 1},
		&Connection{Host: "pypi.org", Port: 443, Method: "CONNECT", Allowed: true, Reason: "pypi.org", Addr: "1.2.3.4:443",
			Status: 200, BytesUp: 10, BytesDown: 20, Start: start, Duration: 1500 * time.Millisecond},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(b, got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%s read back as %+v, want %+v", b, got, v)
		}
	}
}

// TestDenialJSON checks the names JSON readers see: the errno's symbolic
// name, and a number where there is none.
func TestDenialJSON(t *testing.T) {
	for d, want := range map[Denial]string{
		{Syscall: "ptrace", Errno: syscall.EPERM, Count: 2}: `{"syscall":"ptrace","count":2,"errno":"EPERM"}`,
		{Syscall: "x", Errno: 4095, Count: 1}:               `{"syscall":"x","count":1,"errno":"errno 4095"}`,
	} {
		b, err := json.Marshal(d)
		if err != nil || string(b) != want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", d, b, err, want)
		}
	}
	var d Denial
	if err := json.Unmarshal([]byte(`{"syscall":"x","errno":"ENOTANERRNO","count":1}`), &d); err == nil {
		t.Errorf("an unknown errno name read as %+v, want an error", d)
	}
}
