//go:build linux

package recipe

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCopyHostEtc: a file anyone may read is copied, one only its owner
// may read stays bound (a copy would show it to the sandbox user), as does
// one past the bound; a change to a copied file is seen.
func TestCopyHostEtc(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	public := write("services", []byte("http 80/tcp\n"), 0o644)
	empty := write("host.conf", nil, 0o644)
	private := write("secret", []byte("key\n"), 0o600)
	big := write("mime.types", bytes.Repeat([]byte("x"), maxCopiedEtcFile+1), 0o644)
	entries := []etcEntry{{path: public, kind: etcRegular}, {path: empty, kind: etcRegular},
		{path: private, kind: etcRegular}, {path: big, kind: etcRegular}, {path: dir, kind: etcDir}}
	copyHostEtc(entries)
	if string(entries[0].content) != "http 80/tcp\n" {
		t.Errorf("world-readable file: content %q, want its bytes", entries[0].content)
	}
	if entries[1].content == nil || len(entries[1].content) != 0 {
		t.Errorf("empty file: content %v, want an empty copy", entries[1].content)
	}
	for _, e := range entries[2:] {
		if e.content != nil {
			t.Errorf("%s: copied (%d bytes), want it bound", e.path, len(e.content))
		}
	}
	if !copiesCurrent(entries) {
		t.Error("copiesCurrent: false before any change")
	}
	if err := os.WriteFile(public, []byte("http 8080/tcp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if copiesCurrent(entries) {
		t.Error("copiesCurrent: true after the file was rewritten (another size)")
	}
}
