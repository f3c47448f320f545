//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// shellImageConfig is the config of the images the tests run: an Env a
// run must see (and may override), a PATH that finds a program only the
// image has, and a working directory only the image has.
var shellImageConfig = v1.Config{
	Env:        []string{"PATH=/opt/img/bin:/bin", "FROM_IMAGE=image", "OVERRIDDEN=image"},
	WorkingDir: "/srv/app",
}

// shellImage is an image of the host's sh (imagetest.HostShell), with a
// marker file, a program on the image's own PATH, and its working
// directory; extra adds to its layer.
func shellImage(t *testing.T, extra ...imagetest.Entry) v1.Image {
	t.Helper()
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	sh, err := os.ReadFile(filepath.Join(dir, "bin", "sh"))
	if err != nil {
		t.Fatal(err)
	}
	return imagetest.Image(t, "", shellImageConfig, imagetest.Layer(t, dir, append([]imagetest.Entry{
		imagetest.Dir("srv/app/", 0o755),
		imagetest.File("srv/app/marker", 0o644, "from the image\n"),
		imagetest.Dir("opt/img/bin/", 0o755),
		imagetest.File("opt/img/bin/imgsh", 0o755, string(sh)),
		// Only its owner may read it, as many images' files are: the
		// store's owner, who is not the sandbox's user when the caller
		// is root.
		imagetest.File("srv/app/private", 0o600, "owner only"),
	}, extra...)...))
}

// imageRefs writes img as an OCI layout and as a docker archive, and
// pushes it to a registry on loopback, and returns a reference to each.
func imageRefs(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	dir := t.TempDir()
	return map[string]string{
		"oci":            imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "v1"),
		"docker-archive": imagetest.WriteDockerArchive(t, filepath.Join(dir, "docker.tar"), img),
		"registry":       imagetest.Push(t, imagetest.Registry(t), "shell:v1", img),
	}
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
			opts := Options{Root: im, Env: []string{"OVERRIDDEN=options", "FROM_OPTIONS=options"}}
			cmd := Command("imgsh", "-c", `
				echo "pwd=$(pwd)"
				read -r m < marker; echo "marker=$m"
				read -r p < private; echo "private=$p"
				echo "env=$FROM_IMAGE,$OVERRIDDEN,$FROM_OPTIONS,$FROM_CMD"
				echo "path=$PATH"
				test -e /usr && echo "host /usr visible"
				while read -r l; do case $l in sandbox:*) echo "etc=generated";; esac; done < /etc/passwd
				exit 0`)
			// Found as imgsh on the image's PATH, run as sh: a busybox sh
			// (the VM's) runs the applet its argv[0] names.
			cmd.Args[0] = "sh"
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

// TestImageLease: a Sandbox holds its image's root until Close, so the
// store says it is in use and a prune in the meantime leaves it; after
// Close it is not in use, and a prune removes it.
func TestImageLease(t *testing.T) {
	requireSandbox(t)
	refs := imageRefs(t, shellImage(t))
	store := imageStore(t)
	s := newTest(t, Options{Root: &Image{Ref: refs["oci"], Store: store}})
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
	st, err := image.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list, err := st.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if used, err := st.InUse(ctx, list[0]); err != nil || !used {
		t.Errorf("InUse with the Sandbox open: %v, %v; want true", used, err)
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
	if used, err := st.InUse(ctx, list[0]); err != nil || used {
		t.Errorf("InUse after Close: %v, %v; want false", used, err)
	}
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

// imageStore is a store directory for one test, removed after it, in a
// directory every user can reach (as /var/cache is).
func imageStore(t *testing.T) string {
	t.Helper()
	return filepath.Join(sharedTempDir(t), "store")
}

// storeEntries lists what the store holds beneath its directories (its
// lock file aside).
func storeEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"tmp", "layers", "roots", "images"} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range ents {
			out = append(out, sub+"/"+e.Name())
		}
	}
	return out
}

// TestImageBadInput: an image that cannot be used fails the Run with an
// error that names the image and matches the sentinel of its problem, and
// leaves nothing in the store.
func TestImageBadInput(t *testing.T) {
	requireSandbox(t)
	img := shellImage(t)
	dir := t.TempDir()
	good := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "v1")
	archive := filepath.Join(dir, "docker.tar")
	imagetest.WriteDockerArchive(t, archive, img)
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	// Cut in the middle of its layer: a truncated download.
	corrupt := filepath.Join(dir, "corrupt.tar")
	if err := os.WriteFile(corrupt, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	reg := imagetest.Registry(t)
	imagetest.Push(t, reg, "shell:v1", img)
	for _, c := range []struct {
		name     string
		im       Image
		sentinel error
	}{
		{"unknown layout", Image{Ref: "oci:" + filepath.Join(dir, "nowhere")}, ErrImageNotFound},
		{"missing tag", Image{Ref: strings.TrimSuffix(good, ":v1") + ":v2"}, ErrImageNotFound},
		{"unknown repository", Image{Ref: reg + "/nothing:v1", Insecure: true}, ErrImageNotFound},
		{"missing registry tag", Image{Ref: reg + "/shell:v2", Insecure: true}, ErrImageNotFound},
		{"wrong platform", Image{Ref: good, Platform: "linux/s390x"}, ErrImagePlatform},
		{"corrupt archive", Image{Ref: "docker-archive:" + corrupt}, ErrBadImage},
		{"bad reference", Image{Ref: "docker-archive:"}, ErrBadImageRef},
		{"insecure off loopback", Image{Ref: "registry.example.test/x:v1", Insecure: true}, ErrImageInsecure},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := imageStore(t)
			c.im.Store = store
			s := newTest(t, Options{Root: &c.im})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := s.Run(ctx, Command("/bin/sh", "-c", "true"))
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("Run: %v, want an error matching %v", err, c.sentinel)
			}
			if !strings.Contains(err.Error(), c.im.Ref) {
				t.Errorf("the error does not name the image %s: %v", c.im.Ref, err)
			}
			// After Close, which waits for a pool's filling, whose pull
			// of the image may come after the Run's.
			s.Close()
			if left := storeEntries(t, store); len(left) > 0 {
				t.Errorf("the store holds %v after a failed pull", left)
			}
		})
	}
}

// TestImageCredentials: a registry that wants a password gets the one
// Image.Credentials gives for its host, and a pull without it fails
// naming the image.
func TestImageCredentials(t *testing.T) {
	requireSandbox(t)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "agent" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/private/shell:v1"
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, shellImage(t), remote.WithAuth(&authn.Basic{Username: "agent", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}
	var asked []string
	creds := func(registry string) (string, string, error) {
		asked = append(asked, registry)
		return "agent", "s3cret", nil
	}
	res := run(t, Options{Root: &Image{Ref: ref, Store: imageStore(t), Insecure: true, Credentials: creds}},
		Command("/bin/sh", "-c", "read -r m < /srv/app/marker; echo $m"))
	if string(res.Stdout) != "from the image\n" || len(asked) == 0 || asked[0] != host {
		t.Errorf("pull with credentials: stdout %q, credentials asked for %q (want %s)", res.Stdout, asked, host)
	}

	s := newTest(t, Options{Root: &Image{Ref: ref, Store: imageStore(t), Insecure: true,
		Credentials: func(string) (string, string, error) { return "", "", nil }}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Run(ctx, Command("/bin/sh", "-c", "true")); err == nil || !strings.Contains(err.Error(), ref) {
		t.Errorf("an anonymous pull from a registry that wants a password: %v, want an error naming %s", err, ref)
	}
}

// TestImageCloseDuringPull: Close of a pooled Sandbox whose pool is
// pulling its image from a registry that never answers returns at once;
// it does not wait for the registry.
func TestImageCloseDuringPull(t *testing.T) {
	requireSandbox(t)
	asked := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	defer srv.CloseClientConnections()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/stalled:v1"
	s := New(Options{Start: Pool{Size: 1}, Root: &Image{Ref: ref, Store: imageStore(t), Insecure: true}})
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the pool never asked the registry for the image")
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for a pull from a registry that never answers")
	}
}
