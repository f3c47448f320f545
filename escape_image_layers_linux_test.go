//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestEscapeImageLayers pulls and runs images whose layers only do harm
// stacked: whiteouts and opaque markers that climb, or that sit under a
// name a lower layer made a symlink to a host directory of the test's; a
// whiteout of a name its own layer adds; hard links to a whiteout or
// through a symlink out; a directory that a layer replaces by a symlink
// out and a later layer writes through. Each image is refused at the pull
// (an ErrBadImage error naming the image and the entry, and nothing left
// in the store) or runs with its files inside its own root; either way
// the host directory's files are as they were (stat and contents), and
// the program reads none of them. What stops it: each layer is unpacked on
// its own through an os.Root, which refuses a name reached through a
// symlink out; whiteouts naming "." or ".." are refused; layers are
// stacked in the store, never through a path an image made, and a whiteout
// applies to what the layers below put at its name, never to where a
// symlink leads; inside, symlinks resolve in the sandbox's root.
func TestEscapeImageLayers(t *testing.T) {
	requireSandbox(t)
	host := sharedTempDir(t)
	token := randomToken(t, "sbxhost-")
	for name, body := range map[string]string{"secret": token + "\n", "sub/secret": token + " sub\n"} {
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	// They belong to the user the test runs as, who owns the store: an
	// unpack that followed a link out, as root or rootless, would be
	// allowed to change them.
	up := "../../../../../../../.." + host

	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	base := imagetest.Layer(t, dir)
	type layer = []imagetest.Entry
	var (
		symlink  = imagetest.Symlink
		file     = imagetest.File
		hardlink = imagetest.Hardlink
		whiteout = func(n string) imagetest.Entry { return imagetest.File(n, 0o644, "") }
	)
	tests := []struct {
		name   string
		layers []layer
		// refused, when set, is the entry the pull must refuse, by name.
		refused string
		// Else check is a script the program runs, and want what it
		// must print: the image's own files where its layers put them.
		check, want string
	}{
		{name: "whiteout of .", refused: ".wh..",
			layers: []layer{{file("x", 0o644, "x")}, {whiteout(".wh..")}}},
		{name: "whiteout of ..", refused: "d/.wh...",
			layers: []layer{{imagetest.Dir("d/", 0o755)}, {whiteout("d/.wh...")}}},
		{name: "whiteout of .. under a symlink out", refused: "d/.wh...",
			layers: []layer{{symlink("d", host+"/sub")}, {whiteout("d/.wh...")}}},
		{name: "whiteout of a whiteout's name", refused: ".wh..wh.x",
			layers: []layer{{file("x", 0o644, "x")}, {whiteout(".wh..wh.x")}}},
		{name: "whiteout under a symlink out in a lower layer",
			layers: []layer{{symlink("d", host)}, {whiteout("d/.wh.secret")}},
			check:  `test -L /d && echo link; test -d /d && echo dir`, want: "dir\n"},
		{name: "whiteout under a relative symlink that climbs out",
			layers: []layer{{symlink("d", up)}, {whiteout("d/.wh.secret"), whiteout("d/.wh.sub")}},
			check:  `test -L /d && echo link; test -d /d && echo dir`, want: "dir\n"},
		{name: "whiteout under a symlink out in its own layer", refused: "d/.wh.secret",
			layers: []layer{{symlink("d", host), whiteout("d/.wh.secret")}}},
		{name: "opaque marker in a symlink out in a lower layer",
			layers: []layer{{symlink("d", host)}, {whiteout("d/.wh..wh..opq"), file("d/own", 0o644, "own")}},
			check:  `show /d/own; echo; test -e /d/secret && echo secret`, want: "own\n"},
		{name: "opaque marker in a symlink out in its own layer", refused: "d/.wh..wh..opq",
			layers: []layer{{symlink("d", host), whiteout("d/.wh..wh..opq")}}},
		{name: "whiteout of a name its own layer adds, before it",
			layers: []layer{{file("f", 0o644, "lower")}, {whiteout(".wh.f"), file("f", 0o644, "upper")}},
			check:  `show /f`, want: "upper"},
		{name: "whiteout of a name its own layer adds, after it",
			layers: []layer{{file("f", 0o644, "lower")}, {file("f", 0o644, "upper"), whiteout(".wh.f")}},
			check:  `show /f`, want: "upper"},
		{name: "whiteout of a directory its own layer adds",
			layers: []layer{{imagetest.Dir("d/", 0o755), file("d/lower", 0o644, "lower")},
				{imagetest.Dir("d/", 0o755), file("d/upper", 0o644, "upper"), whiteout(".wh.d")}},
			check: `show /d/upper; test -e /d/lower && echo lower`, want: "upper"},
		{name: "hard link to a whiteout",
			layers: []layer{{file("x", 0o644, "lower")}, {whiteout(".wh.x"), hardlink("y", ".wh.x")}},
			check:  `test -e /x && echo x; test -e /.wh.x && echo marker; show /y`, want: ""},
		{name: "hard link through a symlink out in its own layer", refused: "y",
			layers: []layer{{symlink("d", host), hardlink("y", "d/secret")}}},
		{name: "hard link through a symlink out in a lower layer", refused: "y",
			layers: []layer{{symlink("d", host)}, {hardlink("y", "d/secret")}}},
		{name: "hard link through a relative symlink out", refused: "y",
			layers: []layer{{symlink("d", up+"/sub"), hardlink("y", "d/secret")}}},
		{name: "directory replaced by a symlink out, written through later",
			layers: []layer{{imagetest.Dir("d/", 0o755), file("d/f", 0o644, "image")},
				{symlink("d", host)},
				{file("d/planted", 0o644, "planted"), file("d/secret", 0o644, "image's own")}},
			check: `show /d/planted; show /d/secret; test -e /d/f && echo f; test -L /d && echo link`, want: "plantedimage's own"},
		{name: "directory whited out and replaced by a symlink out, written through later",
			layers: []layer{{imagetest.Dir("d/", 0o755), file("d/f", 0o644, "image")},
				{whiteout(".wh.d"), symlink("d", up)},
				{file("d/sub/planted", 0o644, "planted")}},
			check: `show /d/sub/planted; test -e /d/secret && echo secret`, want: "planted"},
	}
	// What every image's program tries: the host directory's files,
	// through the names the layers made, and as themselves, printing
	// what it reads on stderr. The image has sh and no other program:
	// show prints a file's first line with builtins.
	probe := `
		for p in /d/secret /d/sub/secret /y /d/sub/planted ` + host + `/secret ` + host + `/sub/secret; do
			if read -r l 2>/dev/null < $p; then echo "READ $p: $l" >&2; fi
		done
		show() { l=; read -r l < "$1"; printf %s "$l"; }`
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Taken anew for each image, so that one that changed the
			// host fails alone.
			before := hostTree(t, host)
			layers := [][]byte{base}
			for _, l := range tc.layers {
				layers = append(layers, imagetest.Layer(t, "", l...))
			}
			img := imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/bin"}}, layers...)
			ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), img, "v1")
			store := imageStore(t)
			// The layers stacked both ways: by the kernel's overlay
			// where it mounts one (the store then keeps whiteouts in
			// overlayfs's form), and in the hard-linked root.
			for _, hardLinked := range []bool{false, true} {
				hardLinkedRootOnly.Store(hardLinked)
				s := newTest(t, Options{Root: &Image{Ref: ref, Store: store}})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := s.Run(ctx, Command("/bin/sh", "-c", probe+"\n"+tc.check))
				cancel()
				// After Close, which waits for a pool's filling and its
				// pull of the image.
				s.Close()
				hardLinkedRootOnly.Store(false)
				switch {
				case err != nil && tc.refused == "" && errors.Is(err, ErrBadImage):
					// A store may refuse what another stacks harmlessly.
					t.Logf("refused at the pull: %v", err)
					requireRefused(t, err, ref, "", store)
				case tc.refused != "":
					requireRefused(t, err, ref, tc.refused, store)
				case err != nil:
					t.Fatalf("Run (hard-linked root only: %v): %v", hardLinked, err)
				default:
					if got := string(res.Stdout); got != tc.want {
						t.Errorf("hard-linked root only %v: the image's program printed %q, want %q: its layers did not stack as they say\nstderr: %s", hardLinked, got, tc.want, res.Stderr)
					}
					if stderr := string(res.Stderr); strings.Contains(stderr, token) || strings.Contains(stderr, "READ ") {
						t.Errorf("hard-linked root only %v: the image's program read the host's files:\n%s", hardLinked, stderr)
					}
				}
				if err != nil {
					break
				}
			}
			if after := hostTree(t, host); after != before {
				t.Errorf("the host directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// requireRefused fails the test unless err is the pull's refusal of the
// image ref (ErrBadImage, naming ref and, when set, entry), and the store
// holds nothing of it.
func requireRefused(t *testing.T, err error, ref, entry, store string) {
	t.Helper()
	if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), ref) || entry != "" && !strings.Contains(err.Error(), fmt.Sprintf("entry %q", entry)) {
		t.Errorf("Run: %v, want an error matching ErrBadImage that names %s and entry %q", err, ref, entry)
	}
	if left := storeEntries(t, store); len(left) > 0 {
		t.Errorf("the refused image left %v in the store", left)
	}
}

// hostTree describes every file under dir, one a line: its name, type,
// mode, size, inode, link count, modification time, and its contents or
// link target.
func hostTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s mode=%o size=%d ino=%d nlink=%d mtime=%d.%d", p, st.Mode, st.Size, st.Ino, st.Nlink, st.Mtim.Sec, st.Mtim.Nsec)
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", c)
		case syscall.S_IFLNK:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %s", l)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
