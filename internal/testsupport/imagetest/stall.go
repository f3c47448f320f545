package imagetest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// StalledRegistry starts a registry on loopback that holds img as repo
// (NAME:TAG) and serves its manifest, but never answers a request for
// one of its layers until the test ends or the client gives up: a
// registry that stalls in the middle of a pull. It returns the image's
// reference.
func StalledRegistry(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	stalled := layerDigests(t, img)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, blob, ok := strings.Cut(r.URL.Path, "/blobs/"); ok && r.Method == http.MethodGet && stalled[blob] {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		reg.ServeHTTP(w, r)
	}))
	// Cleanups run last first: the handlers return before Close waits
	// for them.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	return Push(t, strings.TrimPrefix(srv.URL, "http://"), repo, img)
}

// layerDigests is the set of img's layers' digests, as a registry's blob
// paths name them.
func layerDigests(t testing.TB, img v1.Image) map[string]bool {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[d.String()] = true
	}
	return digests
}
