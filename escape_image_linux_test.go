//go:build linux

package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestEscapeImage runs a program in a hostile image: symlinks that lead
// out of its root (an /etc pointing at a host directory, links to a host
// file, to /proc/1/root and up "../.."), set-uid and set-gid files, device
// nodes and a hard link to a symlink to a host file. The program gains
// nothing: every link resolves inside the sandbox, no set-id bit takes
// effect, no device exists, nothing of the host is read or written; and
// nothing changes on the host. A second image, with hard links and names
// that reach host paths, is refused at the pull and leaves the host and
// the store as they were. What stops it: the store unpacks through an
// os.Root and drops set-id bits and devices; the sandbox binds the root
// read-only, resolves its entries beneath it, and runs with no_new_privs.
func TestEscapeImage(t *testing.T) {
	requireSandbox(t)
	host := sharedTempDir(t)
	secret := filepath.Join(host, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	beforeSecret, _ := os.Stat(secret)
	hostEtc := filepath.Join(host, "host-etc") // made by nobody; must stay absent
	dir := t.TempDir()
	imagetest.HostShell(t, dir)
	sh, err := os.ReadFile(filepath.Join(dir, "bin", "sh"))
	if err != nil {
		t.Fatal(err)
	}
	hostile := imagetest.Image(t, "", v1.Config{Env: []string{"PATH=/bin"}}, imagetest.Layer(t, dir,
		imagetest.Symlink("etc", hostEtc),
		imagetest.Symlink("secret", secret),
		imagetest.Symlink("p1", "/proc/1/root"+secret),
		imagetest.Symlink("up", "../../../../../../.."+secret),
		// Named sh in directories of their own: a busybox sh (the VM's)
		// runs the applet its argv[0] names.
		imagetest.Dir("suid/", 0o755),
		imagetest.File("suid/sh", 0o4755, string(sh)),
		imagetest.Dir("sgid/", 0o755),
		imagetest.File("sgid/sh", 0o2755, string(sh)),
		imagetest.Entry{Name: "mem", Type: tar.TypeChar, Mode: 0o666},
		imagetest.Entry{Name: "disk", Type: tar.TypeBlock, Mode: 0o666},
		imagetest.Dir("data/", 0o755),
		imagetest.Symlink("data/to-secret", secret),
		imagetest.Hardlink("data/hard-to-link", "data/to-secret"),
	))
	ref := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), hostile, "v1")
	store := imageStore(t)
	s := newTest(t, Options{Root: &Image{Ref: ref, Store: store}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Command("/bin/sh", "-c", `
		for p in /secret /p1 /up /data/to-secret /data/hard-to-link `+secret+`; do
			if read -r l < $p; then echo "read $p: $l"; fi
		done 2>/dev/null
		for p in /secret /data/to-secret /etc/passwd-new `+hostEtc+`/x; do
			(echo pwned > $p) 2>/dev/null && echo "wrote $p"
		done
		for p in /mem /disk /dev/sda /dev/mem; do test -e $p && echo "device $p"; done
		ids='while read -r k a b c d; do case $k in Uid:|Gid:) echo "$k $a $b $c";; esac; done < /proc/self/status'
		/bin/sh -c "$ids"; /suid/sh -c "$ids"; /sgid/sh -c "$ids"
		test -u /suid/sh && echo "set-uid bit kept"
		test -g /sgid/sh && echo "set-gid bit kept"
		true`))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := string(res.Stdout)
	t.Logf("the hostile image's program saw:\n%s%s", out, res.Stderr)
	for _, bad := range []string{"read ", "wrote ", "device ", "bit kept", " 0 ", "host secret"} {
		if strings.Contains(out, bad) {
			t.Errorf("the hostile image gained %q:\n%s", bad, out)
		}
	}
	if want := "Uid:\t1000"; !strings.Contains(strings.ReplaceAll(out, " ", "\t"), want) {
		t.Errorf("the program's ids are not the sandbox's (%s):\n%s%s", want, out, res.Stderr)
	}
	if n := strings.Count(out, "Uid:"); n != 3 {
		t.Errorf("%d of the 3 shells reported their ids (the set-id copies did not run?):\n%s%s", n, out, res.Stderr)
	}
	s.Close()

	// Nothing on the host changed, and the store holds no set-id file or
	// device.
	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("the host's file now holds %q", b)
	}
	if after, _ := os.Stat(secret); after.Sys().(*syscall.Stat_t).Nlink != beforeSecret.Sys().(*syscall.Stat_t).Nlink {
		t.Errorf("the host file's link count changed")
	}
	if _, err := os.Lstat(hostEtc); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists on the host: %v", hostEtc, err)
	}
	filepath.WalkDir(store, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, _ := os.Lstat(p)
		if m := fi.Mode(); m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			t.Errorf("the store holds %s with mode %v", p, m)
		}
		return nil
	})

	// Hard links and names that reach host paths: refused at the pull.
	for name, e := range map[string]imagetest.Entry{
		"hard link to a host file": imagetest.Hardlink("stolen", secret),
		"hard link up and out":     imagetest.Hardlink("stolen", "../../../../../../.."+secret),
		"name up and out":          imagetest.File("../../../../../../.."+host+"/planted", 0o644, "planted"),
		"absolute name":            imagetest.File(host+"/planted", 0o644, "planted"),
	} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			img := imagetest.Image(t, "", v1.Config{}, imagetest.Layer(t, "", e))
			ref := imagetest.WriteLayout(t, filepath.Join(d, "layout"), img, "v1")
			store := imageStore(t)
			s := newTest(t, Options{Root: &Image{Ref: ref, Store: store}})
			_, err := s.Run(ctx, Command("/bin/sh", "-c", "true"))
			if !errors.Is(err, ErrBadImage) {
				t.Errorf("Run: %v, want an error matching ErrBadImage", err)
			}
			// After Close, which waits for a pool's filling, whose pull
			// of the image may come after the Run's.
			s.Close()
			if left := storeEntries(t, store); len(left) > 0 {
				t.Errorf("the store holds %v", left)
			}
			if _, err := os.Lstat(filepath.Join(host, "planted")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the image planted a file on the host: %v", err)
			}
			if after, _ := os.Stat(secret); after.Sys().(*syscall.Stat_t).Nlink != beforeSecret.Sys().(*syscall.Stat_t).Nlink {
				t.Errorf("the host file's link count changed")
			}
		})
	}
}
