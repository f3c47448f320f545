//go:build linux

package recipe

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/fumehood/sandbox/internal/wire"
)

// cString reads the NUL-terminated string at addr, an address in b.
func (b *ProgramBlock) cString(t *testing.T, addr uintptr) string {
	t.Helper()
	mem := b.bytes()
	off := addr - uintptr(unsafe.Pointer(&mem[0]))
	if off >= uintptr(len(mem)) {
		t.Fatalf("address %#x is outside the block", addr)
	}
	s, _, _ := strings.Cut(string(mem[off:]), "\x00")
	return s
}

// cStrings reads the NULL-terminated array of strings at addr, in b.
func (b *ProgramBlock) cStrings(t *testing.T, addr uintptr) []string {
	t.Helper()
	first := (addr - uintptr(unsafe.Pointer(&b.words[0]))) / unsafe.Sizeof(uintptr(0))
	if first >= uintptr(len(b.words)) {
		t.Fatalf("address %#x is outside the block", addr)
	}
	var ss []string
	for _, a := range b.words[first:] {
		if a == 0 {
			break
		}
		ss = append(ss, b.cString(t, a))
	}
	return ss
}

// TestProgramBlockLayout: a program encoded for a block, once received
// into it, is found from the header as the plan loads it: the directory,
// the places to try (the unused ones empty), argv and envp. What does not
// fit is refused.
func TestProgramBlockLayout(t *testing.T) {
	b := newProgramBlock()
	p := wire.Program{Path: "python3", Args: []string{"python3", "-c", "print(1)", ""}, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "A=b"}, Dir: "/workspace/d"}
	msg, ok := b.Encode(p)
	if !ok {
		t.Fatal("encode refused a small program")
	}
	if len(msg) >= BlockBytes/2 {
		t.Errorf("the message is %d bytes: want the size the program takes, not the block's", len(msg))
	}
	copy(b.bytes(), msg) // as recvmsg fills it
	if got := b.cString(t, b.words[hdrDir]); got != p.Dir {
		t.Errorf("dir %q, want %q", got, p.Dir)
	}
	want := []string{"/usr/local/bin/python3", "/usr/bin/python3", "/bin/python3", "", "", "", "", ""}
	for i := range blockCandidates {
		if got := b.cString(t, b.words[hdrCandidates+i]); got != want[i] {
			t.Errorf("place %d: %q, want %q", i, got, want[i])
		}
	}
	if got := b.cStrings(t, b.words[hdrArgv]); strings.Join(got, "|") != strings.Join(p.Args, "|") || len(got) != len(p.Args) {
		t.Errorf("argv %q, want %q", got, p.Args)
	}
	if got := b.cStrings(t, b.words[hdrEnv]); strings.Join(got, "|") != strings.Join(p.Env, "|") {
		t.Errorf("envp %q, want %q", got, p.Env)
	}
	for name, q := range map[string]wire.Program{
		"a NUL":          {Path: "/bin/true", Args: []string{"a\x00b"}},
		"9 places":       {Path: "true", Env: []string{"PATH=/1:/2:/3:/4:/5:/6:/7:/8:/9"}},
		"too long":       {Path: "/bin/true", Args: []string{strings.Repeat("x", BlockBytes)}},
		"too long, just": {Path: "/bin/true", Args: []string{strings.Repeat("x", BlockBytes-hdrWords*8-20)}},
	} {
		if _, ok := b.Encode(q); ok {
			t.Errorf("%s: encoded, want refused", name)
		}
	}
}
