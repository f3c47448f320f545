package service

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestSessionImage: a session that asks for one of the server's -images
// runs in its files, with its Env and working directory; one that asks for
// any other image is refused.
func TestSessionImage(t *testing.T) {
	dir, err := os.MkdirTemp("", "service-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// A root caller's sandbox runs as nobody, which must reach the store.
	os.Chmod(dir, 0o755)
	root := t.TempDir()
	imagetest.HostShell(t, root)
	img := imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/bin", "FROM_IMAGE=yes"}, WorkingDir: "/srv"},
		imagetest.Layer(t, root, imagetest.Dir("srv/", 0o755), imagetest.File("srv/marker", 0o644, "from the image\n")))
	ref := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "v1")

	ts := startServer(t, "-images", ref, "-image-store", filepath.Join(dir, "store"))
	id := ts.newSession(t, `{"image":"`+ref+`"}`)
	a := ts.runIn(t, id, `{"command":["sh","-c","read -r m < marker; echo \"$m $FROM_IMAGE $(pwd)\"; test -e /usr || echo no-usr"]}`)
	if !a.success() || a.Stdout != "from the image yes /srv\nno-usr\n" {
		t.Errorf("a run in the session's image: %+v", a.short())
	}
	r := ts.call(t, "GET", "/v1/sessions/"+id, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"image":"`+ref+`"`) {
		t.Errorf("GET the session: %v, want it to name its image", r)
	}

	r = ts.call(t, "POST", "/v1/sessions", []byte(`{"image":"oci:/etc"}`))
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "-images") {
		t.Errorf("a session asking for an image the server does not offer: %v, want 400 naming -images", r)
	}
}
