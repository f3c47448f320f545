//go:build linux

package sandbox

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tarEntry is one entry of a layer a test makes: a file, directory,
// symlink, hard link or device node.
type tarEntry struct {
	name string
	typ  byte
	mode int64
	body string
	link string
}

// layerTar packs the tree under dir, then extra, into an uncompressed
// layer. The tree's files are read as they are on the host; their owner
// is written as root, as image builders do.
func layerTar(t testing.TB, dir string, extra ...tarEntry) []byte {
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
			if fi.Mode().IsRegular() {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(tw, f)
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range extra {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testImage is an OCI image of the layers (uncompressed tars, gzip'd
// here) with cfg as its config, for this machine's architecture unless
// arch says otherwise.
func testImage(t testing.TB, arch string, cfg v1.Config, layers ...[]byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, b := range layers {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
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

// shellImageLayer is a layer holding the host's /bin/sh and the libraries
// it loads (miniRootfs), and nothing else of the host.
func shellImageLayer(t *testing.T, extra ...tarEntry) []byte {
	t.Helper()
	root, _ := miniRootfs(t)
	// miniRootfs's symlink out of the root is for the Rootfs tests.
	os.Remove(filepath.Join(root, "data"))
	return layerTar(t, root, extra...)
}

// imageStore is a store directory for one test, removed after it.
func imageStore(t *testing.T) string {
	t.Helper()
	dir := sharedTempDir(t)
	return filepath.Join(dir, "store")
}
