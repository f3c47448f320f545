package access

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an OIDC issuer on loopback: a discovery document and a
// JWKS whose keys the test rotates.
type testIssuer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey // by kid, the ones the JWKS serves
}

func newTestIssuer(t *testing.T) *testIssuer {
	is := &testIssuer{keys: map[string]*rsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
		}
		json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *testIssuer) addKey(t *testing.T, kid string) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = k
	is.mu.Unlock()
	return k
}

func (is *testIssuer) dropKey(kid string) {
	is.mu.Lock()
	delete(is.keys, kid)
	is.mu.Unlock()
}

// token signs claims with key as kid.
func token(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWT checks tokens of a test issuer: good ones, and each way one
// can be wrong, then a rotation of the issuer's keys.
func TestJWT(t *testing.T) {
	is := newTestIssuer(t)
	k1 := is.addKey(t, "k1")
	url, _, audit := serve(t, Config{OIDCIssuer: is.srv.URL, OIDCAudience: "sandbox", OIDCTenantClaim: "team"})
	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"iss": is.srv.URL, "aud": "sandbox", "sub": "system:serviceaccount:agents:runner",
			"team": "agents", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	good := token(t, k1, "k1", claims(nil))
	for _, tc := range []struct {
		name, tok string
		status    int
		want      string
	}{
		{"good", good, 200, "agents"},
		{"expired", token(t, k1, "k1", claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), 401, "expired"},
		{"wrong audience", token(t, k1, "k1", claims(func(c map[string]any) { c["aud"] = "other" })), 401, "audience"},
		{"wrong issuer", token(t, k1, "k1", claims(func(c map[string]any) { c["iss"] = "https://evil.example" })), 401, "different provider"},
		{"unknown key", token(t, stranger, "k9", claims(nil)), 401, "JWT was refused"},
		{"signed by another key under k1's id", token(t, stranger, "k1", claims(nil)), 401, "JWT was refused"},
		{"no tenant claim", token(t, k1, "k1", claims(func(c map[string]any) { delete(c, "team") })), 401, `claim "team"`},
	} {
		s, b := call(t, nil, url, "Authorization: Bearer "+tc.tok)
		if s != tc.status || !strings.Contains(b, tc.want) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, s, b, tc.status, tc.want)
		}
		sig := tc.tok[strings.LastIndex(tc.tok, ".")+1:]
		if strings.Contains(audit.String(), sig) {
			t.Errorf("%s: the audit trail holds the token", tc.name)
		}
	}

	// Rotation: the issuer adds k2 and signs with it; a token of k2 works
	// without a restart. Then k1 is dropped from the JWKS: the verifier
	// holds the keys it fetched, so a k1 token is refused only once a
	// token with an unknown key has made it fetch the set again.
	k2 := is.addKey(t, "k2")
	if s, b := call(t, nil, url, "Authorization: Bearer "+token(t, k2, "k2", claims(nil))); s != 200 || b != "agents" {
		t.Errorf("a token of the rotated-in key: %d %q, want 200", s, b)
	}
	is.dropKey("k1")
	call(t, nil, url, "Authorization: Bearer "+token(t, stranger, "k3", claims(nil))) // makes it refetch
	// The library answers the request that made it refetch before it
	// replaces the keys it holds, so the next request may still see k1
	// for a moment; a verifier that never drops it fails here.
	eventually(t, "a token of the key the issuer dropped is refused", func() bool {
		s, _ := call(t, nil, url, "Authorization: Bearer "+good)
		return s == 401
	})
}

// TestJWTIssuerDown starts while the issuer is unreachable, and refuses
// tokens saying so.
func TestJWTIssuerDown(t *testing.T) {
	is := newTestIssuer(t)
	k := is.addKey(t, "k")
	addr := is.srv.URL
	is.srv.Close()
	url, _, _ := serve(t, Config{OIDCIssuer: addr, OIDCAudience: "a"})
	tok := token(t, k, "k", map[string]any{"iss": addr, "aud": "a", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	if s, b := call(t, nil, url, "Authorization: Bearer "+tok); s != 401 || !strings.Contains(b, "cannot be reached") {
		t.Errorf("issuer down: %d %q, want 401 saying the issuer cannot be reached", s, b)
	}
}
