package image

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The entries of layers the tests list.
var (
	dir      = imagetest.Dir
	file     = imagetest.File
	symlink  = imagetest.Symlink
	hardlink = imagetest.Hardlink
)

// testConfig is the config the test images carry.
var testConfig = v1.Config{
	Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"},
	WorkingDir: "/work",
	User:       "1000:1000",
	Entrypoint: []string{"/bin/tool"},
	Cmd:        []string{"--help"},
}

// imageOf is an OCI image of layers (uncompressed tars) with the tests'
// config, for arch (this machine's if empty).
func imageOf(t testing.TB, arch string, layers ...[]byte) v1.Image {
	t.Helper()
	return imagetest.Image(t, arch, testConfig, layers...)
}

// The layers of the image most tests pull: every kind of entry, then a
// layer that deletes, hides and replaces some of them.
func baseLayers(t testing.TB) [][]byte {
	l1 := imagetest.Layer(t, "",
		dir("etc/", 0o755),
		file("etc/os-release", 0o644, "ID=test\n"),
		file("etc/gone", 0o644, "deleted by a whiteout"),
		dir("opaque/", 0o750),
		file("opaque/old", 0o644, "hidden by an opaque dir"),
		dir("bin/", 0o755),
		file("bin/tool", 0o755, "#!tool"),
		hardlink("bin/tool2", "bin/tool"),
		symlink("bin/sh", "tool"),
		symlink("abs", "/etc/os-release"),
		file("bin/su", 0o4755, "set-uid dropped"),
		file("bin/sg", 0o2711, "set-gid dropped"),
		dir("tmp/", 0o1777),
		file("run/fifo.x", 0o600, "replaced"),
		imagetest.Entry{Name: "run/fifo", Type: tar.TypeFifo, Mode: 0o640},
		dir("dev/", 0o755),
		imagetest.Entry{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666},
		imagetest.Entry{Name: "dev/sda", Type: tar.TypeBlock, Mode: 0o660},
		dir("locked/", 0o000),
		file("locked/f", 0o400, "in a 0000 dir"),
		file("./dot/slash", 0o600, "a ./ prefix"),
		file("lib", 0o644, "a file, then a dir in the next layer"),
	)
	l2 := imagetest.Layer(t, "",
		file("etc/.wh.gone", 0o644, ""),
		file("opaque/.wh..wh..opq", 0o644, ""),
		file("opaque/new", 0o600, "new"),
		file("etc/os-release", 0o644, "ID=test2\n"),
		file("run/.wh.fifo.x", 0o644, ""),
		dir("lib/", 0o755),
		file("lib/libc.so", 0o755, "libc"),
	)
	return [][]byte{l1, l2}
}

// wantBase is the root of the base image, as tree describes it: readable
// by everyone (permOf).
var wantBase = map[string]string{
	"abs":            "symlink -> /etc/os-release",
	"bin":            "dir 0755",
	"bin/sg":         "file 0755 set-gid dropped",
	"bin/sh":         "symlink -> tool",
	"bin/su":         "file 0755 set-uid dropped",
	"bin/tool":       "file 0755 #!tool",
	"bin/tool2":      "file 0755 #!tool",
	"dev":            "dir 0755",
	"dot":            "dir 0755",
	"dot/slash":      "file 0644 a ./ prefix",
	"etc":            "dir 0755",
	"etc/os-release": "file 0644 ID=test2\n",
	"lib":            "dir 0755",
	"lib/libc.so":    "file 0755 libc",
	"locked":         "dir 0755",
	"locked/f":       "file 0444 in a 0000 dir",
	"opaque":         "dir 0755", // the upper layer's implicit parent
	"opaque/new":     "file 0644 new",
	"run":            "dir 0755",
	"run/fifo":       "fifo 0644",
	"tmp":            "dir 1777",
}

// tree describes every entry under dir: its type, mode and content or
// target.
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		m := fi.Mode()
		perm := fmt.Sprintf("%04o", uint32(m.Perm())|map[bool]uint32{true: 0o1000}[m&fs.ModeSticky != 0]|
			map[bool]uint32{true: 0o4000}[m&fs.ModeSetuid != 0]|map[bool]uint32{true: 0o2000}[m&fs.ModeSetgid != 0])
		switch {
		case m.IsDir():
			out[rel] = "dir " + perm
		case m.IsRegular() && m.Perm()&0o400 == 0:
			// Unreadable to its owner unless the owner is root.
			out[rel] = "file " + perm
		case m.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + perm + " " + string(b)
		case m&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			out[rel] = "symlink -> " + to
		case m&fs.ModeNamedPipe != 0:
			out[rel] = "fifo " + perm
		default:
			out[rel] = "other " + m.String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkTree fails unless root is exactly want.
func checkTree(t testing.TB, root string, want map[string]string) {
	t.Helper()
	got := tree(t, root)
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s (%q)", k, w))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want %q", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s (%q)", k, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("root %s:\n\t%s", root, strings.Join(diffs, "\n\t"))
	}
}

// checkImage checks what Pull returned for the base image.
func checkImage(t testing.TB, img *Image) {
	t.Helper()
	checkTree(t, img.Root, wantBase)
	if fmt.Sprint(img.Env) != fmt.Sprint(testConfig.Env) || img.WorkingDir != testConfig.WorkingDir ||
		img.User != testConfig.User || fmt.Sprint(img.Cmd) != fmt.Sprint(testConfig.Cmd) ||
		fmt.Sprint(img.Entrypoint) != fmt.Sprint(testConfig.Entrypoint) {
		t.Errorf("config: got %+v, want %+v", img, testConfig)
	}
	if img.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("platform %q", img.Platform)
	}
	// Files are linked from the layers, not copied; hard links in a layer
	// stay one inode.
	a, err1 := os.Stat(filepath.Join(img.Root, "bin/tool"))
	b, err2 := os.Stat(filepath.Join(img.Root, "bin/tool2"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !os.SameFile(a, b) {
		t.Errorf("bin/tool2 is not a hard link of bin/tool")
	}
	if n := a.Sys().(*syscall.Stat_t).Nlink; n < 4 {
		t.Errorf("bin/tool has %d links, want 4 (two in the layer, two in the root)", n)
	}
}

// newStore opens a store in a fresh directory, next to a canary directory
// that nothing may write into.
func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	parent := t.TempDir()
	canary := filepath.Join(parent, "canary")
	if err := os.Mkdir(canary, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(parent, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		// The store must always be removable by its owner.
		if err := os.RemoveAll(s.Dir()); err != nil {
			t.Errorf("removing the store: %v", err)
		}
		ents, _ := os.ReadDir(canary)
		for _, e := range ents {
			t.Errorf("canary: %s was written", e.Name())
		}
		ents, _ = os.ReadDir(parent)
		for _, e := range ents {
			if e.Name() != "canary" {
				t.Errorf("next to the store: %s was written", e.Name())
			}
		}
	})
	return s, canary
}

// storeFiles lists what the store holds apart from its empty skeleton.
func storeFiles(t testing.TB, s *Store) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(s.Dir(), func(p string, e fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(s.Dir(), p)
		switch rel {
		case ".", lockName, tmpDir, layersDir, rootsDir, imagesDir:
			return nil
		}
		out = append(out, rel)
		if e != nil && e.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// checkEmpty fails if the store holds anything.
func checkEmpty(t testing.TB, s *Store) {
	t.Helper()
	if f := storeFiles(t, s); len(f) > 0 {
		t.Errorf("store holds %v", f)
	}
}

// writeLayout writes img as an OCI layout in dir, tagged tag.
func writeLayout(t testing.TB, dir string, img v1.Image, tag string) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		p, err = layout.Write(dir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
		t.Fatal(err)
	}
}

// writeOCIArchive writes img as a tar of an OCI layout.
func writeOCIArchive(t testing.TB, file string, img v1.Image) {
	t.Helper()
	d := t.TempDir()
	writeLayout(t, d, img, "v1")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == d {
			return err
		}
		rel, _ := filepath.Rel(d, p)
		fi, _ := e.Info()
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = rel
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			tw.Write(b)
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// writeDockerArchive writes img as docker save does, tagged tag.
func writeDockerArchive(t testing.TB, file string, img v1.Image, tag string) {
	t.Helper()
	ref, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(file, ref, img); err != nil {
		t.Fatal(err)
	}
}

// testRegistry is a registry on loopback that counts what it serves.
type testRegistry struct {
	*httptest.Server
	host string
	mu   sync.Mutex
	reqs map[string]int // "blobs", "manifests", "other"
	// wrap, when set, serves instead of the registry (it may call next).
	wrap func(w http.ResponseWriter, r *http.Request, next http.Handler)
}

func newRegistry(t testing.TB, user, pass string) *testRegistry {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tr := &testRegistry{reqs: map[string]int{}}
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
		}
		tr.mu.Lock()
		switch {
		case strings.Contains(r.URL.Path, "/blobs/"):
			tr.reqs["blobs"]++
		case strings.Contains(r.URL.Path, "/manifests/"):
			tr.reqs["manifests"]++
		default:
			tr.reqs["other"]++
		}
		wrap := tr.wrap
		tr.mu.Unlock()
		if wrap != nil {
			wrap(w, r, reg)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.Close)
	tr.host = strings.TrimPrefix(tr.URL, "http://")
	return tr
}

// push stores img in the registry as repo:tag and returns the reference.
func (tr *testRegistry) push(t testing.TB, repo string, img remote.Taggable, auth authn.Authenticator) string {
	t.Helper()
	ref := tr.host + "/" + repo
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if auth == nil {
		auth = authn.Anonymous
	}
	switch x := img.(type) {
	case v1.Image:
		err = remote.Write(r, x, remote.WithAuth(auth))
	case v1.ImageIndex:
		err = remote.WriteIndex(r, x, remote.WithAuth(auth))
	}
	if err != nil {
		t.Fatal(err)
	}
	tr.reset()
	return ref
}

func (tr *testRegistry) reset() {
	tr.mu.Lock()
	tr.reqs = map[string]int{}
	tr.mu.Unlock()
}

func (tr *testRegistry) count(kind string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if kind == "" {
		return tr.reqs["blobs"] + tr.reqs["manifests"] + tr.reqs["other"]
	}
	return tr.reqs[kind]
}

// keychain gives one registry's credentials.
type keychain struct {
	host string
	auth authn.Authenticator
}

func (k keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.host {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

// noKeychain keeps tests from reading the user's docker credentials.
var noKeychain = authn.NewMultiKeychain()

// local is PullOptions for a test registry.
func local() PullOptions { return PullOptions{Insecure: true, Keychain: noKeychain} }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
