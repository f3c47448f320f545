package image

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestBadImages: each kind of bad input is an error wrapping its sentinel,
// naming the image (and the layer, or the platforms there are), and the
// store holds nothing of it after.
func TestBadImages(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	layers, _ := img.Layers()
	second, _ := layers[1].Digest()
	blob, _ := layers[1].Compressed()
	good := make([]byte, 0)
	for buf := make([]byte, 4096); ; {
		n, err := blob.Read(buf)
		good = append(good, buf[:n]...)
		if err != nil {
			break
		}
	}
	other, _ := imagetest.LayerOf(t, imagetest.Layer(t, "", file("other", 0o644, "other"))).Compressed()
	otherBytes := make([]byte, 0)
	for buf := make([]byte, 4096); ; {
		n, err := other.Read(buf)
		otherBytes = append(otherBytes, buf[:n]...)
		if err != nil {
			break
		}
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0xff
	// Other bytes that decompress to the same tar: the gzip header's
	// MTIME field is not checked by gzip, so only the digest can tell.
	mtime := append([]byte(nil), good...)
	mtime[4] ^= 0xff

	// Blobs on disk, changed after the layout was written.
	layoutWith := func(t *testing.T, b []byte) string {
		d := filepath.Join(t.TempDir(), "layout")
		writeLayout(t, d, img, "v1")
		if err := os.WriteFile(filepath.Join(d, "blobs", "sha256", second.Hex), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return "oci:" + d
	}
	// Blobs from a registry that serves other bytes.
	reg := newRegistry(t, "", "")
	regRef := reg.push(t, "test/base:v1", img, nil)
	registryWith := func(t *testing.T, b []byte, length int) string {
		reg.mu.Lock()
		reg.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+second.String()) {
				w.Header().Set("Content-Length", strconv.Itoa(length))
				w.Write(b)
				return
			}
			next.ServeHTTP(w, r)
		}
		reg.mu.Unlock()
		t.Cleanup(func() { reg.mu.Lock(); reg.wrap = nil; reg.mu.Unlock() })
		return regRef
	}
	arm := imageOf(t, "arm64", baseLayers(t)...)
	armLayout := filepath.Join(t.TempDir(), "arm")
	writeLayout(t, armLayout, arm, "v1")
	index := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: imageOf(t, "s390x", baseLayers(t)...), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}}},
		mutate.IndexAddendum{Add: imageOf(t, "riscv64", baseLayers(t)...), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "riscv64"}}},
	)
	indexRef := reg.push(t, "test/multi:v1", index, nil)
	armRef := reg.push(t, "test/arm:v1", arm, nil)
	// A config that gives layer 2 another diff ID: the blob matches the
	// manifest, the unpacked tar does not match the config.
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[1], _, _ = v1.SHA256(strings.NewReader("another layer"))
	lying, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	lyingLayout := filepath.Join(t.TempDir(), "lying")
	writeLayout(t, lyingLayout, lying, "v1")
	// A config blob changed on disk: the layers are fine, the config
	// no longer has the digest the manifest names.
	badConfig := filepath.Join(t.TempDir(), "config")
	writeLayout(t, badConfig, img, "v1")
	cfgName, _ := img.ConfigName()
	raw, _ := img.RawConfigFile()
	raw = []byte(strings.Replace(string(raw), "LANG=C.UTF-8", "LANG=C.UTF-9", 1))
	if err := os.WriteFile(filepath.Join(badConfig, "blobs", "sha256", cfgName.Hex), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	dockerTar := filepath.Join(t.TempDir(), "docker.tar")
	writeDockerArchive(t, dockerTar, img, "example.com/test/base:v1")

	tests := []struct {
		name string
		ref  func(t *testing.T) string
		want error
		says []string
	}{
		{"corrupt layer on disk", func(t *testing.T) string { return layoutWith(t, flipped) }, ErrBadImage, []string{"layer 2 of 2", second.String()}},
		{"truncated layer on disk", func(t *testing.T) string { return layoutWith(t, good[:len(good)/2]) }, ErrBadImage, []string{"layer 2 of 2", second.String()}},
		{"another layer's bytes on disk", func(t *testing.T) string { return layoutWith(t, otherBytes) }, ErrBadImage, []string{"layer 2 of 2", "digest is"}},
		{"corrupt layer from a registry", func(t *testing.T) string { return registryWith(t, flipped, len(flipped)) }, ErrBadImage, []string{"layer 2 of 2", second.String()}},
		{"layer cut off by the registry", func(t *testing.T) string { return registryWith(t, good[:len(good)/2], len(good)) }, ErrTransfer, []string{"layer 2 of 2", second.String(), "pull it again"}},
		{"digest mismatch on disk", func(t *testing.T) string { return layoutWith(t, mtime) }, ErrBadImage, []string{"layer 2 of 2", second.String(), "digest is"}},
		{"digest mismatch from a registry", func(t *testing.T) string { return registryWith(t, mtime, len(mtime)) }, ErrBadImage, []string{"layer 2 of 2", second.String(), "checksum"}},
		{"diff ID mismatch", func(t *testing.T) string { return "oci:" + lyingLayout }, ErrBadImage, []string{"layer 2 of 2", "the config says"}},
		{"config digest mismatch", func(t *testing.T) string { return "oci:" + badConfig }, ErrBadImage, []string{"config has digest"}},
		{"another platform in a layout", func(t *testing.T) string { return "oci:" + armLayout }, ErrPlatform, []string{"linux/arm64"}},
		{"another platform in a registry", func(t *testing.T) string { return armRef }, ErrPlatform, []string{"linux/arm64"}},
		{"no variant in an index", func(t *testing.T) string { return indexRef }, ErrPlatform, []string{"linux/riscv64, linux/s390x"}},
		{"unknown tag in a registry", func(t *testing.T) string { return reg.host + "/test/base:v2" }, ErrNotFound, []string{"test/base:v2"}},
		{"unknown repository", func(t *testing.T) string { return reg.host + "/test/nothing:v1" }, ErrNotFound, []string{"test/nothing"}},
		{"unknown digest", func(t *testing.T) string { return reg.host + "/test/base@sha256:" + strings.Repeat("0", 64) }, ErrNotFound, nil},
		{"unknown tag in a layout", func(t *testing.T) string { return "oci:" + armLayout + ":v9" }, ErrNotFound, []string{`no tag "v9"`, "tags: v1"}},
		{"no layout", func(t *testing.T) string { return "oci:" + t.TempDir() }, ErrNotFound, []string{"index.json"}},
		{"no archive", func(t *testing.T) string { return "oci-archive:/nonexistent.tar" }, ErrNotFound, nil},
		{"no docker archive", func(t *testing.T) string { return "docker-archive:/nonexistent.tar" }, ErrNotFound, nil},
		{"unknown tag in a docker archive", func(t *testing.T) string { return "docker-archive:" + dockerTar + ":example.com/test/base:v2" }, ErrNotFound, []string{"example.com/test/base:v1"}},
		{"bad reference", func(t *testing.T) string { return "docker://python" }, ErrBadReference, []string{"accepted:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t)
			ref := tc.ref(t)
			_, err := s.Pull(ctxT(t), ref, local2(ref))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want != ErrBadImage && errors.Is(err, ErrBadImage) {
				t.Errorf("%v: matches ErrBadImage too", err)
			}
			for _, w := range append(tc.says, ref) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: does not say %q", err, w)
				}
			}
			t.Log(err)
			checkEmpty(t, s)
		})
	}
}

// local2 allows plain HTTP for references to the test registries only.
func local2(ref string) PullOptions {
	o := PullOptions{Keychain: noKeychain}
	if strings.HasPrefix(ref, "127.0.0.1:") {
		o.Insecure = true
	}
	return o
}
