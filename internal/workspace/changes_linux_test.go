package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestScanRacy: a file whose ctime is at or after the racy bound has its
// content hashed, and two records of it with the same stat but other
// content differ; without the bound nothing is read.
func TestScanRacy(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("aaa"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before, err := r.Scan(".", ScanOptions{Racy: time.Now().Add(-time.Hour).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if before["f"].Sum == nil {
		t.Fatal("a file changed after the racy bound was not hashed")
	}
	plain, err := r.Scan(".", ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain["f"].Sum != nil {
		t.Error("a Scan without a racy bound hashed a file")
	}
	if same, _ := SameInPlace("f", before["f"], before["f"]); !same {
		t.Error("a record differs from itself")
	}
	// The same stat with other content: what a second write within the
	// clock's tick leaves.
	other := before["f"]
	sum := *other.Sum
	sum[0] ^= 1
	other.Sum = &sum
	if same, _ := SameInPlace("f", before["f"], other); same {
		t.Error("a file with the same stat and other content counts as the same")
	}
}

// TestDiffCap: past the limit the first changes by path are kept and the
// rest counted; a deleted directory's entries are not listed.
func TestDiffCap(t *testing.T) {
	old := Tree{"gone": {Mode: 0o40755}, "gone/a": {Mode: 0o100644}, "z": {Mode: 0o100644, Size: 1}}
	cur := Tree{"c": {Mode: 0o100644}, "a": {Mode: 0o100644}, "b": {Mode: 0o100644}}
	cs, dropped, err := Diff(old, cur, SameInPlace, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Path != "a" || cs[1].Path != "b" || dropped != 3 {
		t.Errorf("Diff = %+v, %d dropped; want a and b, 3 dropped (c, gone, z)", cs, dropped)
	}
}
