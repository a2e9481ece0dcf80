package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/nomicore/nomicore/clock"
)

// signer mints tokens with one key, as an application's server would (go-jose).
type signer struct {
	alg jose.SignatureAlgorithm
	key any // the private key, or the secret
	kid string
}

func (s signer) mint(t testing.TB, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if s.kid != "" {
		opts = opts.WithHeader("kid", s.kid)
	}
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sg).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawToken builds a compact token by hand (for algorithms no library would sign with).
func rawToken(header, claims map[string]any, sign func(input []byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(input)))
}

func jwk(t *testing.T, pub any, kid string, alg jose.SignatureAlgorithm) jose.JSONWebKey {
	t.Helper()
	return jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(alg), Use: "sig"}
}

func jwks(t *testing.T, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pemPublic(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

var (
	testNow    = time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)
	testSecret = []byte("0123456789abcdef0123456789abcdef-hs256")
)

// claimsFor is a valid claim set at testNow, changed by the modifiers.
func claimsFor(sub string, mods ...func(map[string]any)) map[string]any {
	c := map[string]any{"sub": sub, "exp": testNow.Add(time.Hour).Unix(), "iat": testNow.Unix(), "ns": []string{nsA},
		"iss": "https://app.example", "aud": "nomicore"}
	for _, m := range mods {
		m(c)
	}
	return c
}

func set(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
func del(k string) func(map[string]any)        { return func(c map[string]any) { delete(c, k) } }

func refusedBy(t *testing.T, err error, check string) {
	t.Helper()
	var r *ClientRefusal
	if !errors.As(err, &r) || r.Check != check {
		t.Fatalf("want a refusal by the %s check, got %v", check, err)
	}
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a refusal must match ErrUnauthenticated: %v", err)
	}
}

// Every check of a signed token, with tokens minted by go-jose: HS256 with the secret,
// ES256, EdDSA and RS256 public keys from a JWKS file chosen by kid; what each refusal says.
func TestJWT_Checks(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keysFile, jwks(t, jwk(t, &ec.PublicKey, "ec-1", jose.ES256), jwk(t, edPub, "ed-1", jose.EdDSA),
		jwk(t, &rs.PublicKey, "rs-1", jose.RS256)), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(testNow)
	v, err := NewJWTVerifier(JWTOptions{Secret: testSecret, KeysFile: keysFile, Issuer: "https://app.example", Audience: "nomicore", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	hs := signer{alg: jose.HS256, key: testSecret}
	es := signer{alg: jose.ES256, key: ec, kid: "ec-1"}
	ed := signer{alg: jose.EdDSA, key: edPriv, kid: "ed-1"}
	rsS := signer{alg: jose.RS256, key: rs, kid: "rs-1"}
	ctx := context.Background()
	check := func(tok string) (ClientGrant, error) {
		return v.AuthenticateClient(ctx, ClientCredential{Token: tok, NamespaceID: nsA})
	}

	for name, s := range map[string]signer{"HS256": hs, "ES256": es, "EdDSA": ed, "RS256": rsS} {
		g, err := check(s.mint(t, claimsFor("alice")))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if g.Name != "alice" || g.User != "alice" || g.Kind != CredentialJWT || g.ReadOnly || !g.Allows(nsA) || g.Allows(nsB) ||
			!g.Expires.Equal(testNow.Add(time.Hour)) {
			t.Fatalf("%s: grant %+v", name, g)
		}
	}
	g, err := check(es.mint(t, claimsFor("bob", set("scope", "read-only"), set("ns", []string{"*"}))))
	if err != nil || !g.ReadOnly || !g.Allows(nsB) {
		t.Fatalf("read-only, every namespace: %+v %v", g, err)
	}
	// A token without kid is checked with the keys of its algorithm.
	noKid := es
	noKid.kid = ""
	if _, err := check(noKid.mint(t, claimsFor("carol"))); err != nil {
		t.Fatalf("ES256 without kid: %v", err)
	}

	cases := []struct {
		name, check string
		tok         string
	}{
		{"expired", CheckExpired, hs.mint(t, claimsFor("a", set("exp", testNow.Add(-time.Second).Unix()), set("iat", testNow.Add(-time.Hour).Unix())))},
		{"expires now", CheckExpired, hs.mint(t, claimsFor("a", set("exp", testNow.Unix())))},
		{"not yet valid", CheckNotYetValid, hs.mint(t, claimsFor("a", set("nbf", testNow.Add(31*time.Second).Unix())))},
		{"issued in the future", CheckNotYetValid, hs.mint(t, claimsFor("a", set("iat", testNow.Add(time.Minute).Unix())))},
		{"no exp", CheckClaims, hs.mint(t, claimsFor("a", del("exp")))},
		{"no sub", CheckClaims, hs.mint(t, claimsFor("", del("sub")))},
		{"no ns", CheckClaims, hs.mint(t, claimsFor("a", del("ns")))},
		{"a bad ns", CheckClaims, hs.mint(t, claimsFor("a", set("ns", []string{"docs"})))},
		{"ns not a list", CheckClaims, hs.mint(t, claimsFor("a", set("ns", nsA)))},
		{"a bad scope", CheckClaims, hs.mint(t, claimsFor("a", set("scope", "admin")))},
		{"too long a lifetime", CheckClaims, hs.mint(t, claimsFor("a", set("exp", testNow.Add(25*time.Hour).Unix())))},
		{"too long without iat", CheckClaims, hs.mint(t, claimsFor("a", del("iat"), set("exp", testNow.Add(25*time.Hour).Unix())))},
		{"wrong issuer", CheckIssuer, hs.mint(t, claimsFor("a", set("iss", "https://evil.example")))},
		{"no issuer", CheckIssuer, hs.mint(t, claimsFor("a", del("iss")))},
		{"wrong audience", CheckAudience, hs.mint(t, claimsFor("a", set("aud", []string{"other", "more"})))},
		{"bad signature", CheckSignature, signer{alg: jose.ES256, key: other, kid: "ec-1"}.mint(t, claimsFor("a"))},
		{"wrong secret", CheckSignature, signer{alg: jose.HS256, key: []byte(strings.Repeat("x", 40))}.mint(t, claimsFor("a"))},
		{"unknown kid", CheckUnknownKey, signer{alg: jose.ES256, key: other, kid: "ec-9"}.mint(t, claimsFor("a"))},
		{"a kid of another kind", CheckAlgorithm, signer{alg: jose.ES256, key: ec, kid: "rs-1"}.mint(t, claimsFor("a"))},
		{"alg none", CheckAlgorithm, rawToken(map[string]any{"alg": "none", "typ": "JWT"}, claimsFor("a"), func([]byte) []byte { return nil })},
		{"alg HS512", CheckAlgorithm, rawToken(map[string]any{"alg": "HS512"}, claimsFor("a"), func([]byte) []byte { return []byte("x") })},
		// HS256 "signed" with the RSA public key's PEM as the secret (key confusion): the kid
		// names the RSA key, which verifies RS256 only.
		{"HS256 with the RSA public key, by kid", CheckAlgorithm, rawToken(map[string]any{"alg": "HS256", "kid": "rs-1"}, claimsFor("a"),
			func(in []byte) []byte {
				m := hmac.New(sha256.New, pemPublic(t, &rs.PublicKey))
				m.Write(in)
				return m.Sum(nil)
			})},
		// Without kid it is checked with the secret only, and fails there.
		{"HS256 with the RSA public key, no kid", CheckSignature, rawToken(map[string]any{"alg": "HS256"}, claimsFor("a"),
			func(in []byte) []byte {
				m := hmac.New(sha256.New, pemPublic(t, &rs.PublicKey))
				m.Write(in)
				return m.Sum(nil)
			})},
		{"not a JWT", CheckMalformed, "a.b.c"},
		{"crit header", CheckMalformed, rawToken(map[string]any{"alg": "HS256", "crit": []string{"exp"}}, claimsFor("a"), func([]byte) []byte { return nil })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := check(c.tok)
			refusedBy(t, err, c.check)
			if strings.Contains(err.Error(), c.tok) {
				t.Fatalf("the refusal repeats the token: %v", err)
			}
		})
	}

	// Skew: nbf 29 s ahead passes, and exp has none (checked above: exp == now refuses).
	if _, err := check(hs.mint(t, claimsFor("a", set("nbf", testNow.Add(29*time.Second).Unix())))); err != nil {
		t.Fatalf("nbf within the skew: %v", err)
	}
	// The grant expires: RecheckClient says so once the clock passes exp.
	g, err = check(hs.mint(t, claimsFor("dan", set("exp", testNow.Add(time.Minute).Unix()))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.RecheckClient(g); err != nil {
		t.Fatalf("recheck before exp: %v", err)
	}
	clk.Advance(time.Minute)
	_, err = v.RecheckClient(g)
	refusedBy(t, err, CheckExpired)
}

// Without a secret, an HS256 token finds no key (the algorithm is refused), whatever it was
// signed with; the keys file's PEM keys work by their thumbprint and by a kid header.
func TestJWT_PEMKeysAndNoSecret(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&rs.PublicKey)
	keys := append(pemPublic(t, &ec.PublicKey), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{"kid": "rsa-2030"}, Bytes: der})...)
	path := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(path, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := NewJWTVerifier(JWTOptions{KeysFile: path, Clock: clock.NewFake(testNow)})
	if err != nil {
		t.Fatal(err)
	}
	thumb, _ := thumbprint(&ec.PublicKey)
	ctx := context.Background()
	for _, s := range []signer{{alg: jose.ES256, key: ec, kid: thumb}, {alg: jose.ES256, key: ec}, {alg: jose.RS256, key: rs, kid: "rsa-2030"}} {
		if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s.mint(t, claimsFor("a"))}); err != nil {
			t.Fatalf("kid %q: %v", s.kid, err)
		}
	}
	pemKey := pemPublic(t, &rs.PublicKey)
	tok := rawToken(map[string]any{"alg": "HS256"}, claimsFor("a"), func(in []byte) []byte { m := hmac.New(sha256.New, pemKey); m.Write(in); return m.Sum(nil) })
	_, err = v.AuthenticateClient(ctx, ClientCredential{Token: tok})
	refusedBy(t, err, CheckAlgorithm)
}

// What the key sources refuse at start.
func TestJWT_KeysRefused(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 1024)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	privDER, _ := x509.MarshalPKCS8PrivateKey(p256)
	for name, data := range map[string][]byte{
		"P-384":       pemPublic(t, &ec.PublicKey),
		"RSA 1024":    pemPublic(t, &rs.PublicKey),
		"private key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}),
		"empty":       nil,
		"garbage":     []byte("hello"),
		"alg differs": jwks(t, jwk(t, &p256.PublicKey, "k", jose.RS256)),
		"same kid":    jwks(t, jwk(t, &p256.PublicKey, "k", jose.ES256), jwk(t, &p256.PublicKey, "k", jose.ES256)),
		"a secret":    []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0","kid":"s"}]}`),
	} {
		path := filepath.Join(t.TempDir(), "keys")
		os.WriteFile(path, data, 0o600)
		if _, err := NewJWTVerifier(JWTOptions{KeysFile: path}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewJWTVerifier(JWTOptions{Secret: []byte("short")}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short secret: %v", err)
	}
	if _, err := NewJWTVerifier(JWTOptions{}); err == nil {
		t.Error("no key source accepted")
	}
}

// Rotation in the keys file: a new key (new kid) is used as soon as the file changed, the
// retired one is refused once it left the file.
func TestJWT_KeysFileRotation(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	path := filepath.Join(t.TempDir(), "keys.json")
	write := func(keys ...jose.JSONWebKey) {
		if err := WriteAtomic(path, jwks(t, keys...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(jwk(t, &k1.PublicKey, "2030-01", jose.ES256))
	clk := clock.NewFake(testNow)
	v, err := NewJWTVerifier(JWTOptions{KeysFile: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s1, s2 := signer{alg: jose.ES256, key: k1, kid: "2030-01"}, signer{alg: jose.ES256, key: k2, kid: "2030-02"}
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s1.mint(t, claimsFor("a"))}); err != nil {
		t.Fatal(err)
	}
	write(jwk(t, &k1.PublicKey, "2030-01", jose.ES256), jwk(t, &k2.PublicKey, "2030-02", jose.ES256))
	// An unknown kid makes the verifier look at the file at once.
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s2.mint(t, claimsFor("a"))}); err != nil {
		t.Fatalf("the new key: %v", err)
	}
	write(jwk(t, &k2.PublicKey, "2030-02", jose.ES256))
	clk.Advance(keysFileCheckInterval)
	_, err = v.AuthenticateClient(ctx, ClientCredential{Token: s1.mint(t, claimsFor("a"))})
	refusedBy(t, err, CheckUnknownKey)
	// A file that no longer parses leaves the keys in force.
	if err := WriteAtomic(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(keysFileCheckInterval)
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s2.mint(t, claimsFor("a"))}); err != nil {
		t.Fatalf("after a broken file: %v", err)
	}
}

// The JWKS URL: fetched by Run, fetched again for an unknown kid at most once per
// JWKSUnknownKid, and a node that never got the keys answers "unavailable" (503).
func TestJWT_JWKSURL(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var mu sync.Mutex
	doc := jwks(t, jwk(t, &k1.PublicKey, "k1", jose.ES256))
	var fetches atomic.Int32
	failing := atomic.Bool{}
	failing.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if failing.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.Write(doc)
	}))
	defer srv.Close()
	clk := clock.NewFake(testNow)
	v, err := NewJWTVerifier(JWTOptions{JWKSURL: srv.URL, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s1, s2 := signer{alg: jose.ES256, key: k1, kid: "k1"}, signer{alg: jose.ES256, key: k2, kid: "k2"}
	_, err = v.AuthenticateClient(ctx, ClientCredential{Token: s1.mint(t, claimsFor("a"))})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.RetryAfter <= 0 {
		t.Fatalf("keys never fetched: want unavailable, got %v", err)
	}
	failing.Store(false)
	// Within JWKSUnknownKid of the failed fetch, no second fetch.
	n := fetches.Load()
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s1.mint(t, claimsFor("a"))}); !errors.As(err, &ue) || fetches.Load() != n {
		t.Fatalf("rate limit: %v, fetches %d → %d", err, n, fetches.Load())
	}
	clk.Advance(DefaultJWKSUnknownKid)
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s1.mint(t, claimsFor("a"))}); err != nil {
		t.Fatalf("after the fetch: %v", err)
	}
	// Rotation: k2 appears at the URL; the first token naming it fetches again (the
	// interval has passed), a second unknown kid soon after does not.
	mu.Lock()
	doc = jwks(t, jwk(t, &k1.PublicKey, "k1", jose.ES256), jwk(t, &k2.PublicKey, "k2", jose.ES256))
	mu.Unlock()
	clk.Advance(DefaultJWKSUnknownKid)
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s2.mint(t, claimsFor("a"))}); err != nil {
		t.Fatalf("the rotated key: %v", err)
	}
	n = fetches.Load()
	_, err = v.AuthenticateClient(ctx, ClientCredential{Token: signer{alg: jose.ES256, key: k2, kid: "k3"}.mint(t, claimsFor("a"))})
	refusedBy(t, err, CheckUnknownKey)
	if fetches.Load() != n {
		t.Fatalf("an unknown kid fetched again within the interval")
	}
	// Run's refresh: it fetches at once, then every JWKSRefresh; a failed fetch keeps the keys.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { v.Run(runCtx); close(done) }()
	waitFor(t, func() bool { return fetches.Load() == n+1 })
	failing.Store(true)
	clk.WaitForTimers(1, 5*time.Second)
	clk.Advance(DefaultJWKSRefresh)
	waitFor(t, func() bool { return fetches.Load() == n+2 })
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: s2.mint(t, claimsFor("a"))}); err != nil {
		t.Fatalf("after a failed refresh: %v", err)
	}
	cancel()
	<-done
}

// FuzzSignedToken: whatever a client presents as a signed token, the verifier answers a
// classified refusal (or, for a token signed with the secret, a grant that holds its
// claims) and never panics.
func FuzzSignedToken(f *testing.F) {
	hs := signer{alg: jose.HS256, key: testSecret}
	f.Add(hs.mint(f, claimsFor("alice")))
	f.Add(hs.mint(f, claimsFor("bob", set("ns", []string{"*"}), set("scope", "read-only"), set("jti", "x"))))
	f.Add(rawToken(map[string]any{"alg": "none"}, claimsFor("a"), func([]byte) []byte { return nil }))
	f.Add(rawToken(map[string]any{"alg": "ES256", "kid": "k"}, claimsFor("a"), func([]byte) []byte { return []byte{1, 2, 3} }))
	f.Add("a.b.c")
	f.Add("..")
	f.Add("eyJhbGciOiJIUzI1NiJ9.e30.")
	v, err := NewJWTVerifier(JWTOptions{Secret: testSecret, Clock: clock.NewFake(testNow)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		g, err := v.AuthenticateClient(context.Background(), ClientCredential{Token: tok, NamespaceID: nsA})
		if err != nil {
			var r *ClientRefusal
			if !errors.As(err, &r) || r.Check == "" || r.Reason == "" {
				t.Fatalf("an unclassified refusal: %v", err)
			}
			if len(tok) > 8 && strings.Contains(r.Reason, tok) {
				t.Fatalf("the refusal repeats the token")
			}
			return
		}
		if g.Kind != CredentialJWT || g.Name == "" || len(g.Namespaces) == 0 || !g.Expires.After(testNow) {
			t.Fatalf("a grant that does not hold its claims: %+v", g)
		}
	})
}
