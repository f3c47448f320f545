// Package imagetest builds container images for tests, in the test: layers
// as tar made from files of the host (its /bin/sh and the libraries it
// loads) or listed by the test, written as an OCI layout or a docker
// archive, or pushed to a registry on loopback. It is imported only by
// tests; no outside registry is ever asked.
package imagetest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// T is what the builders need of a test: testing.TB, or a program's own
// (a benchmark tool) whose Fatal does not return.
type T interface {
	Helper()
	Fatal(args ...any)
}

// Entry is one entry of a layer a test lists: a file, directory,
// symlink, hard link or device node (tar's Typeflag).
type Entry struct {
	Name string
	Type byte
	Mode int64
	Body string // a file's content
	Link string // a symlink's or hard link's target
}

// Dir, File, Symlink and Hardlink are Entries of their kind.
func Dir(n string, mode int64) Entry { return Entry{Name: n, Type: tar.TypeDir, Mode: mode} }
func File(n string, mode int64, body string) Entry {
	return Entry{Name: n, Type: tar.TypeReg, Mode: mode, Body: body}
}
func Symlink(n, to string) Entry  { return Entry{Name: n, Type: tar.TypeSymlink, Mode: 0o777, Link: to} }
func Hardlink(n, to string) Entry { return Entry{Name: n, Type: tar.TypeLink, Mode: 0o644, Link: to} }

// Layer packs the tree under dir (none when empty), then extra, into an
// uncompressed layer. Files of the tree are owned by root in it, as image
// builders write them.
func Layer(t T, dir string, extra ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if dir != "" {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			link := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				link, _ = os.Readlink(p)
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			h.Name, h.Uid, h.Gid, h.Uname, h.Gname = rel, 0, 0, "", ""
			if fi.IsDir() {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range extra {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Linkname: e.Link,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.Type == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if e.Type == tar.TypeChar || e.Type == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.Body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// LayerOf is the uncompressed layer b as an image's layer, gzip'd.
func LayerOf(t T, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image is an OCI image of the layers (uncompressed tars, gzip'd here)
// with cfg as its config, for linux on arch (this machine's if empty).
func Image(t T, arch string, cfg v1.Config, layers ...[]byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, b := range layers {
		var err error
		if img, err = mutate.AppendLayers(img, LayerOf(t, b)); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	if arch != "" {
		cf.Architecture = arch
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// HostShell fills dir with the host's /bin/sh, as /bin/sh, and the
// dynamic loader and libraries it loads, at their host paths: enough for
// a shell script of builtins. It skips the test when the host has no
// /bin/sh or a library cannot be found.
func HostShell(t testing.TB, dir string) {
	t.Helper()
	if err := HostProgram(dir, "/bin/sh", "/bin/sh"); err != nil {
		t.Skipf("no shell for a test image: %v", err)
	}
}

// HostProgram copies the host's program src into dir as the path as,
// with the dynamic loader and the libraries it loads at their host paths.
func HostProgram(dir, src, as string) error {
	src, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	f, err := elf.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	copies := map[string]string{src: filepath.Join(dir, as)}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			p.ReadAt(b, 0)
			interp := strings.TrimRight(string(b), "\x00")
			copies[interp] = filepath.Join(dir, interp)
		}
	}
	libs, _ := f.ImportedLibraries()
	for _, lib := range libs {
		found := ""
		for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
			"/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("cannot find %s, which %s loads", lib, src)
		}
		copies[found] = filepath.Join(dir, found)
	}
	for from, to := range copies {
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// WriteLayout writes img as an OCI image layout in dir, tagged tag, and
// returns its reference, oci:DIR:TAG.
func WriteLayout(t T, dir string, img v1.Image, tag string) string {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		t.Fatal(err)
	}
	return "oci:" + dir + ":" + tag
}

// WriteDockerArchive writes img as docker save does, tagged
// example.test/image:v1, and returns its reference, docker-archive:FILE.
func WriteDockerArchive(t T, file string, img v1.Image) string {
	t.Helper()
	tag, _ := name.NewTag("example.test/image:v1")
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		t.Fatal(err)
	}
	return "docker-archive:" + file
}

// Registry starts a registry on loopback (go-containerregistry's, in
// memory) for the test and returns its host:port.
func Registry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push stores img in the registry at host as repo (NAME:TAG) and returns
// its reference.
func Push(t testing.TB, host, repo string, img v1.Image) string {
	t.Helper()
	ref := host + "/" + repo
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(authn.Anonymous)); err != nil {
		t.Fatal(err)
	}
	return ref
}
