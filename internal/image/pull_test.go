package image

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	"github.com/google/go-containerregistry/pkg/authn"
)

// TestPullTransports pulls one image from each transport and checks its
// root entry by entry and its config.
func TestPullTransports(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	src := t.TempDir()
	writeLayout(t, filepath.Join(src, "layout"), img, "v1")
	writeOCIArchive(t, filepath.Join(src, "oci.tar"), img)
	writeDockerArchive(t, filepath.Join(src, "docker.tar"), img, "example.com/test/base:v1")
	reg := newRegistry(t, "", "")
	regRef := reg.push(t, "test/base:v1", img, nil)
	authReg := newRegistry(t, "agent", "s3cret")
	authRef := authReg.push(t, "private/base:v1", img, &authn.Basic{Username: "agent", Password: "s3cret"})
	digest, _ := img.Digest()

	tests := []struct {
		name, ref string
		o         PullOptions
	}{
		{"oci", "oci:" + filepath.Join(src, "layout") + ":v1", PullOptions{}},
		{"oci without tag", "oci:" + filepath.Join(src, "layout"), PullOptions{}},
		{"oci-archive", "oci-archive:" + filepath.Join(src, "oci.tar"), PullOptions{}},
		{"docker-archive", "docker-archive:" + filepath.Join(src, "docker.tar"), PullOptions{}},
		{"docker-archive with ref", "docker-archive:" + filepath.Join(src, "docker.tar") + ":example.com/test/base:v1", PullOptions{}},
		{"registry", regRef, local()},
		{"registry by digest", reg.host + "/test/base@" + digest.String(), local()},
		{"registry with basic auth", authRef, PullOptions{Insecure: true, Keychain: keychain{authReg.host, &authn.Basic{Username: "agent", Password: "s3cret"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t)
			var progress []Progress
			tc.o.Progress = func(p Progress) { progress = append(progress, p) }
			got, err := s.Pull(ctxT(t), tc.ref, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, got)
			if got.Ref != tc.ref {
				t.Errorf("Ref %q", got.Ref)
			}
			if !strings.HasPrefix(tc.name, "docker") && got.Digest != digest.String() {
				t.Errorf("Digest %s, want %s", got.Digest, digest)
			}
			if len(progress) < 4 || progress[len(progress)-1].Index != 1 || progress[len(progress)-1].Count != 2 {
				t.Errorf("progress: %+v", progress)
			}
			last := progress[len(progress)-1]
			if last.Total >= 0 && last.Done != last.Total {
				t.Errorf("last progress %+v: not done", last)
			}
			list, err := s.List()
			if err != nil || len(list) != 1 || list[0].Root != got.Root || list[0].Digest != got.Digest {
				t.Errorf("List: %+v, %v", list, err)
			}
			checkTree(t, list[0].Root, wantBase)
		})
	}
}

// TestPullAuthRefused: a registry that wants credentials refuses a pull
// without them, and the store holds nothing after.
func TestPullAuthRefused(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	reg := newRegistry(t, "agent", "s3cret")
	ref := reg.push(t, "private/base:v1", img, &authn.Basic{Username: "agent", Password: "s3cret"})
	s, _ := newStore(t)
	o := PullOptions{Insecure: true, Keychain: keychain{reg.host, &authn.Basic{Username: "agent", Password: "wrong"}}}
	if _, err := s.Pull(ctxT(t), ref, o); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("wrong password: %v", err)
	}
	checkEmpty(t, s)
}

// TestPullInsecure: plain HTTP only when asked for, and only to loopback.
func TestPullInsecure(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	s, _ := newStore(t)
	_, err := s.Pull(ctxT(t), ref, PullOptions{Keychain: noKeychain})
	if !errors.Is(err, ErrInsecure) {
		t.Errorf("plain HTTP without Insecure: %v", err)
	}
	if reg.count("blobs")+reg.count("manifests") != 0 {
		t.Errorf("plain HTTP without Insecure reached the registry: %v", reg.reqs)
	}
	// Refused before any connection is tried.
	for _, ref := range []string{"example.com/x:1", "10.1.2.3:5000/x:1", "oci:/nonexistent"} {
		if _, err := s.Pull(ctxT(t), ref, PullOptions{Insecure: true, Keychain: noKeychain}); !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "no one can read or change it") {
			t.Errorf("Insecure with %s: %v", ref, err)
		}
	}
	checkEmpty(t, s)
}

func TestParseReference(t *testing.T) {
	good := map[string]kind{
		"docker.io/library/python:3.12-slim":    kindRegistry,
		"python":                                kindRegistry,
		"localhost:5000/x:tag":                  kindRegistry,
		"oci:/some/dir":                         kindOCI,
		"oci:/some/dir:tag":                     kindOCI,
		"oci-archive:/f.tar":                    kindOCIArchive,
		"docker-archive:/f.tar":                 kindDockerArchive,
		"docker-archive:/f.tar:example.com/x:1": kindDockerArchive,
		"x@sha256:" + strings.Repeat("a", 64):   kindRegistry,
	}
	for ref, k := range good {
		r, err := parseReference(ref, false)
		if err != nil || r.kind != k {
			t.Errorf("%s: %v, kind %v", ref, err, r.kind)
		}
	}
	for _, ref := range []string{"", "UPPER/case", "oci:", "docker-archive:", "docker://x", "https://x/y", "x@sha256:short", "docker-archive:/f:Bad Ref", "dir:/x"} {
		_, err := parseReference(ref, false)
		if !errors.Is(err, ErrBadReference) || !strings.Contains(err.Error(), "accepted:") || !strings.Contains(err.Error(), ref) {
			t.Errorf("%q: %v", ref, err)
		}
	}
}

// TestRepeatedLayer: an image may hold one layer twice; it is unpacked
// once.
func TestRepeatedLayer(t *testing.T) {
	l := imagetest.Layer(t, "", file("f", 0o644, "same"))
	src := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, src, imageOf(t, "", l, imagetest.Layer(t, "", file("g", 0o644, "between")), l), "v1")
	s, _ := newStore(t)
	img, err := s.Pull(ctxT(t), "oci:"+src, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, img.Root, map[string]string{"f": "file 0644 same", "g": "file 0644 between"})
	if n := s.unpacked.Load(); n != 2 {
		t.Errorf("%d layers unpacked, want 2", n)
	}
}

// TestUmask: the caller's umask does not change an image's modes.
func TestUmask(t *testing.T) {
	src := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, src, imageOf(t, "", baseLayers(t)...), "v1")
	s, _ := newStore(t)
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	img, err := s.Pull(ctxT(t), "oci:"+src, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img)
}

// TestPullCutOff: a registry whose connection breaks in the middle of a
// large layer fails the pull with ErrTransfer, which says to pull again
// and is not ErrBadImage (the image is fine), and leaves nothing in the
// store; the same pull, the connection whole, then succeeds.
func TestPullCutOff(t *testing.T) {
	big := make([]byte, 24<<20) // random, so gzip leaves it as large
	rand.Read(big)
	img := imageOf(t, "", imagetest.Layer(t, "", file("small", 0o644, "small")), imagetest.Layer(t, "", file("big", 0o644, string(big))))
	layers, _ := img.Layers()
	bigDigest, _ := layers[1].Digest()
	bigSize, _ := layers[1].Size()
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/big:v1", img, nil)
	const cutAt = 4 << 20
	reg.mu.Lock()
	reg.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+bigDigest.String()) {
			next.ServeHTTP(&imagetest.CutWriter{ResponseWriter: w, Left: cutAt}, r)
			return
		}
		next.ServeHTTP(w, r)
	}
	reg.mu.Unlock()

	s, _ := newStore(t)
	_, err := s.Pull(ctxT(t), ref, local())
	if !errors.Is(err, ErrTransfer) || errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), ref) ||
		!strings.Contains(err.Error(), bigDigest.String()) || !strings.Contains(err.Error(), "pull it again") {
		t.Fatalf("pull cut off after %d of %d bytes of layer %s: %v; want ErrTransfer (not ErrBadImage) naming the image and the layer and saying to pull again",
			cutAt, bigSize, bigDigest, err)
	}
	t.Log(err)
	checkEmpty(t, s)

	reg.mu.Lock()
	reg.wrap = nil
	reg.mu.Unlock()
	got, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatalf("pull again, the connection whole: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(got.Root, "big")); err != nil || !bytes.Equal(b, big) {
		t.Errorf("the big file after the second pull: %d bytes, %v; want the layer's %d", len(b), err, len(big))
	}
}

// TestPullPolicy: a stored image pulled again by its tag makes no request
// to the registry under PullMissing, and is found with the registry gone;
// PullAlways asks the registry; PullNever with nothing stored fails with
// ErrNotFound naming the image and the policy, and asks nothing.
func TestPullPolicy(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	s, _ := newStore(t)
	first, err := s.Pull(ctxT(t), ref, local())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first pull: %d requests", reg.count(""))

	reg.reset()
	if _, err := s.Pull(ctxT(t), ref, withPolicy(PullAlways)); err != nil {
		t.Fatalf("PullAlways of a stored image: %v", err)
	}
	if n := reg.count("manifests"); n == 0 {
		t.Errorf("PullAlways of a stored image asked the registry for no manifest (%v)", reg.reqs)
	}
	t.Logf("PullAlways of a stored image: %d requests", reg.count(""))

	reg.reset()
	got, err := s.Pull(ctxT(t), ref, local())
	if err != nil || got.Root != first.Root || got.Digest != first.Digest {
		t.Fatalf("PullMissing of a stored image: %+v, %v; want the stored %s", got, err, first.Root)
	}
	if n := reg.count(""); n != 0 {
		t.Errorf("PullMissing of a stored image made %d requests to the registry (%v), want none", n, reg.reqs)
	}

	reg.Close()
	for _, p := range []PullPolicy{PullMissing, PullNever} {
		if got, err := s.Pull(ctxT(t), ref, withPolicy(p)); err != nil || got.Root != first.Root {
			t.Errorf("%v with the registry gone: %+v, %v; want the stored image", p, got, err)
		}
	}

	empty, _ := newStore(t)
	_, err = empty.Pull(ctxT(t), ref, withPolicy(PullNever))
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrNotStored) || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "pull policy is never") {
		t.Errorf("PullNever with nothing stored: %v; want ErrNotFound naming the image and the policy", err)
	}
	checkEmpty(t, empty)
	if _, err := empty.Pull(ctxT(t), ref, withPolicy(PullNever+1)); !errors.Is(err, ErrBadReference) {
		t.Errorf("an unknown policy: %v, want ErrBadReference", err)
	}
}

func withPolicy(p PullPolicy) PullOptions {
	o := local()
	o.Policy = p
	return o
}
