package recipe

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTrustBundleInRootfs: beneath a rootfs, a bundle is found as a file
// or through a link that stays inside, and a link that leads to a host
// file finds nothing, whether or not that file exists.
func TestTrustBundleInRootfs(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host-bundle.pem")
	if err := os.WriteFile(host, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		make func(certs string) error
		want string
	}{
		{"file", func(certs string) error {
			return os.WriteFile(filepath.Join(certs, "ca-certificates.crt"), []byte("pem\n"), 0o644)
		}, "/etc/ssl/certs/ca-certificates.crt"},
		{"link inside", func(certs string) error {
			if err := os.WriteFile(filepath.Join(certs, "bundle.pem"), []byte("pem\n"), 0o644); err != nil {
				return err
			}
			return os.Symlink("bundle.pem", filepath.Join(certs, "ca-certificates.crt"))
		}, "/etc/ssl/certs/ca-certificates.crt"},
		{"link to a host file", func(certs string) error {
			return os.Symlink(host, filepath.Join(certs, "ca-certificates.crt"))
		}, ""},
		{"link climbing out", func(certs string) error {
			rel, err := filepath.Rel(certs, host)
			if err != nil {
				return err
			}
			return os.Symlink(rel, filepath.Join(certs, "ca-certificates.crt"))
		}, ""},
		{"none", func(string) error { return nil }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			certs := filepath.Join(base, "etc", "ssl", "certs")
			if err := os.MkdirAll(certs, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := c.make(certs); err != nil {
				t.Fatal(err)
			}
			if got := TrustBundleIn(base, false); got != c.want {
				t.Errorf("TrustBundleIn = %q, want %q", got, c.want)
			}
			if got := TrustBundleIn(base, true); c.want == "" && got != newTrustBundle {
				t.Errorf("TrustBundleIn with TrustedCAs = %q, want %q", got, newTrustBundle)
			}
		})
	}
}
