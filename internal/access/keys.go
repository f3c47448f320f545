package access

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// apiKey is one line of the key file: a tenant and the SHA-256 of its key.
type apiKey struct {
	tenant string
	hash   [sha256.Size]byte
	line   int
}

// validTenant is what a tenant's name may be: it appears in session
// records, metric labels and audit events, unquoted.
var validTenant = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// HashKey returns the key file's form of key, "sha256:HEX".
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// readKeys reads a key file: lines "TENANT sha256:HEX", '#' comments and
// blank lines ignored.
func readKeys(file string) ([]apiKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: -api-keys: %w", ErrConfig, err)
	}
	var keys []apiKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: -api-keys %s line %d: %s", ErrConfig, file, n, fmt.Sprintf(format, a...))
		}
		if len(f) != 2 {
			return nil, bad("want \"TENANT sha256:HEX\", have %d fields", len(f))
		}
		if !validTenant.MatchString(f[0]) {
			return nil, bad("tenant %q: want lower-case letters, digits, '.', '_' and '-', at most 63", f[0])
		}
		hexed, ok := strings.CutPrefix(f[1], "sha256:")
		sum, err := hex.DecodeString(hexed)
		if !ok || err != nil || len(sum) != sha256.Size {
			return nil, bad("want the key's hash as sha256: and 64 hex digits (printf %%s \"$KEY\" | sha256sum), never the key itself")
		}
		k := apiKey{tenant: f[0], line: n}
		copy(k.hash[:], sum)
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// matchKey finds the key whose hash is that of presented. It compares
// with every line in constant time, so the time taken says nothing of
// which line, or how much of a hash, matched.
func matchKey(keys []apiKey, presented string) (apiKey, bool) {
	sum := sha256.Sum256([]byte(presented))
	var found apiKey
	ok := 0
	for _, k := range keys {
		eq := subtle.ConstantTimeCompare(sum[:], k.hash[:])
		if eq == 1 && ok == 0 {
			found = k
		}
		ok |= eq
	}
	return found, ok == 1
}
