//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/image"
	"github.com/fumehood/sandbox/internal/recipe"
	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// layeredImage is an image of the host's sh whose upper layers delete
// files and directories of the ones below, hide a directory's contents
// (opaque) and meet their own layer's entries with whiteouts, in each
// order (a whiteout deletes only what is below).
func layeredImage(t *testing.T) v1.Image {
	t.Helper()
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	l1 := imagetest.Layer(t, dir,
		imagetest.Dir("data/", 0o755),
		imagetest.File("data/keep", 0o644, "kept"),
		imagetest.File("data/gone", 0o644, "deleted"),
		imagetest.Dir("data/dir/", 0o755),
		imagetest.File("data/dir/inside", 0o644, "deleted with its dir"),
		imagetest.Dir("data/opq/", 0o755),
		imagetest.File("data/opq/old", 0o644, "hidden by the opaque dir"),
		imagetest.Dir("data/redo/", 0o755),
		imagetest.File("data/redo/old", 0o644, "below a whiteout then a dir"),
		imagetest.Dir("data/late/", 0o755),
		imagetest.File("data/late/old", 0o644, "below a dir then its whiteout"),
		imagetest.File("data/tofile", 0o644, "below"),
		imagetest.Symlink("data/link", "keep"),
	)
	l2 := imagetest.Layer(t, "",
		imagetest.File("data/.wh.gone", 0o644, ""),
		imagetest.File("data/.wh.dir", 0o644, ""),
		imagetest.File("data/opq/.wh..wh..opq", 0o644, ""),
		imagetest.File("data/opq/new", 0o644, "above the opaque mark"),
		imagetest.File("data/.wh.redo", 0o644, ""),
		imagetest.Dir("data/redo/", 0o755),
		imagetest.File("data/redo/new", 0o644, "a whiteout then a dir"),
		imagetest.Dir("data/late/", 0o755),
		imagetest.File("data/late/new", 0o644, "a dir then its whiteout"),
		imagetest.File("data/.wh.late", 0o644, ""),
		imagetest.File("data/.wh.tofile", 0o644, ""),
		imagetest.File("data/tofile", 0o644, "a whiteout then a file"),
		imagetest.File("data/added", 0o644, "added"),
	)
	l3 := imagetest.Layer(t, "",
		imagetest.File("data/.wh.link", 0o644, ""),
		imagetest.File("data/.wh.added", 0o644, ""),
		imagetest.Dir("data/dir/", 0o700),
		imagetest.File("data/dir/back", 0o600, "a new dir where one was deleted"),
	)
	return imagetest.Image(t, "", v1.Config{}, l1, l2, l3)
}

// listScript prints every entry beneath /data, with its type, mode and
// first line, then the file system of each mount of /data, /bin and
// /data's parent, from /proc/self/mountinfo: all with sh's builtins, the
// image's only program.
const listScript = `
list() {
	for f in "$1"/* "$1"/.[!.]*; do
		if [ -L "$f" ]; then echo "$f symlink"
		elif [ -d "$f" ]; then echo "$f dir"; list "$f"
		elif [ -f "$f" ]; then read -r l < "$f"; echo "$f file $l"
		elif [ -e "$f" ]; then echo "$f other"
		fi
	done
}
list /data
while read -r id parent dev root mnt rest; do
	case $mnt in /data|/bin|/lib|/lib64|/usr) echo "mount $mnt ${rest#* - }";; esac
done < /proc/self/mountinfo
`

// TestImageOverlay: a program sees exactly the same tree of a layered
// image whether its root is the overlay of the layers or the hard-linked
// root (forced), and from inside, mountinfo shows which it got. Run as
// root and rootless.
func TestImageOverlay(t *testing.T) {
	requireSandbox(t)
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), layeredImage(t), "v1")
	store := imageStore(t)
	overlay, overlayMounts := imageListing(t, ref, store, false)
	linked, linkedMounts := imageListing(t, ref, store, true)
	want := []string{
		"/data/dir dir", "/data/dir/back file a new dir where one was deleted",
		"/data/keep file kept",
		"/data/late dir", "/data/late/new file a dir then its whiteout",
		"/data/opq dir", "/data/opq/new file above the opaque mark",
		"/data/redo dir", "/data/redo/new file a whiteout then a dir",
		"/data/tofile file a whiteout then a file",
	}
	if !slices.Equal(linked, want) {
		t.Errorf("hard-linked root:\n\t%s\nwant\n\t%s", strings.Join(linked, "\n\t"), strings.Join(want, "\n\t"))
	}
	if !slices.Equal(overlay, linked) {
		t.Errorf("overlay:\n\t%s\nhard-linked root:\n\t%s", strings.Join(overlay, "\n\t"), strings.Join(linked, "\n\t"))
	}
	// Neither form leaves a whiteout in the root the host keeps.
	filepath.WalkDir(filepath.Join(store, "roots"), func(p string, e os.DirEntry, err error) error {
		if err == nil && (e.Type()&os.ModeDevice != 0 || strings.HasPrefix(e.Name(), ".wh.")) {
			t.Errorf("the store's root holds %s", p)
		}
		return nil
	})
	requireOverlayForm(t, store, ref)
	checkRootFS(t, overlayMounts, linkedMounts)
}

// requireOverlayForm skips the rest of the test unless the store at
// store keeps the layers of ref, which it holds, in overlayfs's form. A
// file system that refuses a whiteout device or user xattrs (tmpfs before
// Linux 6.6, as in the test VM) keeps them with marker files, and their
// images get the hard-linked root: what the tests check of the overlay
// cannot be seen there.
func requireOverlayForm(t *testing.T, store, ref string) {
	t.Helper()
	st, err := image.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	img, err := st.Pull(ctx, ref, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img.Layers == nil {
		var uts unix.Utsname
		unix.Uname(&uts)
		t.Skipf("the image store in %s keeps layers with marker whiteouts: its file system refused a whiteout device or user xattrs (Linux %s; tmpfs keeps user xattrs from 6.6), so images get their hard-linked root here and there is no overlay to check",
			store, unix.ByteSliceToString(uts.Release[:]))
	}
}

// overlayProbeErrors are the overlay probes of this process that failed,
// with their stores and ids.
func overlayProbeErrors() []string {
	var out []string
	overlayProbes.Range(func(k, v any) bool {
		if err := v.(*overlayProbe).err; err != nil {
			out = append(out, fmt.Sprintf("%q: %v", k, err))
		}
		return true
	})
	return out
}

// imageListing runs listScript in the image ref, stored in store, with
// its hard-linked root or (where the kernel allows) the overlay of its
// layers, and returns what it printed of /data and of the mounts.
func imageListing(t *testing.T, ref, store string, hardLinked bool) (tree, mounts []string) {
	t.Helper()
	hardLinkedRootOnly.Store(hardLinked)
	defer hardLinkedRootOnly.Store(false)
	res := run(t, Options{Root: &Image{Ref: ref, Store: store}}, Command("/bin/sh", "-c", listScript))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if strings.HasPrefix(l, "mount ") {
			mounts = append(mounts, l)
		} else {
			tree = append(tree, l)
		}
	}
	return tree, mounts
}

// checkRootFS fails unless /data is on an overlay in the mounts
// imageListing found in overlay mode and on no overlay in the other.
func checkRootFS(t *testing.T, overlayMounts, linkedMounts []string) {
	t.Helper()
	fsOf := func(mounts []string, mnt string) string {
		for _, m := range mounts {
			if f := strings.Fields(m); len(f) > 2 && f[1] == mnt {
				return f[2]
			}
		}
		return ""
	}
	if got := fsOf(overlayMounts, "/data"); got != "overlay" {
		t.Errorf("overlay: /data is on %q, want overlay:\n%s\nprobes failed: %s", got, strings.Join(overlayMounts, "\n"), overlayProbeErrors())
	}
	if got := fsOf(linkedMounts, "/data"); got == "overlay" || got == "" {
		t.Errorf("hard-linked root: /data is on %q:\n%s", got, strings.Join(linkedMounts, "\n"))
	}
}

// TestImageOverlayRepeatedLayer: an image that repeats a layer above
// another (which overlayfs would refuse as given) gets an overlay all the
// same, the same tree as its hard-linked root: the repeated layer puts
// back what the one between deleted.
func TestImageOverlayRepeatedLayer(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	base := imagetest.Layer(t, dir, imagetest.Dir("data/", 0o755), imagetest.File("data/x", 0o644, "from the repeated layer"))
	mid := imagetest.Layer(t, "", imagetest.File("data/.wh.x", 0o644, ""), imagetest.File("data/y", 0o644, "from the middle"))
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), imagetest.Image(t, "", v1.Config{}, base, mid, base), "v1")
	store := imageStore(t)
	overlay, overlayMounts := imageListing(t, ref, store, false)
	linked, linkedMounts := imageListing(t, ref, store, true)
	want := []string{"/data/x file from the repeated layer", "/data/y file from the middle"}
	if !slices.Equal(linked, want) || !slices.Equal(overlay, want) {
		t.Errorf("overlay:\n\t%s\nhard-linked root:\n\t%s\nwant\n\t%s", strings.Join(overlay, "\n\t"),
			strings.Join(linked, "\n\t"), strings.Join(want, "\n\t"))
	}
	requireOverlayForm(t, store, ref)
	checkRootFS(t, overlayMounts, linkedMounts)
}

// TestImageOverlayManyLayers: an image of recipe.MaxOverlayLayers layers
// gets an overlay (the kernel takes its lowerdir option, so the limit is
// not set too high), one of a layer more its hard-linked root; both see
// every layer's file.
func TestImageOverlayManyLayers(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	layers := [][]byte{imagetest.Layer(t, dir, imagetest.Dir("data/", 0o755))}
	for i := 1; i <= recipe.MaxOverlayLayers; i++ {
		layers = append(layers, imagetest.Layer(t, "", imagetest.File(fmt.Sprintf("data/f%03d", i), 0o644, "x")))
	}
	store := imageStore(t)
	for _, n := range []int{recipe.MaxOverlayLayers, recipe.MaxOverlayLayers + 1} {
		ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), imagetest.Image(t, "", v1.Config{}, layers[:n]...), "v1")
		tree, mounts := imageListing(t, ref, store, false)
		if len(tree) != n-1 {
			t.Errorf("%d layers: %d files in /data, want %d", n, len(tree), n-1)
		}
		requireOverlayForm(t, store, ref)
		overlay := slices.ContainsFunc(mounts, func(m string) bool { return strings.HasPrefix(m, "mount /data overlay ") })
		if want := n <= recipe.MaxOverlayLayers; overlay != want {
			t.Errorf("%d layers: /data on an overlay: %v, want %v (probes failed: %s)\n%s", n, overlay, want, overlayProbeErrors(), strings.Join(mounts, "\n"))
		}
	}
}

// TestImageOverlayPooledAndLive: a pooled sandbox, prepared before its
// program, and a live one, which runs several programs, get the overlay
// root too, with the same tree.
func TestImageOverlayPooledAndLive(t *testing.T) {
	requireSandbox(t)
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), layeredImage(t), "v1")
	store := imageStore(t)
	want, _ := imageListing(t, ref, store, false)
	requireOverlayForm(t, store, ref)
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"pooled", Options{Start: Pool{Size: 1}}},
		{"live", Options{Live: &Live{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Root = &Image{Ref: ref, Store: store}
			s := newTest(t, opts)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range 2 {
				res, err := s.Run(ctx, Command("/bin/sh", "-c", listScript))
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("run %d: %v %+v %s", i, err, res, res.Stderr)
				}
				out := string(res.Stdout)
				if !strings.Contains(out, "mount /data overlay ") {
					t.Errorf("run %d: /data is not on an overlay:\n%s", i, out)
				}
				if got := strings.Join(want, "\n") + "\n"; !strings.HasPrefix(out, got) {
					t.Errorf("run %d: tree\n%s\nwant it to begin\n%s", i, out, got)
				}
			}
		})
	}
}

// TestImageOverlayProbeStored: the overlay probe's answer is kept in the
// image store, so that a later process (here, this one with its answers
// forgotten) starts no probe child of its own: told the overlay mounts,
// it gives the image's sandbox the overlay; told it was refused, the
// hard-linked root. A command-line run is such a process each time.
func TestImageOverlayProbeStored(t *testing.T) {
	requireSandbox(t)
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), layeredImage(t), "v1")
	store := imageStore(t)
	want, _ := imageListing(t, ref, store, false)
	requireOverlayForm(t, store, ref)
	answers, _ := filepath.Glob(filepath.Join(store, "probes", "*", "*"))
	if len(answers) != 1 {
		t.Fatalf("the store keeps %d probe answers, want 1: %q", len(answers), answers)
	}
	if b, err := os.ReadFile(answers[0]); err != nil || string(b) != probeMounted {
		t.Fatalf("the store's answer: %q, %v; want %q", b, err, probeMounted)
	}

	for _, c := range []struct {
		name, answer string
		overlay      bool
	}{
		{"mounted", probeMounted, true},
		{"refused", probeRefused + "refused by the test", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(answers[0], []byte(c.answer), 0o600); err != nil {
				t.Fatal(err)
			}
			forgetOverlayProbes(store)
			probes := overlayProbeRuns.Load()
			tree, mounts := imageListing(t, ref, store, false)
			if n := overlayProbeRuns.Load() - probes; n != 0 {
				t.Errorf("%d probe children started, want none: the store had the answer", n)
			}
			if !slices.Equal(tree, want) {
				t.Errorf("tree:\n\t%s\nwant\n\t%s", strings.Join(tree, "\n\t"), strings.Join(want, "\n\t"))
			}
			overlay := slices.ContainsFunc(mounts, func(m string) bool { return strings.HasPrefix(m, "mount /data overlay ") })
			if overlay != c.overlay {
				t.Errorf("/data on an overlay: %v, want %v\n%s", overlay, c.overlay, strings.Join(mounts, "\n"))
			}
		})
	}
}

// forgetOverlayProbes drops this process's answers of the overlay probes
// of layers in store, as a new process starts without them.
func forgetOverlayProbes(store string) {
	overlayProbes.Range(func(k, _ any) bool {
		if strings.Contains(k.(string), store+string(filepath.Separator)) {
			overlayProbes.Delete(k)
		}
		return true
	})
}
