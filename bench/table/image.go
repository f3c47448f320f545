package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fumehood/sandbox"
	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// builder is imagetest.T for this tool: Fatal panics with a builderError,
// which imageOptions recovers into its error.
type builder struct{}

type builderError struct{ err error }

func (builder) Helper()           {}
func (builder) Fatal(args ...any) { panic(builderError{fmt.Errorf("%s", fmt.Sprint(args...))}) }

// storedImage is the image rows' image: the library's reference to it,
// the store it is in, and a reference by digest to it there.
type storedImage struct {
	ref, store, digestRef string
}

// makeImage makes, in dir, an image of the host's /bin/true and the
// libraries it loads, and a small second layer, written as an OCI layout,
// and stores it in a store in dir too. The image rows run the same
// /bin/true as the cold and cli rows, from a stored image instead of the
// host's /usr. The cli image row names it by digest, which a store that
// holds it answers without asking a registry.
func makeImage(dir string) (_ storedImage, err error) {
	defer func() {
		if r := recover(); r != nil {
			be, ok := r.(builderError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("making the image rows' image: %w", be.err)
		}
	}()
	root := filepath.Join(dir, "image-root")
	if err := imagetest.HostProgram(root, "/bin/true", "/bin/true"); err != nil {
		return storedImage{}, fmt.Errorf("making the image rows' image: %w", err)
	}
	// Two layers, as overlayfs takes no fewer: the rows measure an
	// overlay root where the kernel allows one.
	img := imagetest.Image(builder{}, "", v1.Config{Env: []string{"PATH=/bin"}}, imagetest.Layer(builder{}, root),
		imagetest.Layer(builder{}, "", imagetest.File("etc/upper", 0o644, "from the upper layer\n")))
	im := storedImage{
		ref:   imagetest.WriteLayout(builder{}, filepath.Join(dir, "layout"), img, "v1"),
		store: filepath.Join(dir, "store"),
	}
	// A root caller's sandbox runs as nobody, which must reach the store.
	if err := os.Chmod(dir, 0o755); err != nil {
		return im, err
	}
	st, err := image.Open(im.store)
	if err != nil {
		return im, fmt.Errorf("making the image rows' image: %w", err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stored, err := st.Pull(ctx, im.ref, image.PullOptions{})
	if err != nil {
		return im, fmt.Errorf("storing the image rows' image: %w", err)
	}
	// A registry's name, never asked: the digest is in the store.
	im.digestRef = "bench.invalid/true@" + stored.Digest
	return im, nil
}

// imageOptions are opts with im as the root.
func imageOptions(opts sandbox.Options, im storedImage) sandbox.Options {
	opts.Root = &sandbox.Image{Ref: im.ref, Store: im.store}
	return opts
}
