package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testImage is an image of the host's sh with a marker file, and its
// config's Env and working directory.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	return imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/bin", "FROM_IMAGE=yes"}, WorkingDir: "/srv"},
		imagetest.Layer(t, dir, imagetest.Dir("srv/", 0o755), imagetest.File("srv/marker", 0o644, "from the image\n")))
}

// sharedDir is a temporary directory every user can reach, for a store a
// root caller's sandbox (whose user is nobody) opens.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxcli-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestCLIImages pulls, lists, runs and prunes images through the tool,
// and checks that bad references fail with an error naming the image and
// saying what to do, leaving nothing in the store.
func TestCLIImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	limits := bestEffortHere()
	img := testImage(t)
	dir := sharedDir(t)
	store := filepath.Join(dir, "store")
	layout := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "v1")
	archive := imagetest.WriteDockerArchive(t, filepath.Join(dir, "img.tar"), img)
	reg := imagetest.Registry(t)
	remote := imagetest.Push(t, reg, "shell:v1", img)

	// pull prints what it stored, and its progress on stderr.
	code, out, errOut := runTool(t, bin, "pull", "--image-store", store, "--insecure-registry", remote)
	if code != 0 || !strings.HasPrefix(out, remote+" sha256:") || !strings.Contains(out, "linux/") {
		t.Fatalf("pull %s: exit %d\nstdout: %s\nstderr: %s", remote, code, out, errOut)
	}
	if !strings.Contains(errOut, "layer 1/1") {
		t.Errorf("pull showed no progress on stderr: %q", errOut)
	}
	code, out, errOut = runTool(t, bin, "images", "--image-store", store)
	if code != 0 || !strings.Contains(out, "REF") || !strings.Contains(out, remote) {
		t.Fatalf("images: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	script := `read -r m < marker; echo "$m $FROM_IMAGE $(pwd)"`
	for _, ref := range []string{layout, archive, remote} {
		args := append([]string{"run", "--image-store", store, "--image", ref}, limits...)
		if ref == remote {
			args = append(args, "--insecure-registry")
		}
		code, out, errOut := runTool(t, bin, append(args, "--", "sh", "-c", script)...)
		if code != 0 || out != "from the image yes /srv\n" {
			t.Errorf("run --image %s: exit %d\nstdout: %q\nstderr: %s", ref, code, out, errOut)
		}
	}

	for _, c := range []struct {
		name, ref string
		extra     []string
		want      string // in stderr, besides the image's name
	}{
		{"unknown layout", "oci:" + filepath.Join(dir, "nowhere"), nil, "check the name"},
		{"missing tag", strings.TrimSuffix(layout, ":v1") + ":v2", nil, "check the name"},
		{"unknown repository", reg + "/nothing:v1", []string{"--insecure-registry"}, "check the name"},
		{"wrong platform", layout, []string{"--platform", "linux/s390x"}, "pass --platform"},
		{"bad reference", "docker-archive:", nil, "give a registry reference"},
	} {
		t.Run(c.name, func(t *testing.T) {
			empty := filepath.Join(sharedDir(t), "store")
			args := append([]string{"run", "--image-store", empty, "--image", c.ref}, c.extra...)
			code, _, errOut := runTool(t, bin, append(append(args, limits...), "--", "sh", "-c", "true")...)
			if code != exitFailure || !strings.Contains(errOut, c.ref) || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, want %d with an error naming %s and saying %q:\n%s", code, exitFailure, c.ref, c.want, errOut)
			}
			for _, sub := range []string{"tmp", "layers", "roots", "images"} {
				if ents, _ := os.ReadDir(filepath.Join(empty, sub)); len(ents) > 0 {
					t.Errorf("the store's %s holds %d entries after a failed pull", sub, len(ents))
				}
			}
		})
	}

	// A corrupt archive: pull says so, and stores nothing.
	b, err := os.ReadFile(strings.TrimPrefix(archive, "docker-archive:"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.tar")
	os.WriteFile(corrupt, b[:len(b)*2/3], 0o644)
	code, _, errOut = runTool(t, bin, "pull", "--image-store", filepath.Join(dir, "other"), "docker-archive:"+corrupt)
	if code != exitFailure || !strings.Contains(errOut, corrupt) || !strings.Contains(errOut, "damaged") {
		t.Errorf("pull of a corrupt archive: exit %d\n%s", code, errOut)
	}

	code, out, errOut = runTool(t, bin, "images", "prune", "--image-store", store)
	if code != 0 || !strings.HasPrefix(out, "freed ") {
		t.Fatalf("images prune: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if code, out, _ = runTool(t, bin, "images", "--image-store", store); code != 0 || strings.Contains(out, remote) {
		t.Errorf("after prune, images lists:\n%s", out)
	}
}

// TestMCPImage: "sandbox mcp --image REF" gives every session the image's
// root, environment and working directory.
func TestMCPImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	dir := sharedDir(t)
	layout := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), testImage(t), "v1")
	cs, stderr, _ := connectStdio(t, bin, "--image-store", filepath.Join(dir, "store"), "--image", layout)
	var run struct {
		Stdout string `json:"stdout"`
	}
	callOK(t, cs, "run", map[string]any{"argv": []string{"sh", "-c", `read -r m < marker; echo "$m $FROM_IMAGE $(pwd)"; test -e /usr && echo host; true`}}, &run)
	if run.Stdout != "from the image yes /srv\n" {
		t.Errorf("run in the session's image: stdout %q; server's stderr:\n%s", run.Stdout, stderr)
	}

	// An image that cannot be pulled stops the server at its start, where
	// whoever started it sees why.
	missing := "oci:" + filepath.Join(dir, "nowhere")
	var errOut bytes.Buffer
	cmd := exec.Command(bin, mcpArgs("--image-store", filepath.Join(dir, "store"), "--image", missing)...)
	cmd.Stderr = &errOut
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != exitFailure || !strings.Contains(errOut.String(), missing) || !strings.Contains(errOut.String(), "check the name") {
		t.Errorf("sandbox mcp --image %s: exit %d (%v), want %d with an error naming it and what to do:\n%s", missing, code, err, exitFailure, errOut.String())
	}
}

// TestCLIImageDefaultStore: "sandbox run --image" with no --image-store
// makes the default store from nothing, as on a fresh machine, and runs
// the image; as root, one beneath a directory the sandbox's user (nobody)
// cannot enter fails naming the directory and what to do.
func TestCLIImageDefaultStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	dir := sharedDir(t)
	cache := filepath.Join(dir, "cache") // as /var/cache is: 0755, nothing of ours in it
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	layout := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), testImage(t), "v1")
	args := append(append([]string{"run", "--image", layout}, bestEffortHere()...), "--", "sh", "-c", "read -r m < marker; echo $m")
	if code, out, errOut := runTool(t, bin, args...); code != 0 || out != "from the image\n" {
		t.Errorf("run --image %s with the default store: exit %d\nstdout: %q\nstderr: %s", layout, code, out, errOut)
	}
	if ents, err := os.ReadDir(filepath.Join(cache, "fumehood-sandbox", "images", "roots")); err != nil || len(ents) != 1 {
		t.Errorf("the default store's roots: %v, %v; want the image's", ents, err)
	}

	if os.Getuid() != 0 {
		return
	}
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(private, "cache"))
	code, _, errOut := runTool(t, bin, args...)
	if code != exitFailure || !strings.Contains(errOut, layout) || !strings.Contains(errOut, "chmod o+x "+private) ||
		!strings.Contains(errOut, "--image-store") || strings.Contains(errOut, "RootDir") {
		t.Errorf("run --image %s with the store beneath %s (0700): exit %d, want %d naming the image, the directory and --image-store:\n%s",
			layout, private, code, exitFailure, errOut)
	}
}
