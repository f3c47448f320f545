//go:build linux

package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// TestImageXattrs: the extended attributes a layer carries are dropped,
// as the package doc says: a file capability (security.capability), a
// user.* attribute, and the layer's own user.overlay.opaque, which would
// otherwise make the overlay of the layers hide what the layer below
// holds in that directory. Seen from inside, the directory holds both
// layers' files; seen from outside, no stored file has the attributes.
func TestImageXattrs(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	below := imagetest.Layer(t, dir, imagetest.Dir("srv/d/", 0o755), imagetest.File("srv/d/below", 0o644, "below\n"))
	// security.capability v2: cap_net_raw, effective and permitted.
	capability := string([]byte{0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "srv/d/", Typeflag: tar.TypeDir, Mode: 0o755, PAXRecords: map[string]string{"SCHILY.xattr.user.overlay.opaque": "y"}},
		{Name: "srv/d/above", Typeflag: tar.TypeReg, Mode: 0o755, Size: 6, PAXRecords: map[string]string{
			"SCHILY.xattr.user.foo": "bar", "SCHILY.xattr.security.capability": capability, "SCHILY.xattr.user.overlay.redirect": "/srv"}},
	} {
		h.ModTime, h.Format = time.Unix(1700000000, 0), tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("above\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	img := imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/bin"}}, below, b.Bytes())
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), img, "v1")
	store := imageStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := newTest(t, Options{Root: &Image{Ref: ref, Store: store}}).Run(ctx, Command("/bin/sh", "-c", "for f in /srv/d/*; do echo $f; done"))
	if err != nil || string(res.Stdout) != "/srv/d/above\n/srv/d/below\n" {
		t.Fatalf("the image's /srv/d from inside: %v, stdout %q, stderr %q; want both layers' files", err, res.Stdout, res.Stderr)
	}

	st, err := image.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list, err := st.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("the store lists %+v, %v", list, err)
	}
	got, err := st.Pull(ctx, ref, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("overlay layers: %v", got.Layers)
	dirs := append([]string{got.Root}, got.Layers...)
	for _, d := range dirs {
		for _, p := range []string{"srv/d", "srv/d/above"} {
			names := xattrNames(t, filepath.Join(d, p))
			for _, n := range names {
				if n == "user.foo" || n == "security.capability" || n == "user.overlay.redirect" || n == "user.overlay.opaque" {
					t.Errorf("%s has the layer's xattr %s (all: %v)", filepath.Join(d, p), n, names)
				}
			}
		}
	}
}

// xattrNames lists the extended attributes of p; none where p is missing
// (a layer that lacks it).
func xattrNames(t *testing.T, p string) []string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("listxattr %s: %v", p, err)
	}
	return strings.FieldsFunc(string(buf[:n]), func(r rune) bool { return r == 0 })
}
