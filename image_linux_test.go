//go:build linux

package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// shellImageConfig is the config of the images the tests run: an Env a
// run must see (and may override), a PATH that finds a program only the
// image has, and a working directory only the image has.
var shellImageConfig = v1.Config{
	Env:        []string{"PATH=/opt/img/bin:/bin", "FROM_IMAGE=image", "OVERRIDDEN=image"},
	WorkingDir: "/srv/app",
}

// shellImage is an image of the host's sh, with a marker file, a program
// on the image's own PATH, and its working directory.
func shellImage(t *testing.T) v1.Image {
	t.Helper()
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skipf("host has no /bin/sh: %v", err)
	}
	return testImage(t, "", shellImageConfig, shellImageLayer(t,
		tarEntry{name: "srv/app/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "srv/app/marker", typ: tar.TypeReg, mode: 0o644, body: "from the image\n"},
		tarEntry{name: "opt/img/bin/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "opt/img/bin/imgsh", typ: tar.TypeReg, mode: 0o755, body: string(sh)},
		// Only its owner may read it, as many images' files are: the
		// store's owner, who is not the sandbox's user when the caller
		// is root.
		tarEntry{name: "srv/app/private", typ: tar.TypeReg, mode: 0o600, body: "owner only"},
	))
}

// imageRefs writes img as an OCI layout, an OCI archive... and pushes it to
// a registry on loopback, and returns a reference to each.
func imageRefs(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	dir := sharedTempDir(t)
	refs := map[string]string{}

	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "v1"})); err != nil {
		t.Fatal(err)
	}
	refs["oci"] = "oci:" + filepath.Join(dir, "layout") + ":v1"

	tag, _ := name.NewTag("example.test/shell:v1")
	if err := tarball.WriteToFile(filepath.Join(dir, "docker.tar"), tag, img); err != nil {
		t.Fatal(err)
	}
	refs["docker-archive"] = "docker-archive:" + filepath.Join(dir, "docker.tar")

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/shell:v1"
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(authn.Anonymous)); err != nil {
		t.Fatal(err)
	}
	refs["registry"] = ref
	return refs
}

// TestImageRoot runs a program in an image from each kind of reference:
// the root is the image's files, not the host's /usr; the config's Env and
// working directory apply under Options.Env and Cmd; /etc is the
// sandbox's; and every file the image gives its owner alone is readable
// and executable by the sandbox's user, as root and rootless.
func TestImageRoot(t *testing.T) {
	requireSandbox(t)
	refs := imageRefs(t, shellImage(t))
	for _, kind := range []string{"oci", "docker-archive", "registry"} {
		t.Run(kind, func(t *testing.T) {
			store := imageStore(t)
			var events int
			im := &Image{Ref: refs[kind], Store: store, Insecure: kind == "registry",
				Progress: func(ImageProgress) { events++ }}
			if kind == "registry" {
				im.Credentials = func(string) (string, string, error) { return "", "", nil }
			}
			opts := Options{Image: im, Env: []string{"OVERRIDDEN=options", "FROM_OPTIONS=options"}}
			cmd := Command("imgsh", "-c", `
				echo "pwd=$(pwd)"
				read -r m < marker; echo "marker=$m"
				read -r p < private; echo "private=$p"
				echo "env=$FROM_IMAGE,$OVERRIDDEN,$FROM_OPTIONS,$FROM_CMD"
				echo "path=$PATH"
				test -e /usr && echo "host /usr visible"
				while read -r l; do case $l in sandbox:*) echo "etc=generated";; esac; done < /etc/passwd
				exit 0`)
			cmd.Env = []string{"FROM_CMD=cmd"}
			res := run(t, opts, cmd)
			out := string(res.Stdout)
			for _, want := range []string{"pwd=/srv/app\n", "marker=from the image\n", "private=owner only\n",
				"env=image,options,options,cmd\n", "path=/opt/img/bin:/bin\n", "etc=generated\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s%s", want, out, res.Stderr)
				}
			}
			if strings.Contains(out, "host /usr") {
				t.Errorf("the host's /usr is visible in an image that has none:\n%s", out)
			}
			if kind != "docker-archive" && events == 0 {
				t.Errorf("Progress was never called")
			}

			// Cmd.Dir overrides the image's working directory.
			cmd = Command("/bin/sh", "-c", "pwd")
			cmd.Dir = "/workspace"
			if res := run(t, opts, cmd); string(res.Stdout) != "/workspace\n" {
				t.Errorf("Cmd.Dir /workspace: pwd says %q (%s)", res.Stdout, res.Stderr)
			}
		})
	}
}

// TestImageLease: a Sandbox holds its image's root until Close, so a
// prune of the store in the meantime leaves it; after Close it goes.
func TestImageLease(t *testing.T) {
	requireSandbox(t)
	refs := imageRefs(t, shellImage(t))
	store := imageStore(t)
	s := newTest(t, Options{Image: &Image{Ref: refs["oci"], Store: store}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Run(ctx, Command("/bin/sh", "-c", "true")); err != nil {
		t.Fatal(err)
	}
	roots := func() int {
		ents, _ := os.ReadDir(filepath.Join(store, "roots"))
		return len(ents)
	}
	if n := roots(); n != 1 {
		t.Fatalf("store holds %d roots after a pull, want 1", n)
	}
	pruneStore(t, store)
	if n := roots(); n != 1 {
		t.Fatalf("a prune removed the root of a Sandbox still open (%d roots left)", n)
	}
	res, err := s.Run(ctx, Command("/bin/sh", "-c", "read -r m < /srv/app/marker; echo $m"))
	if err != nil || string(res.Stdout) != "from the image\n" {
		t.Fatalf("after the prune: %v %q %q", err, res.Stdout, res.Stderr)
	}
	s.Close()
	pruneStore(t, store)
	if n := roots(); n != 0 {
		t.Fatalf("a prune after Close left %d roots", n)
	}
}

// pruneStore prunes every image of the store that no Lease holds.
func pruneStore(t *testing.T, dir string) {
	t.Helper()
	st, err := image.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Prune(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// TestImageWithRootfs: Image and Rootfs both give the root; New refuses
// the pair, naming both.
func TestImageWithRootfs(t *testing.T) {
	s := New(Options{Image: &Image{Ref: "oci:/nowhere"}, Rootfs: "/"})
	err := s.Err()
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "Options.Image") || !strings.Contains(err.Error(), "Options.Rootfs") {
		t.Fatalf("Image with Rootfs: %v", err)
	}
}
