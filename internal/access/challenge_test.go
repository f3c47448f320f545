package access

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestChallenge checks a 401's WWW-Authenticate: the realm, invalid_token
// only when a token was given, and the resource metadata's URL.
func TestChallenge(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, file, "alice "+HashKey("k"))
	g, err := New(Config{APIKeys: file}, "127.0.0.1:0", slog.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.ResourceMetadata = "https://sandbox.example.com/.well-known/oauth-protected-resource"
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(w http.ResponseWriter, _ *http.Request, status int, err error) {
		http.Error(w, err.Error(), status)
	})
	for _, tc := range []struct {
		auth         string
		status       int
		invalidToken bool
	}{
		{"", 401, false},
		{"Bearer wrong", 401, true},
		{"Bearer k", 200, false},
	} {
		r := httptest.NewRequest("GET", "http://127.0.0.1/", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		c := w.Header().Get("WWW-Authenticate")
		if w.Code != tc.status {
			t.Errorf("%q: %d, want %d", tc.auth, w.Code, tc.status)
		}
		if tc.status != 401 {
			if c != "" {
				t.Errorf("%q: WWW-Authenticate %q on a %d", tc.auth, c, w.Code)
			}
			continue
		}
		if !strings.HasPrefix(c, `Bearer realm="sandbox"`) || !strings.Contains(c, `resource_metadata="`+g.ResourceMetadata+`"`) ||
			strings.Contains(c, `error="invalid_token"`) != tc.invalidToken {
			t.Errorf("%q: WWW-Authenticate %q, want the realm, the resource metadata, invalid_token %v", tc.auth, c, tc.invalidToken)
		}
	}
}
