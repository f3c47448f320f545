//go:build linux

package sandbox

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The mounts a test made, told apart from the host's. Other programs on
// the machine mount and unmount file systems while the tests run, so the
// tests never compare a whole mount table: they compare the mounts that
// they, or the library's processes they started, could have made.

// libraryMountPoint is where the library's processes mount in mount
// namespaces of their own: the init attaches the new root there, the
// workspace keeper its scratch tmpfs. A mount there in this process's
// namespace has come out of one of theirs.
const libraryMountPoint = "/tmp"

// madeDirs are the directories this test process made on the host for
// sandboxes to use (sharedTempDir's, helperBind's), with symlinks resolved.
var madeDirs struct {
	sync.Mutex
	dirs []string
}

// addMadeDir records dir as one this test process made.
func addMadeDir(dir string) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	madeDirs.Lock()
	defer madeDirs.Unlock()
	if !slices.Contains(madeDirs.dirs, dir) {
		madeDirs.dirs = append(madeDirs.dirs, dir)
	}
}

// testDirs are the directories made by this test process and by t
// (its TempDir's), with symlinks resolved.
func testDirs(t *testing.T) []string {
	t.Helper()
	root := filepath.Dir(t.TempDir())
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	madeDirs.Lock()
	defer madeDirs.Unlock()
	return append(slices.Clone(madeDirs.dirs), root)
}

// mountEntry is one line of a mountinfo file.
type mountEntry struct {
	line  string
	dev   string // the file system's major:minor
	root  string // the path within the file system that the mount shows
	point string // where it is mounted
}

// parseMountInfo reads the lines of a mountinfo file.
func parseMountInfo(text string) []mountEntry {
	var ms []mountEntry
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		ms = append(ms, mountEntry{line: strings.TrimSuffix(line, "\n"), dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4])})
	}
	return ms
}

// unescapeMount undoes mountinfo's octal escapes of a path (\040 for a
// space, \012 for a newline, \134 for a backslash).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// underDir says whether p is dir or lies beneath it.
func underDir(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// readMountInfo returns the mountinfo file p (of this process, or of
// another one: /proc/PID/mountinfo).
func readMountInfo(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ownMounts lists, sorted, the lines of the mountinfo text that are mounts
// a test could have made with dirs, the directories it made: those at
// libraryMountPoint, those at or beneath one of dirs, and those that show
// one of dirs (or what lies beneath it) elsewhere, as a bind of it would.
// Every other mount, the host's and other programs', is left out.
func ownMounts(text string, dirs []string) []string {
	table := parseMountInfo(text)
	// Each dir as its file system knows it: the root field a bind of it
	// shows. The mount holding it is the last one mounted at or above it.
	type fsPath struct{ dev, root string }
	var shown []fsPath
	for _, dir := range dirs {
		holder := -1
		for i, m := range table {
			if underDir(dir, m.point) && (holder < 0 || len(m.point) >= len(table[holder].point)) {
				holder = i
			}
		}
		if holder >= 0 {
			h := table[holder]
			shown = append(shown, fsPath{h.dev, path.Join(h.root, strings.TrimPrefix(dir, strings.TrimSuffix(h.point, "/")))})
		}
	}
	var own []string
	for _, m := range table {
		mine := m.point == libraryMountPoint || slices.ContainsFunc(dirs, func(d string) bool { return underDir(m.point, d) }) ||
			slices.ContainsFunc(shown, func(s fsPath) bool { return m.dev == s.dev && underDir(m.root, s.root) })
		if mine {
			own = append(own, m.line)
		}
	}
	slices.Sort(own)
	return own
}

// testMounts lists the mounts in the mountinfo file p that t could have
// made (ownMounts with testDirs), one per line; or, where p cannot be read
// (its process has gone), why.
func testMounts(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return strings.Join(ownMounts(string(b), testDirs(t)), "\n")
}

// TestOwnMounts: of a mount table, ownMounts keeps what a test's
// directories could show (mounts on or beneath them, binds of them, a
// mount at libraryMountPoint) and nothing else: not another program's
// tmpfs beside them, not a bind of their parent or of a sibling whose name
// starts the same, not the same path in another file system.
func TestOwnMounts(t *testing.T) {
	dirs := []string{"/tmp/sbxtest-1", "/tmp/sbx test"}
	table := `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 27 0:40 / /tmp/mount-loop.x/tmpfs rw - tmpfs mount-loop rw
31 27 254:0 /tmp/sbxtest-1/src /var rw - ext4 /dev/vda rw
32 27 0:41 / /tmp/sbxtest-1/mnt rw - tmpfs tmpfs rw
33 32 0:42 / /tmp/sbxtest-1/mnt/sub rw - tmpfs tmpfs rw
34 27 254:0 /tmp /srv rw - ext4 /dev/vda rw
35 27 254:0 /tmp/sbxtest-10 /x rw - ext4 /dev/vda rw
36 27 0:43 /tmp/sbxtest-1 /y rw - tmpfs tmpfs rw
37 27 254:0 /tmp/sbx\040test/a /z rw - ext4 /dev/vda rw
38 27 0:44 / /run/user rw - tmpfs tmpfs rw
`
	want := []string{"31", "32", "33", "37"}
	var got []string
	for _, l := range ownMounts(table, dirs) {
		got = append(got, strings.Fields(l)[0])
	}
	if !slices.Equal(got, want) {
		t.Errorf("own mounts of the table: %v, want %v", got, want)
	}

	// A tmpfs at libraryMountPoint holds the directories from then on:
	// its own binds count, the root file system's path does not.
	table += "39 27 0:45 / " + libraryMountPoint + " rw - tmpfs tmpfs rw\n" +
		"40 27 0:45 /sbxtest-1/b /w rw - tmpfs tmpfs rw\n"
	want = []string{"32", "33", "39", "40"}
	got = got[:0]
	for _, l := range ownMounts(table, dirs) {
		got = append(got, strings.Fields(l)[0])
	}
	if !slices.Equal(got, want) {
		t.Errorf("own mounts with a tmpfs on %s: %v, want %v", libraryMountPoint, got, want)
	}
	if got := ownMounts(table, nil); len(got) != 1 || strings.Fields(got[0])[0] != "39" {
		t.Errorf("own mounts without directories: %q, want only the one at %s", got, libraryMountPoint)
	}
}
