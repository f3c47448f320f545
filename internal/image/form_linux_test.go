package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
)

// refuseOverlayForm makes the store's whiteout devices or opaque xattrs
// fail with err until the test ends, as an old kernel or a file system
// without user xattrs would.
func refuseOverlayForm(t *testing.T, device bool, err error) {
	mk, set := mkWhiteout, setOpaque
	if device {
		mkWhiteout = func(*os.File, string) error { return err }
	} else {
		setOpaque = func(*os.File) error { return err }
	}
	t.Cleanup(func() { mkWhiteout, setOpaque = mk, set })
}

// layerDirs are the directories of img's layers, bottom first.
func layerDirs(s *Store, img *Image) []string {
	var out []string
	for _, d := range img.diffIDs {
		out = append(out, filepath.Join(s.Dir(), s.layerRel(d), layerFS))
	}
	return out
}

func storedForm(t *testing.T, s *Store, diffID string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir(), s.layerRel(diffID), layerMeta))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f, _ := m["form"].(string)
	return f
}

// checkNoDevice fails if a device node is anywhere in the root.
func checkNoDevice(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type()&fs.ModeDevice != 0 {
			t.Errorf("root: %s is a device node", p)
		}
		return nil
	})
}

// TestLayerFormOverlay: where the store's owner can make whiteout devices
// and user xattrs (this kernel, this file system), layers keep their
// whiteouts as overlayfs reads them, the image lists its layers for an
// overlay, top first, and its hard-linked root is the same exact tree,
// with no whiteout in it.
func TestLayerFormOverlay(t *testing.T) {
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", imageOf(t, "", baseLayers(t)...), nil)
	s, _ := newStore(t)
	img, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img)
	checkNoDevice(t, img.Root)
	for _, d := range img.diffIDs {
		if f := storedForm(t, s, d); f != string(formOverlay) {
			t.Errorf("layer %s: form %q, want %q", d, f, formOverlay)
		}
	}
	dirs := layerDirs(s, img)
	if want := []string{dirs[1], dirs[0]}; !slices.Equal(img.Layers, want) {
		t.Errorf("Layers %q, want %q", img.Layers, want)
	}
	upper := dirs[1]
	for _, p := range []string{"etc/gone", "run/fifo.x"} {
		fi, err := os.Lstat(filepath.Join(upper, p))
		if err != nil || !isWhiteoutDevice(fi) {
			t.Errorf("upper layer: %s is not a whiteout device: %v %v", p, fi, err)
		}
	}
	buf := make([]byte, 8)
	n, err := syscall.Getxattr(filepath.Join(upper, "opaque"), opaqueXattr, buf)
	if err != nil || string(buf[:n]) != "y" {
		t.Errorf("upper layer: opaque/ has %s=%q, %v; want y", opaqueXattr, buf[:n], err)
	}
	filepath.WalkDir(upper, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), whiteoutPrefix) {
			t.Errorf("upper layer: marker %s in overlay form", p)
		}
		return nil
	})
	// Pulled again, by a second reference: the same layers.
	again, err := s.Pull(ctxT(t), reg.host+"/test/base@"+img.Digest, local())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Layers, img.Layers) {
		t.Errorf("stored image: Layers %q, want %q", again.Layers, img.Layers)
	}
}

// TestLayerFormMarkers: where a whiteout device or a user xattr is
// refused, a layer keeps marker files, as layers stored before the overlay
// form did (their metadata has no form), the image lists no layers for an
// overlay, and its root is the same tree. A stack mixing both forms (an
// old layer under a new one) builds the same root too.
func TestLayerFormMarkers(t *testing.T) {
	for _, c := range []struct {
		name   string
		device bool
		err    error
	}{{"whiteout device refused", true, syscall.EPERM}, {"user xattr refused", false, syscall.ENOTSUP}} {
		t.Run(c.name, func(t *testing.T) {
			base := baseLayers(t)
			reg := newRegistry(t, "", "")
			lower := reg.push(t, "test/lower:v1", imageOf(t, "", base[0]), nil)
			ref := reg.push(t, "test/base:v1", imageOf(t, "", base...), nil)
			s, _ := newStore(t)
			refuseOverlayForm(t, c.device, c.err)
			img, err := s.Pull(ctxT(t), ref, local())
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img)
			checkNoDevice(t, img.Root)
			if img.Layers != nil {
				t.Errorf("Layers %q, want none", img.Layers)
			}
			for _, d := range img.diffIDs {
				if f := storedForm(t, s, d); f != "" {
					t.Errorf("layer %s: form %q, want none recorded", d, f)
				}
			}
			if _, err := os.Lstat(filepath.Join(layerDirs(s, img)[1], "etc/.wh.gone")); err != nil {
				t.Errorf("upper layer: no marker: %v", err)
			}

			// A fresh store: the lower layer as an old store kept it,
			// the upper one in overlay form.
			s2, _ := newStore(t)
			if _, err := s2.Pull(ctxT(t), lower, local()); err != nil {
				t.Fatal(err)
			}
			mkWhiteout, setOpaque = func(d *os.File, b string) error { return realMkWhiteout(d, b) }, realSetOpaque
			mixed, err := s2.Pull(ctxT(t), ref, local())
			if err != nil {
				t.Fatal(err)
			}
			if f0, f1 := storedForm(t, s2, mixed.diffIDs[0]), storedForm(t, s2, mixed.diffIDs[1]); f0 != "" || f1 != string(formOverlay) {
				t.Errorf("mixed: forms %q, %q; want none and %q", f0, f1, formOverlay)
			}
			checkImage(t, mixed)
			checkNoDevice(t, mixed.Root)
			if mixed.Layers != nil {
				t.Errorf("mixed: Layers %q, want none", mixed.Layers)
			}
		})
	}
}

// The store's own ways, as the tests found them.
var realMkWhiteout, realSetOpaque = mkWhiteout, setOpaque

// sameLayerLayers are layers whose whiteouts meet entries of their own
// layer, in either order: a whiteout deletes only what the layers below
// have (the OCI image spec).
func sameLayerLayers(t *testing.T) [][]byte {
	return [][]byte{
		imagetest.Layer(t, "",
			dir("a/", 0o755), file("a/old", 0o644, "below"),
			dir("b/", 0o755), file("b/old", 0o644, "below"),
			dir("c/", 0o755), file("c/old", 0o644, "below"),
			file("d", 0o644, "below"),
			dir("e/", 0o755), file("e/old", 0o644, "below"),
			dir("f/", 0o755), file("f/old", 0o644, "below"),
			file("g", 0o644, "below a device 0/0 of the tar"),
			dir("h/", 0o755), file("h/old", 0o644, "below a dir with the opaque xattr in the tar"),
		),
		imagetest.Layer(t, "",
			file(".wh.a", 0o644, ""), dir("a/", 0o755), file("a/new", 0o644, "whiteout, then the dir"),
			dir("b/", 0o755), file("b/new", 0o644, "the dir, then the whiteout"), file(".wh.b", 0o644, ""),
			file(".wh.c", 0o644, ""), file("c/new", 0o644, "whiteout, then a file in it"),
			file("d", 0o644, "the file, then its whiteout"), file(".wh.d", 0o644, ""),
			file(".wh.e", 0o644, ""), file("e", 0o644, "whiteout, then a file"),
			file("f/.wh..wh..opq", 0o644, ""), file("f/new", 0o644, "opaque"),
		),
		overlayLookalikes(t),
	}
}

// overlayLookalikes is a layer whose entries look like the overlay form's
// whiteouts to a store that would keep them: a character device 0/0 and a
// directory with the opaque xattr in its PAX records. Neither may delete
// anything below.
func overlayLookalikes(t *testing.T) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "g", Typeflag: tar.TypeChar, Mode: 0o666, Format: tar.FormatPAX},
		{Name: "h/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr." + opaqueXattr: "y"}},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestLayerFormsAgree: both forms give the same root for whiteouts that
// meet their own layer's entries, and a layer cannot make a whiteout or an
// opaque directory but by the tar's own names.
func TestLayerFormsAgree(t *testing.T) {
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/same:v1", imageOf(t, "", sameLayerLayers(t)...), nil)
	s, _ := newStore(t)
	img, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	if img.Layers == nil {
		t.Fatal("not in overlay form")
	}
	want := map[string]string{
		"a": "dir 0755", "a/new": "file 0644 whiteout, then the dir",
		"b": "dir 0755", "b/new": "file 0644 the dir, then the whiteout",
		"c": "dir 0755", "c/new": "file 0644 whiteout, then a file in it",
		"d": "file 0644 the file, then its whiteout",
		"e": "file 0644 whiteout, then a file",
		"f": "dir 0755", "f/new": "file 0644 opaque",
		"g": "file 0644 below a device 0/0 of the tar",
		"h": "dir 0755", "h/old": "file 0644 below a dir with the opaque xattr in the tar",
	}
	checkTree(t, img.Root, want)
	refuseOverlayForm(t, true, syscall.EPERM)
	s2, _ := newStore(t)
	markers, err := s2.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, markers.Root, want)
}

// TestLayerFormOpaqueTop: a layer whose top directory is opaque hides
// every layer below it: the image lists only the layers from it up for an
// overlay, and its root holds only what they have.
func TestLayerFormOpaqueTop(t *testing.T) {
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/top:v1", imageOf(t, "",
		imagetest.Layer(t, "", file("below", 0o644, "hidden")),
		imagetest.Layer(t, "", file(".wh..wh..opq", 0o644, ""), file("mid", 0o644, "kept")),
		imagetest.Layer(t, "", file("top", 0o644, "kept")),
	), nil)
	s, _ := newStore(t)
	img, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, img.Root, map[string]string{"mid": "file 0644 kept", "top": "file 0644 kept"})
	dirs := layerDirs(s, img)
	if want := []string{dirs[2], dirs[1]}; !slices.Equal(img.Layers, want) {
		t.Errorf("Layers %q, want %q", img.Layers, want)
	}
}
