package image

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
)

// mirrored is PullOptions for a reference whose registry has mirrors on
// loopback.
func mirrored(registry string, mirrors ...string) PullOptions {
	o := local()
	o.Mirrors = map[string][]string{registry: mirrors}
	return o
}

// downHost is the host:port of a loopback server that is no longer there.
func downHost(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	return host
}

// TestPullMirror: a registry name that resolves nowhere is pulled from its
// mirror, with or without a path, and the image keeps the name it was
// asked by.
func TestPullMirror(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	digest, _ := img.Digest()
	mirror := newRegistry(t, "", "")
	mirror.push(t, "test/base:v1", img, nil)
	mirror.push(t, "cache/test/base:v1", img, nil)
	for _, c := range []struct{ name, mirror string }{
		{"host", mirror.host},
		{"host and path", mirror.host + "/cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mirror.reset()
			s, _ := newStore(t)
			ref := "unreachable.test/test/base:v1"
			got, err := s.Pull(ctxT(t), ref, mirrored("unreachable.test", c.mirror))
			if err != nil {
				t.Fatal(err)
			}
			if got.Ref != ref || got.Digest != digest.String() {
				t.Errorf("pulled %s %s, want %s %s", got.Ref, got.Digest, ref, digest)
			}
			if mirror.count("manifests") == 0 || mirror.count("blobs") == 0 {
				t.Errorf("the mirror served %d manifests and %d blobs", mirror.count("manifests"), mirror.count("blobs"))
			}
			list, err := s.List()
			if err != nil || len(list) != 1 || list[0].Ref != ref {
				t.Fatalf("List: %+v, %v; want one image named %s", list, err, ref)
			}
			checkTree(t, list[0].Root, wantBase)
		})
	}
}

// TestPullMirrorFallsThrough: a mirror that does not have the image, or
// is down, passes the pull to the next mirror, and the last mirror to the
// registry itself; the registry's failure names the mirrors tried.
func TestPullMirrorFallsThrough(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	empty := newRegistry(t, "", "") // answers 404 for every image
	good := newRegistry(t, "", "")
	good.push(t, "test/base:v1", img, nil)
	down := downHost(t)

	t.Run("to a mirror", func(t *testing.T) {
		s, _ := newStore(t)
		if _, err := s.Pull(ctxT(t), ref, mirrored(reg.host, empty.host, down, good.host)); err != nil {
			t.Fatal(err)
		}
		if empty.count("manifests") == 0 || good.count("blobs") == 0 || reg.count("") != 0 {
			t.Errorf("asked: empty mirror %d manifests, good mirror %d blobs, registry %d requests; want >0, >0, 0",
				empty.count("manifests"), good.count("blobs"), reg.count(""))
		}
	})
	empty.reset()
	t.Run("to the registry", func(t *testing.T) {
		s, _ := newStore(t)
		got, err := s.Pull(ctxT(t), ref, mirrored(reg.host, empty.host, down))
		if err != nil {
			t.Fatal(err)
		}
		if got.Ref != ref || empty.count("manifests") == 0 || reg.count("blobs") == 0 {
			t.Errorf("pulled %s; asked: empty mirror %d manifests, registry %d blobs", got.Ref, empty.count("manifests"), reg.count("blobs"))
		}
	})
	t.Run("nowhere", func(t *testing.T) {
		s, _ := newStore(t)
		missing := reg.host + "/test/none:v1"
		_, err := s.Pull(ctxT(t), missing, mirrored(reg.host, empty.host, down))
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), missing) ||
			!strings.Contains(err.Error(), "mirror "+empty.host) || !strings.Contains(err.Error(), "mirror "+down) {
			t.Errorf("Pull: %v; want ErrNotFound naming the image and both mirrors", err)
		}
		checkEmpty(t, s)
	})
}

// TestPullMirrorOtherImage: a mirror whose tag names another image than
// the registry's serves that image, as a registry would (a tag is what
// its holder says); one that serves another manifest for a digest fails
// the pull, and the registry is not asked in its stead.
func TestPullMirrorOtherImage(t *testing.T) {
	imgA := imageOf(t, "", baseLayers(t)...)
	imgB := imageOf(t, "", imagetest.Layer(t, "", dir("b/", 0o755), file("b/only-in-b", 0o644, "b\n")))
	digestA, _ := imgA.Digest()
	digestB, _ := imgB.Digest()
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", imgA, nil)
	mirror := newRegistry(t, "", "")
	mirror.push(t, "test/base:v1", imgB, nil)

	t.Run("by tag", func(t *testing.T) {
		s, _ := newStore(t)
		got, err := s.Pull(ctxT(t), ref, mirrored(reg.host, mirror.host))
		if err != nil {
			t.Fatal(err)
		}
		if got.Ref != ref || got.Digest != digestB.String() || reg.count("") != 0 {
			t.Errorf("pulled %s %s with %d requests to the registry; want %s %s (the mirror's) and none", got.Ref, got.Digest, reg.count(""), ref, digestB)
		}
	})

	t.Run("by digest", func(t *testing.T) {
		manifestB, err := imgB.RawManifest()
		if err != nil {
			t.Fatal(err)
		}
		// The mirror answers every manifest request with B's.
		mirror.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digestB.String())
			w.Write(manifestB)
		}
		defer func() { mirror.wrap = nil }()
		s, _ := newStore(t)
		byDigest := reg.host + "/test/base@" + digestA.String()
		_, err = s.Pull(ctxT(t), byDigest, mirrored(reg.host, mirror.host))
		if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), byDigest) || !strings.Contains(err.Error(), mirror.host) {
			t.Errorf("Pull: %v; want ErrBadImage naming the image and the mirror", err)
		}
		if n := reg.count(""); n != 0 {
			t.Errorf("the registry was asked %d times after the mirror served a wrong manifest", n)
		}
		checkEmpty(t, s)
	})
}

// TestPullMirrorInsecure: plain HTTP goes to a loopback mirror only with
// Insecure; Insecure with neither registry nor mirror on loopback is
// refused; and a mirror that sends the pull to plain HTTP off loopback
// fails it, without passing it on.
func TestPullMirrorInsecure(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)

	t.Run("mirror off loopback", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.Pull(ctxT(t), "unreachable.test/test/base:v1", mirrored("unreachable.test", "192.0.2.1:5000"))
		if !errors.Is(err, ErrInsecure) {
			t.Errorf("Insecure with a mirror off loopback: %v, want ErrInsecure", err)
		}
		checkEmpty(t, s)
	})
	t.Run("redirect off loopback", func(t *testing.T) {
		mirror := newRegistry(t, "", "")
		mirror.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				http.Redirect(w, r, "http://192.0.2.1:9"+r.URL.Path, http.StatusTemporaryRedirect)
				return
			}
			next.ServeHTTP(w, r)
		}
		s, _ := newStore(t)
		_, err := s.Pull(ctxT(t), ref, mirrored(reg.host, mirror.host))
		if !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), mirror.host) {
			t.Errorf("a mirror redirecting to plain HTTP off loopback: %v, want ErrInsecure naming the mirror", err)
		}
		if n := reg.count(""); n != 0 {
			t.Errorf("the registry was asked %d times after the mirror's redirect was refused", n)
		}
		checkEmpty(t, s)
	})
}

// TestCheckMirrors: a mirror or registry that is not a host is an
// ErrBadReference naming it, from CheckMirrors and from Pull, which then
// asks no one.
func TestCheckMirrors(t *testing.T) {
	if err := CheckMirrors(map[string][]string{"docker.io": {"mirror.example:5000", "127.0.0.1:5000/cache/hub"}}); err != nil {
		t.Errorf("good mirrors: %v", err)
	}
	reg := newRegistry(t, "", "")
	for _, c := range []struct{ registry, mirror, bad string }{
		{"docker.io", "http://mirror.example", "http://mirror.example"},
		{"docker.io", "https://mirror.example", "https://mirror.example"},
		{"docker.io", "", `""`},
		{"docker.io", "mirror.example/", "mirror.example/"},
		{"docker.io", "mirror example", "mirror example"},
		{"docker.io", "mirror.example/UPPER", "mirror.example/UPPER"},
		{"https://docker.io", "mirror.example", "https://docker.io"},
		{"docker.io/library", "mirror.example", "docker.io/library"},
		{"", "mirror.example", `""`},
		{"index.docker.io", "mirror.example", `"index.docker.io" of Mirrors: the same registry as "docker.io"`},
	} {
		m := map[string][]string{c.registry: {c.mirror}}
		if c.registry == "index.docker.io" {
			m["docker.io"] = []string{c.mirror}
		}
		err := CheckMirrors(m)
		if !errors.Is(err, ErrBadReference) || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("CheckMirrors(%q): %v, want ErrBadReference naming %s", m, err, c.bad)
		}
		s, _ := newStore(t)
		o := local()
		o.Mirrors = m
		if _, err := s.Pull(ctxT(t), reg.host+"/x:v1", o); !errors.Is(err, ErrBadReference) {
			t.Errorf("Pull with Mirrors %q: %v, want ErrBadReference", m, err)
		}
	}
	if n := reg.count(""); n != 0 {
		t.Errorf("the registry was asked %d times with bad mirrors", n)
	}
}

// TestMirrorSources: docker.io's mirrors apply to a short docker hub
// name, with its library/ path, by tag and by digest, mirrors first and
// the registry last.
func TestMirrorSources(t *testing.T) {
	o := PullOptions{Mirrors: map[string][]string{"docker.io": {"m1.example", "m2.example:5000/hub"}}}
	digest := "sha256:" + strings.Repeat("a", 64)
	for ref, want := range map[string][]string{
		"python:3.12": {"m1.example/library/python:3.12", "m2.example:5000/hub/library/python:3.12", "index.docker.io/library/python:3.12"},
		"python@" + digest: {"m1.example/library/python@" + digest, "m2.example:5000/hub/library/python@" + digest,
			"index.docker.io/library/python@" + digest},
		"ghcr.io/o/x:v1": {"ghcr.io/o/x:v1"},
	} {
		r, err := parseReference(ref, false)
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := o.sourcesOf(r.remote)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range srcs {
			got = append(got, s.ref.Name())
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: sources %q, want %q", ref, got, want)
		}
	}
}
