package validate

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// toolserverImage writes to path an image archive (the docker-archive
// form, which ctr images import and docker load both take) of the
// directory root, named ref, with the Dockerfile's final stage's USER,
// ENTRYPOINT, CMD and EXPOSE. No engine builds it and no registry is
// asked: this machine has neither, so the image is the root imageRoot
// makes (the CLI built static from this tree, and the programs the tests
// run), where the Dockerfile's would be a Debian userland.
func toolserverImage(t *testing.T, root, ref, path string) {
	t.Helper()
	df := loadDockerfile(t)
	final := df.Final()
	if final == nil {
		t.Fatal("deploy/Dockerfile has no stage")
	}
	var cfg v1.Config
	if in := final.Last("USER"); in != nil {
		cfg.User = strings.TrimSpace(in.Args)
	}
	for _, c := range []struct {
		cmd string
		to  *[]string
	}{{"ENTRYPOINT", &cfg.Entrypoint}, {"CMD", &cfg.Cmd}} {
		if in := final.Last(c.cmd); in != nil {
			argv, ok := execForm(in.Args)
			if !ok {
				t.Fatalf("deploy/Dockerfile:%d: %s is not in exec form", in.Line, c.cmd)
			}
			*c.to = argv
		}
	}
	for _, in := range final.All("EXPOSE") {
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range strings.Fields(in.Args) {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	imageArchive(t, root, ref, path, cfg)
}

// imageArchive writes to path an image archive of one layer, the
// directory root (its files owned by root), named ref, with the
// configuration cfg, for this machine's platform.
func imageArchive(t *testing.T, root, ref, path string, cfg v1.Config) {
	t.Helper()
	img := imagetest.Image(t, "", cfg, imagetest.Layer(t, root))
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatalf("write the image archive %s: %v", path, err)
	}
}

// loadDockerfile parses deploy/Dockerfile.
func loadDockerfile(t *testing.T) *Dockerfile {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df, err := parseDockerfile(string(text))
	if err != nil {
		t.Fatalf("deploy/Dockerfile: %v", err)
	}
	return df
}

// TestToolserverImage: the image archive holds the root's files, owned
// by root, and the Dockerfile's user, entrypoint and command, so that the
// pods' container runs `/sandbox serve` as 65532 as the Dockerfile's image
// would.
func TestToolserverImage(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "sandbox"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image.tar")
	toolserverImage(t, root, "toolserver:dev", path)
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	final := loadDockerfile(t).Final()
	if want := strings.TrimSpace(final.Last("USER").Args); cf.Config.User != want {
		t.Errorf("image user %q, want the Dockerfile's %q", cf.Config.User, want)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/sandbox" || len(cf.Config.Cmd) == 0 || cf.Config.Cmd[0] != "serve" {
		t.Errorf("image entrypoint %q cmd %q, want /sandbox and serve ...", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
	}
	if h := got["sandbox"]; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 || h.Gid != 0 {
		t.Errorf("sandbox in the layer: %+v, want an executable owned by 0:0", h)
	}
	if h := got["bin"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin" {
		t.Errorf("bin in the layer: %+v, want a symlink to usr/bin", h)
	}
	if h := got["usr/bin/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("usr/bin in the layer: %+v, want a directory", h)
	}
}
