package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// builder is imagetest.T for this tool: Fatal panics with a builderError,
// which imageOptions recovers into its error.
type builder struct{}

type builderError struct{ err error }

func (builder) Helper()           {}
func (builder) Fatal(args ...any) { panic(builderError{fmt.Errorf("%s", fmt.Sprint(args...))}) }

// imageOptions are opts with, as the root, an image made here of the
// host's /bin/true and the libraries it loads, and a small second layer,
// written as an OCI layout in dir, its store in dir too. The image row
// runs the same /bin/true as the cold row, from a stored image instead of
// the host's /usr.
func imageOptions(opts sandbox.Options, dir string) (_ sandbox.Options, err error) {
	defer func() {
		if r := recover(); r != nil {
			be, ok := r.(builderError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("making the image row's image: %w", be.err)
		}
	}()
	root := filepath.Join(dir, "image-root")
	if err := imagetest.HostProgram(root, "/bin/true", "/bin/true"); err != nil {
		return opts, fmt.Errorf("making the image row's image: %w", err)
	}
	// Two layers, as overlayfs takes no fewer: the row measures an
	// overlay root where the kernel allows one.
	img := imagetest.Image(builder{}, "", v1.Config{Env: []string{"PATH=/bin"}}, imagetest.Layer(builder{}, root),
		imagetest.Layer(builder{}, "", imagetest.File("etc/upper", 0o644, "from the upper layer\n")))
	ref := imagetest.WriteLayout(builder{}, filepath.Join(dir, "layout"), img, "v1")
	// A root caller's sandbox runs as nobody, which must reach the store.
	if err := os.Chmod(dir, 0o755); err != nil {
		return opts, err
	}
	opts.Image = &sandbox.Image{Ref: ref, Store: filepath.Join(dir, "store")}
	return opts, nil
}
