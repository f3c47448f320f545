//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// debianCache is where debianRoot keeps the Debian root it built, one a
// day: readable by everyone, so that a rootless run of the tests, which
// cannot build one, uses the one a root run built.
const debianCache = "/var/cache/fumehood-sandbox-test"

// debianRoot returns a tar of a minimal Debian stable root with python3,
// built by mmdebstrap from Debian's packages at most once a day. It skips
// the test, saying what is missing, when it has none and cannot build one;
// under CI=true, as root, it installs mmdebstrap with apt-get first.
func debianRoot(t *testing.T) string {
	t.Helper()
	file := filepath.Join(debianCache, "debian-stable-python3-"+runtime.GOARCH+"-"+time.Now().UTC().Format("20060102")+".tar")
	if _, err := os.Stat(file); err == nil {
		return file
	}
	if os.Getuid() != 0 {
		t.Skipf("no Debian root %s for today, and building one needs root (run the tests as root once today)", file)
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil && os.Getenv("CI") == "true" {
		if _, err := exec.LookPath("apt-get"); err == nil {
			out, err := exec.Command("apt-get", "install", "-y", "-q", "--no-install-recommends", "mmdebstrap").CombinedOutput()
			t.Logf("apt-get install mmdebstrap: %v\n%s", err, out)
		}
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap is not installed (apt-get install mmdebstrap), so no Debian root can be built")
	}
	if err := os.MkdirAll(debianCache, 0o755); err != nil {
		t.Fatal(err)
	}
	// Roots of other days are no longer used; today's, finished or being
	// built by another run of the tests, are left alone.
	today := strings.TrimSuffix(filepath.Base(file), ".tar")
	old, _ := filepath.Glob(filepath.Join(debianCache, "debian-stable-python3-*"))
	for _, o := range old {
		if !strings.HasPrefix(filepath.Base(o), today) {
			os.RemoveAll(o)
		}
	}
	// mmdebstrap writes a tar when the name ends in .tar. Each run builds
	// its own, so that two at once (two clones' tests) do not write one
	// file; the last rename wins, and both are the same root.
	tmp := fmt.Sprintf("%s.partial-%d.tar", strings.TrimSuffix(file, ".tar"), os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Only the main suite, from the mirror apt is set up for: a mirror
	// kept as a snapshot serves Release files past their Valid-Until,
	// which apt refuses unless told; the packages are still checked
	// against the signed Release's hashes.
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=apt", "--include=python3",
		`--aptopt=Acquire::Check-Valid-Until "false"`, "stable", tmp, "deb http://deb.debian.org/debian stable main")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		t.Skipf("mmdebstrap could not build a Debian root (is the Debian mirror reachable?): %v\n%s", err, lastLines(string(out), 10))
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestImageDebian runs Python from an image made of Debian's packages:
// it reads the image's own /etc/os-release and runs the image's python3,
// not the host's.
func TestImageDebian(t *testing.T) {
	requireSandbox(t)
	root := debianRoot(t)
	layer, err := tarball.LayerFromFile(root)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, WorkingDir: "/"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref := imagetest.WriteDockerArchive(t, filepath.Join(t.TempDir(), "debian.tar"), img)

	store := imageStore(t)
	s := newTest(t, Options{Root: &Image{Ref: ref, Store: store}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, Command("python3", "-c", `
import sys
fields = dict(l.split("=", 1) for l in open("/etc/os-release").read().splitlines() if "=" in l)
print(fields["PRETTY_NAME"].strip('"'))
print(sys.version.split()[0])
print(sys.executable)`))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("python3 in the Debian image: %v\n%s%s", res.Err(), res.Stdout, res.Stderr)
	}
	t.Logf("python3 in the Debian image says:\n%s", res.Stdout)

	// What the image holds, read on the host from its root.
	roots, _ := filepath.Glob(filepath.Join(store, "roots", "*"))
	if len(roots) != 1 {
		t.Fatalf("the store holds %d roots, want 1", len(roots))
	}
	osRelease, err := os.ReadFile(filepath.Join(roots[0], "usr", "lib", "os-release"))
	if err != nil {
		t.Fatal(err)
	}
	pretty := regexp.MustCompile(`(?m)^PRETTY_NAME="?([^"\n]*)"?$`).FindSubmatch(osRelease)
	pythons, _ := filepath.Glob(filepath.Join(roots[0], "usr", "bin", "python3.*[0-9]"))
	if pretty == nil || len(pythons) == 0 {
		t.Fatalf("the image has no PRETTY_NAME (%s) or no python3.X (%v)", osRelease, pythons)
	}
	version := strings.TrimPrefix(filepath.Base(pythons[0]), "python")
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) != 3 || lines[0] != string(pretty[1]) || !strings.HasPrefix(lines[1], version+".") || !strings.HasPrefix(lines[2], "/usr/bin/python3") {
		t.Errorf("python3 printed %q; want the image's %q, a %s version and /usr/bin/python3", lines, pretty[1], version)
	}
}
