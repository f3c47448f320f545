//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
)

// TestImageDefaultStore: an image runs from the default store made from
// nothing, as on a fresh machine: the store's directory and the parents
// it makes are searchable by the sandbox's user (nobody, for root), so
// the run reads the image's files. A parent that exists and keeps that
// user out fails the run with an error that names the image, the
// directory and what to do, and not an option the caller never set.
func TestImageDefaultStore(t *testing.T) {
	requireSandbox(t)
	base := sharedTempDir(t)
	// A cache directory as /var/cache is on a fresh machine: 0755, with
	// nothing of ours in it.
	cache := filepath.Join(base, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	dir, err := ImageStoreDir()
	if err != nil || dir != filepath.Join(cache, "fumehood-sandbox", "images") {
		t.Fatalf("ImageStoreDir() = %q, %v; want it under XDG_CACHE_HOME %s", dir, err, cache)
	}
	ref := imagetest.WriteLayout(t, filepath.Join(base, "layout"), shellImage(t), "v1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := newTest(t, Options{Root: &Image{Ref: ref}}).Run(ctx, Command("/bin/sh", "-c", "read -r m < /srv/app/marker; echo $m"))
	if err != nil || string(res.Stdout) != "from the image\n" {
		t.Fatalf("run of %s from the default store: %v, %+v", ref, err, res)
	}
	for _, d := range []string{filepath.Join(cache, "fumehood-sandbox"), dir} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v, %v; want mode 0711 (searchable, not listable)", d, fi.Mode(), err)
		}
	}

	if os.Getuid() != 0 {
		return // the sandbox has the caller's own ids, which own the store
	}
	// A cache in a directory only root may enter, as /root is.
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(private, "cache"))
	_, err = newTest(t, Options{Root: &Image{Ref: ref}}).Run(ctx, Command("/bin/sh", "-c", "true"))
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "chmod o+x "+private) ||
		!strings.Contains(err.Error(), "Image.Store") || strings.Contains(err.Error(), "RootDir") {
		t.Errorf("run with the store beneath %s (mode 0700): %v; want ErrPermission naming the image, the directory and what to do", private, err)
	}
}
