package image

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// probedImage is an Image of a store made in a temporary directory, with
// two layer directories, as Pull returns one whose layers are in overlay
// form.
func probedImage(t *testing.T) *Image {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	img := &Image{Root: filepath.Join(dir, rootsDir, "c0ffee")}
	for _, l := range []string{"aa", "bb"} {
		img.Layers = append(img.Layers, filepath.Join(dir, layersDir, l, layerFS))
	}
	for _, d := range append([]string{img.Root}, img.Layers...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// bootAs makes the probe cache read this boot's ID from a file holding id
// until the test ends.
func bootAs(t *testing.T, id string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(f, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := bootIDFile
	bootIDFile = f
	t.Cleanup(func() { bootIDFile = old })
}

func cached(img *Image, key string) string {
	b, ok := img.CachedProbe(key)
	if !ok {
		return "(none)"
	}
	return string(b)
}

// TestProbeCache: an answer stored for a probe of an image's layers is
// found again by its key, in this boot, for these very layer
// directories; not under another key, in another boot of the kernel, or
// once a layer's directory is made anew at its path. A new boot's first
// answer removes the old boot's.
func TestProbeCache(t *testing.T) {
	img := probedImage(t)
	if got := cached(img, "k"); got != "(none)" {
		t.Fatalf("before any answer: %q", got)
	}
	if err := img.CacheProbe("k", []byte("yes")); err != nil {
		t.Fatal(err)
	}
	if got := cached(img, "k"); got != "yes" {
		t.Errorf("stored: %q, want yes", got)
	}
	if err := img.CacheProbe("k", []byte("no")); err != nil {
		t.Fatal(err)
	}
	if got := cached(img, "k"); got != "no" {
		t.Errorf("stored again: %q, want no", got)
	}
	if got := cached(img, "other key"); got != "(none)" {
		t.Errorf("another key: %q, want none", got)
	}
	// Same layers, as another image lists them: the answer is theirs.
	if got := cached(&Image{Root: img.Root, Layers: slices.Clone(img.Layers)}, "k"); got != "no" {
		t.Errorf("same layers: %q, want no", got)
	}
	if got := cached(&Image{Root: img.Root, Layers: img.Layers[:1]}, "k"); got != "(none)" {
		t.Errorf("fewer layers: %q, want none", got)
	}

	// A layer gone, then made again at its path (as a pull renames a new
	// one into place), is another directory.
	if err := os.Rename(img.Layers[1], img.Layers[1]+".old"); err != nil {
		t.Fatal(err)
	}
	if got := cached(img, "k"); got != "(none)" {
		t.Errorf("a layer gone: %q, want none", got)
	}
	if err := os.Mkdir(img.Layers[1], 0o755); err != nil {
		t.Fatal(err)
	}
	if got := cached(img, "k"); got != "(none)" {
		t.Errorf("a layer made again: %q, want none", got)
	}
	if err := img.CacheProbe("k", []byte("yes")); err != nil {
		t.Fatal(err)
	}

	// Another boot of the kernel knows none of this boot's answers, and
	// its first answer removes them.
	probes := filepath.Join(img.storeDir(), probesDir)
	before, _ := os.ReadDir(probes)
	bootAs(t, "00000000-0000-4000-8000-000000000001")
	if got := cached(img, "k"); got != "(none)" {
		t.Errorf("another boot: %q, want none", got)
	}
	if err := img.CacheProbe("k", []byte("again")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(probes)
	if len(before) != 1 || len(after) != 1 || after[0].Name() != "00000000-0000-4000-8000-000000000001" {
		t.Errorf("boots in %s: before %v, after %v; want one each, then only the new one", probes, before, after)
	}
	if got := cached(img, "k"); got != "again" {
		t.Errorf("another boot, stored: %q, want again", got)
	}

	// No boot ID, no answer: nothing is cached rather than kept for ever.
	bootAs(t, "not a boot id")
	if got := cached(img, "k"); got != "(none)" {
		t.Errorf("no boot ID: %q, want none", got)
	}
	if err := img.CacheProbe("k", []byte("x")); err == nil {
		t.Error("no boot ID: stored an answer")
	}
}

// TestProbeCacheReadOnlyStore: where the store cannot be written (another
// user's), CacheProbe fails and nothing is found, so each caller probes.
func TestProbeCacheReadOnlyStore(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes a directory whatever its mode: run as an unprivileged user (make test-rootless)")
	}
	img := probedImage(t)
	dir := img.storeDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if err := img.CacheProbe("k", []byte("yes")); err == nil {
		t.Error("stored an answer in a read-only store")
	}
	if got := cached(img, "k"); got != "(none)" {
		t.Errorf("read-only store: %q, want none", got)
	}
}
