//go:build linux

package sandbox

import (
	"debug/elf"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/attack"
	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The escape suite runs each attack twice, as subtests: in a root of the
// host's /usr ("host") and in an image's root ("image"), judged by the
// same assertions. An image's files are bound as the host's are, so
// whatever held with the host's /usr must hold with them: the attacks that
// climb out of the root, write to it, or reach the host through /proc
// find the same walls.

// escapeRoot is a root filesystem the escape suite's attacks run in.
type escapeRoot struct {
	// image is Options.Root for the root; nil is the host's /usr.
	image *Image
}

// forEachRoot runs f as the subtests "host" and "image", with the root
// each names.
func forEachRoot(t *testing.T, f func(t *testing.T, root escapeRoot)) {
	t.Helper()
	t.Run("host", func(t *testing.T) { f(t, escapeRoot{}) })
	t.Run("image", func(t *testing.T) { f(t, escapeRoot{image: escapeImage(t)}) })
}

// with is opts with the sandbox's root set to r.
func (r escapeRoot) with(opts Options) Options {
	if r.image != nil {
		opts.Root = r.image
	}
	return opts
}

// escapeImageBuild is the image the escape suite's "image" root runs in,
// built once per run of the test binary, with the store it is pulled
// into; both are removed when the binary ends (removeEscapeImage).
var escapeImageBuild struct {
	sync.Once
	dir  string // holds the OCI layout and the store
	ref  string
	skip string // why no image can be built here
	ok   bool
}

// escapeImage is the escape suite's image root: the dynamic loader and
// libraries the attack program (this test binary, bound in as on the
// host's /usr) loads, and the few programs the tests run besides it: true
// (which starts the spawner), sleep (the procs attack's child), and bash
// where the host has it (the self-exe test's scripts); no shell, which no
// attack runs. The store is the test binary's own: the first Sandbox to
// use it pulls the image, later ones find it stored.
func escapeImage(t *testing.T) *Image {
	t.Helper()
	b := &escapeImageBuild
	b.Do(func() {
		dir, err := os.MkdirTemp("", "sbxtest-escape-image-")
		if err == nil {
			// The store inside is searched by the sandbox's user, who is
			// not this process's when it runs as root.
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		b.dir = dir
		tree := filepath.Join(dir, "tree")
		// A statically linked test binary (the VM's) needs nothing of
		// the image; a copy of a dynamic one is made only to bring its
		// loader and libraries, and removed.
		if dynamic(t, "/proc/self/exe") {
			if err := imagetest.HostProgram(tree, "/proc/self/exe", "/unused"); err != nil {
				b.skip = "no libraries of the test binary for an image: " + err.Error()
				return
			}
			os.Remove(filepath.Join(tree, "unused"))
		}
		programs := []string{"/bin/true", "/bin/sleep"}
		if _, err := os.Stat("/bin/bash"); err == nil {
			programs = append(programs, "/bin/bash")
		}
		for _, p := range programs {
			if err := imagetest.HostProgram(tree, p, p); err != nil {
				b.skip = "no " + p + " for an image: " + err.Error()
				return
			}
		}
		// Two layers, so that where the kernel mounts an overlay of an
		// image's layers (it takes two at least) the suite attacks that.
		img := imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/usr/bin:/bin"}},
			imagetest.Layer(t, tree, imagetest.Dir("usr/bin/", 0o755)),
			imagetest.Layer(t, "", imagetest.Dir(path.Dir(attack.RootMarker)[1:]+"/", 0o755),
				imagetest.File(attack.RootMarker[1:], 0o644, escapeImageMarker+"\n")))
		b.ref = imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "escape")
		os.RemoveAll(tree)
		b.ok = true
	})
	switch {
	case b.skip != "":
		t.Skip(b.skip)
	case !b.ok:
		t.Fatal("the escape suite's image could not be built (see the first test that used it)")
	}
	return &Image{Ref: b.ref, Store: filepath.Join(b.dir, "store")}
}

// dynamic says whether the program at p is dynamically linked: whether it
// names an interpreter, the loader.
func dynamic(t *testing.T, p string) bool {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// escapeImageMarker is what the escape suite's image holds at
// attack.RootMarker.
const escapeImageMarker = "the escape suite's image"

// requireRan fails the test unless the attack that made rep ran in the
// root s was built with: attack.RootMarker read from the escape suite's
// image, and from nowhere else.
func requireRan(t *testing.T, s *Sandbox, rep *attack.Report) {
	t.Helper()
	want := ""
	if s.cfg.Image != nil {
		want = escapeImageMarker
	}
	if got := rep.Seen["root marker"]; got != want {
		t.Errorf("attack %s read %q at %s, want %q: it did not run in the root it was given", rep.Attack, got, attack.RootMarker, want)
	}
}

// removeEscapeImage removes the escape suite's image and its store, once
// every test has ended and closed its Sandboxes.
func removeEscapeImage() {
	if escapeImageBuild.dir != "" {
		os.RemoveAll(escapeImageBuild.dir)
	}
}
