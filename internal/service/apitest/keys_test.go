package apitest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKeys writes an -api-keys file giving each tenant a fresh key, in the
// file's form "TENANT sha256:HEX", and returns its path and the keys.
func writeKeys(t *testing.T, tenants ...string) (string, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var file strings.Builder
	for _, tenant := range tenants {
		keys[tenant] = rand.Text()
		sum := sha256.Sum256([]byte(keys[tenant]))
		file.WriteString(tenant + " sha256:" + hex.EncodeToString(sum[:]) + "\n")
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, keys
}
