//go:build linux

package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// miniRootfs builds a rootfs holding only /bin/sh (the host's dash or sh)
// and the libraries it loads, copied in, plus an absolute symlink that
// points outside the root.
func miniRootfs(t *testing.T) (string, string) {
	t.Helper()
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("host has no /bin/sh: %v", err)
	}
	root := sharedTempDir(t)
	files := []string{sh}
	f, err := elf.Open(sh)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			p.ReadAt(b, 0)
			files = append(files, strings.TrimRight(string(b), "\x00"))
		}
	}
	libs, _ := f.ImportedLibraries()
	for _, lib := range libs {
		found := false
		for _, dir := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
			if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
				files = append(files, filepath.Join(dir, lib))
				found = true
				break
			}
		}
		if !found {
			t.Skipf("cannot find %s for a test rootfs", lib)
		}
	}
	for i, src := range files {
		dst := filepath.Join(root, src)
		if i == 0 {
			dst = filepath.Join(root, "bin", "sh")
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(src, dst, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink that would leave the root if followed on the host.
	outside := fmt.Sprintf("/tmp/sbxtest-escape-%d", time.Now().UnixNano())
	if err := os.Symlink(outside, filepath.Join(root, "data")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func TestRootfsReplacesHostBinds(t *testing.T) {
	requireSandbox(t)
	root, outside := miniRootfs(t)
	src := sharedTempDir(t)
	os.WriteFile(filepath.Join(src, "file"), []byte("bound"), 0o644)
	opts := Options{Root: RootDir(root), Binds: []Bind{{Source: src, Target: "/data/x"}}}
	res := run(t, opts, Command("/bin/sh", "-c", `
		test -e /usr && echo "host /usr visible"
		read line < /data/x/file; echo "$line"
		read line < `+outside+`/x/file; echo "$line"
		echo > /bin/new 2>/dev/null && echo "rootfs writable"
		read id < /etc/hostname; echo "$id"`))
	if got := string(res.Stdout); got != "bound\nbound\nsandbox\n" || !res.Success() {
		t.Errorf("inside a rootfs: %q (stderr %q), want the bind through the symlink and nothing of the host", got, res.Stderr)
	}
	// The symlink resolved inside the new root: nothing was made or
	// mounted at its host target.
	if _, err := os.Lstat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bind target through a rootfs symlink reached the host: %s: %v", outside, err)
	}
}

func TestProbe(t *testing.T) {
	r, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(requiredLayers, "cgroup", "seccomp", "seccomp user notification") {
		if _, ok := r.Layer(name); !ok {
			t.Errorf("report has no layer %q:\n%s", name, r)
		}
	}
	if r.Kernel == "" || !strings.Contains(r.String(), "user namespace") {
		t.Errorf("report:\n%s", r)
	}
	// On this host user namespaces work (Run tests pass) exactly when the
	// probe says so.
	_, runErr := newTest(t, Options{}).Run(t.Context(), Command("true"))
	if r.CanRun() != (runErr == nil) {
		t.Errorf("Probe says CanRun=%v but Run returned %v", r.CanRun(), runErr)
	}
	// With the default limits, Run needs the cgroup layer exactly when
	// Probe says it is there.
	if r.CanRun() {
		cg, _ := r.Layer("cgroup")
		_, err := New(Options{}).Run(t.Context(), Command("true"))
		if cg.Available != (err == nil) || (err != nil && !errors.Is(err, ErrNoCgroup)) {
			t.Errorf("Probe's cgroup layer %+v, but Run with default limits returned %v", cg, err)
		}
		// The verdict, on the report's first line, is what a default
		// Run does for this caller.
		first, _, _ := strings.Cut(r.String(), "\n")
		if r.CanRunDefault() != (err == nil) || first != r.Summary() ||
			(err == nil) != (first == "sandboxes can run on this host") {
			t.Errorf("Probe says CanRunDefault=%v, first line %q, but a default Run returned %v", r.CanRunDefault(), first, err)
		}
	}
}

// A rootfs brings its own /etc files and trust store; TrustedCAs extends
// that store, and nothing of the host's /etc shows.
func TestRootfsTrustStore(t *testing.T) {
	requireSandbox(t)
	root, _ := miniRootfs(t)
	ca := newTestCA(t, "rootfs test CA")
	store := "# the rootfs's own store\n"
	for p, content := range map[string]string{"etc/ssl/certs/ca-certificates.crt": store, "etc/protocols": "tcp 6 TCP\n",
		"etc/ssl/private/key.pem": "secret\n"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link in the rootfs's /etc that would name a host file if it were
	// followed on the host.
	if err := os.Symlink("/etc/shadow", filepath.Join(root, "etc", "services")); err != nil {
		t.Fatal(err)
	}
	res := run(t, Options{Root: RootDir(root), TrustedCAs: ca.pem}, Command("/bin/sh", "-c", `
		while read -r l; do echo "$l"; done < /etc/ssl/certs/ca-certificates.crt
		while read -r l; do echo "$l"; done < /etc/protocols
		for p in /etc/services /etc/ssl/private /etc/mime.types /etc/ld.so.cache; do test -e $p && echo "visible $p"; done
		echo "node: $NODE_EXTRA_CA_CERTS"`))
	want := store + strings.TrimSpace(string(mustParseCAs(t, ca.pem))) + "\ntcp 6 TCP\nnode: /etc/ssl/certs/ca-certificates.crt\n"
	if got := string(res.Stdout); got != want || !res.Success() {
		t.Errorf("inside a rootfs with a store: %v\n%s\nstderr %s\nwant\n%s", res.Err(), got, res.Stderr, want)
	}
}

func mustParseCAs(t *testing.T, data []byte) []byte {
	t.Helper()
	out, err := parseTrustedCAs(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
