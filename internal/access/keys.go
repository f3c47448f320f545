package access

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// apiKey is one line of the key file: a tenant and the SHA-256 of its key.
type apiKey struct {
	tenant string
	hash   [sha256.Size]byte
	line   int
}

// validTenant reports whether name may be a tenant's: 1 to 63 of
// lower-case letters, digits, '.', '_' and '-', the first a letter or a
// digit. It appears in session records, metric labels and audit events,
// unquoted. A loop, not a regexp: the bounded repeat would be compiled at
// every start of the tool, "sandbox run" included, which never needs it.
func validTenant(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

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
		if !validTenant(f[0]) {
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
