package sandbox

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResultJSONRoundTrip marshals a Result with every field set and reads
// it back: the shape the CLI, the MCP server and the service write is one
// a program reading it can turn back into the same Result.
func TestResultJSONRoundTrip(t *testing.T) {
	full := &Result{
		Outcome: SeccompKilled, ExitCode: -1, Signal: syscall.SIGSYS,
		Stdout: Output("out\n"), Stderr: Output("err \"quoted\" \x01\n"), StdoutTruncated: true, StdoutBytes: 1 << 20, StderrBytes: 16,
		WallTime: 1500 * time.Millisecond, UserTime: 2 * time.Millisecond, SystemTime: 3 * time.Millisecond, MaxRSS: 4 << 20,
		Pooled: true, CgroupCPU: 5 * time.Millisecond, CPUTime: 5 * time.Millisecond, MemoryPeak: 6 << 20, OOMKills: 1, PidsLimitHit: true,
		Limits:    []Limit{{Name: "memory", Value: "536870912 bytes", Enforced: true, By: "cgroup v2"}},
		Denials:   []Denial{{Syscall: "ptrace", Errno: syscall.EPERM, Count: 2}, {Syscall: "syscall_999", Errno: 4095, Count: 1}},
		Violation: "unshare",
		Connections: []Connection{{Host: "pypi.org", Port: 443, Method: "CONNECT", Allowed: true, Reason: "pypi.org",
			Addr: "151.101.0.223:443", Status: 200, BytesUp: 100, BytesDown: 200,
			Start: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Duration: time.Second}},
		ConnectionsDropped: 3,
		Changes: []Change{{Path: "a.py", Kind: ChangeAdded, Size: 5, Mode: 0o644},
			{Path: "d", Kind: ChangeDeleted, Mode: fs.ModeDir | fs.ModeSticky | 0o777}},
		ChangesDropped: 7,
	}
	for _, r := range []*Result{full, {}} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var got Result
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if !reflect.DeepEqual(&got, r) {
			t.Errorf("%s read back as\n%+v, want\n%+v", b, &got, r)
		}
	}

	b, _ := json.Marshal(full)
	for _, want := range []string{`"outcome":"seccomp kill"`, `"stdout":"out\n"`, `"wall_time_ns":1500000000`,
		`"max_rss_bytes":4194304`, `"errno":"EPERM"`, `"errno":"errno 4095"`, `"duration_ns":1000000000`,
		`"kind":"added"`, `"mode":"-rw-r--r--"`, `"mode":"dtrwxrwxrwx"`, `"size_bytes":5`, `"changes_dropped":7`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s: no %s", b, want)
		}
	}
}

// TestResultJSONLists: a Result from Run has its lists, so that JSON has
// [] where there were none, never null.
func TestResultJSONLists(t *testing.T) {
	r := &Result{}
	r.lists()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"limits", "denials", "connections", "changes"} {
		if !strings.Contains(string(b), `"`+key+`":[]`) {
			t.Errorf("JSON %s: want %s an empty list", b, key)
		}
	}
}

// TestChangeModeJSON reads back every mode bit fs.FileMode.String names,
// and refuses text it does not write.
func TestChangeModeJSON(t *testing.T) {
	for i := range len(modeTypes) {
		m := fs.FileMode(1<<(31-i)) | 0o751
		got, err := parseMode(m.String())
		if err != nil || got != m {
			t.Errorf("parseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, bad := range []string{"", "rw-r--r--", "-rw-r--r-x-", "Zrw-r--r--", "-rw-r--r-X"} {
		if m, err := parseMode(bad); err == nil {
			t.Errorf("parseMode(%q) = %v, want an error", bad, m)
		}
	}
	var o Outcome
	if err := o.UnmarshalText([]byte("exploded")); err == nil {
		t.Errorf("outcome \"exploded\" read as %v, want an error", o)
	}
}
