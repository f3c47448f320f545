//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BenchmarkRunTrueImage is BenchmarkRunTrue in a stored image of the
// host's /bin/true (as make bench's image row, with a second layer), its
// root an overlay of its layers where the kernel allows it, and its
// hard-linked root.
func BenchmarkRunTrueImage(b *testing.B) {
	dir := b.TempDir()
	root := filepath.Join(dir, "root")
	if err := imagetest.HostProgram(root, "/bin/true", "/bin/true"); err != nil {
		b.Fatal(err)
	}
	// Two layers: overlayfs takes no fewer.
	img := imagetest.Image(b, "", v1.Config{Env: []string{"PATH=/bin"}}, imagetest.Layer(b, root),
		imagetest.Layer(b, "", imagetest.File("etc/upper", 0o644, "from the upper layer")))
	ref := imagetest.WriteLayout(b, filepath.Join(dir, "layout"), img, "v1")
	// A root caller's sandbox runs as nobody, which must reach the store.
	parent, err := os.MkdirTemp("", "sbxbench-")
	if err == nil {
		err = os.Chmod(parent, 0o755)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(parent) })
	store := filepath.Join(parent, "store")
	for _, c := range []struct {
		name       string
		hardLinked bool
	}{{"overlay", false}, {"hard-linked", true}} {
		b.Run(c.name, func(b *testing.B) {
			hardLinkedRootOnly.Store(c.hardLinked)
			defer hardLinkedRootOnly.Store(false)
			benchRun(b, Options{Root: &Image{Ref: ref, Store: store}}, "/bin/true")
			if errs := overlayProbeErrors(); !c.hardLinked && len(errs) > 0 {
				b.Fatalf("no overlay: %s", errs)
			}
		})
	}
}
