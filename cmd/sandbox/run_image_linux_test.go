package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// binFS prints the file system /bin is on in the sandbox, from
// /proc/self/mountinfo, with sh's builtins.
const binFS = `while read -r id parent dev root mnt rest; do
	[ "$mnt" = /bin ] && { f=${rest#* - }; echo "${f%% *}"; }
done < /proc/self/mountinfo
exit 0`

// TestCLIImageOverlayProbeStored: each run of the tool is a new process,
// and the overlay probe's answer, which the first run of a layered image
// keeps in the store, is what the later ones go by, with no probe child
// of their own: told the overlay mounts, the run's root is the overlay of
// the image's layers; told it was refused, the image's hard-linked root.
// The image is named by digest, which the store answers without a
// registry.
func TestCLIImageOverlayProbeStored(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tool; skipped in -short mode")
	}
	requireSandbox(t)
	bin := cliBinary(t)
	limits := bestEffortHere()
	root := t.TempDir()
	imagetest.HostShell(t, root)
	img := imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/bin"}}, imagetest.Layer(t, root),
		imagetest.Layer(t, "", imagetest.File("etc/upper", 0o644, "from the upper layer\n")))
	dir := sharedDir(t)
	store := filepath.Join(dir, "store")
	layout := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "v1")
	code, out, errOut := runTool(t, bin, "pull", "--image-store", store, layout)
	f := strings.Fields(out)
	if code != 0 || len(f) < 2 || !strings.HasPrefix(f[1], "sha256:") {
		t.Fatalf("pull %s: exit %d\nstdout: %s\nstderr: %s", layout, code, out, errOut)
	}
	ref := "example.invalid/layered@" + f[1]

	run := func() string {
		t.Helper()
		args := append([]string{"run", "--image-store", store, "--image", ref}, limits...)
		code, out, errOut := runTool(t, bin, append(args, "--", "sh", "-c", binFS)...)
		if code != 0 {
			t.Fatalf("run --image %s: exit %d\nstdout: %s\nstderr: %s", ref, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	first := run()
	answers, _ := filepath.Glob(filepath.Join(store, "probes", "*", "*"))
	if first != "overlay" && len(answers) == 0 {
		t.Skipf("/bin is on %q and no probe ran: the store keeps this image's layers with marker whiteouts here (its file system refused a whiteout device or user xattrs), so there is no overlay root", first)
	}
	if len(answers) != 1 {
		t.Fatalf("the store keeps %d probe answers, want 1: %q", len(answers), answers)
	}
	b, err := os.ReadFile(answers[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "mounted\n" {
		t.Skipf("the overlay probe found no overlay here (%q): nothing to tell a later run", b)
	}
	if first != "overlay" {
		t.Fatalf("first run: /bin on %q, want overlay", first)
	}

	for _, c := range []struct{ answer, wantOverlay string }{
		{"refused\nrefused by the test", "no"},
		{"mounted\n", "yes"},
	} {
		if err := os.WriteFile(answers[0], []byte(c.answer), 0o600); err != nil {
			t.Fatal(err)
		}
		got := run()
		if overlay := map[bool]string{true: "yes", false: "no"}[got == "overlay"]; overlay != c.wantOverlay || got == "" {
			t.Errorf("the store telling %q: /bin on %q, on an overlay: want %s", c.answer, got, c.wantOverlay)
		}
	}
}
