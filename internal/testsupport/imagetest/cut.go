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

// CutRegistry starts a registry on loopback that holds img as repo
// (NAME:TAG) and serves all of it but its layers, each of which it cuts
// off after the first after bytes by closing the connection mid-body: a
// registry that dies, or a network that drops, in the middle of a pull.
// It returns the image's reference.
func CutRegistry(t testing.TB, repo string, img v1.Image, after int64) string {
	t.Helper()
	cut := layerDigests(t, img)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, blob, ok := strings.Cut(r.URL.Path, "/blobs/"); ok && r.Method == http.MethodGet && cut[blob] {
			w = &CutWriter{ResponseWriter: w, Left: after}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return Push(t, strings.TrimPrefix(srv.URL, "http://"), repo, img)
}

// CutWriter passes on the first Left bytes of a response, then breaks the
// connection (net/http closes it when a handler panics with
// http.ErrAbortHandler), so that the client reads a body shorter than
// its Content-Length.
type CutWriter struct {
	http.ResponseWriter
	Left int64
}

func (c *CutWriter) Write(p []byte) (int, error) {
	if int64(len(p)) < c.Left {
		c.Left -= int64(len(p))
		return c.ResponseWriter.Write(p)
	}
	c.ResponseWriter.Write(p[:c.Left])
	c.ResponseWriter.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}
