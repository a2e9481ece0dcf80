package yws

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/yws/hocuspocus"
)

var jwtSecret = []byte("a-secret-of-more-than-32-bytes-for-hs256")

// mint signs claims as an application's server would (go-jose).
func mint(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// configMap is a store's configuration map in memory (the revocation list's store).
type configMap struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *configMap) PutConfig(_ context.Context, k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[k] = v
	return nil
}

func (s *configMap) Config(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v, nil
	}
	return nil, errors.New("not found")
}

func (s *configMap) DeleteConfig(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

func (s *configMap) ConfigKeys(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// signedEnv is an endpoint whose editors present signed tokens (and the static ones of
// newEnv), on a fake clock, with a revocation list that re-checks the editors.
type signedEnv struct {
	*env
	clk     *clock.Fake
	ec      *ecdsa.PrivateKey
	revoked *auth.RevocationList
}

func newSignedEnv(t *testing.T, tweak func(*auth.ClientChain, *clock.Fake)) *signedEnv {
	t.Helper()
	se := &signedEnv{clk: clock.NewFake(time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC))}
	se.ec, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &se.ec.PublicKey, KeyID: "app-1", Algorithm: "ES256", Use: "sig"}}})
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	se.revoked, err = auth.NewRevocationList(context.Background(), auth.RevocationOptions{Store: &configMap{},
		Lifetime: auth.DefaultJWTMaxLifetime, Clock: se.clk, OnChange: func() { se.srv.Revalidate() }})
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewJWTVerifier(auth.JWTOptions{Secret: jwtSecret, KeysFile: path, Audience: "nomicore", Issuer: "app",
		Revocations: se.revoked, Clock: se.clk})
	if err != nil {
		t.Fatal(err)
	}
	se.env = newEnv(t, func(o *Options) {
		chain := &auth.ClientChain{Static: o.Clients, Signed: v}
		if tweak != nil {
			tweak(chain, se.clk)
		}
		o.Clients, o.Clock = chain, se.clk
	})
	return se
}

// token is an ES256 token of user for ns, valid for ttl from the fake clock's now.
func (se *signedEnv) token(user string, ttl time.Duration, mods map[string]any) string {
	now := se.clk.Now()
	c := map[string]any{"sub": user, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "ns": []string{se.ns}, "aud": "nomicore", "iss": "app"}
	for k, v := range mods {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return mint(se.t, jose.ES256, se.ec, "app-1", c)
}

// Signed tokens before the upgrade: a valid one opens the document, each failed check is
// refused with its status and a JSON body naming the check — never the token.
func TestSignedTokens_Admission(t *testing.T) {
	se := newSignedEnv(t, nil)
	ok := se.token("alice", time.Hour, nil)
	c := se.dial(ok)
	c.sync()
	hs := mint(t, jose.HS256, jwtSecret, "", map[string]any{"sub": "bob", "exp": se.clk.Now().Add(time.Hour).Unix(), "ns": []string{"*"},
		"aud": "nomicore", "iss": "app"})
	se.dial(hs).sync()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name, token string
		status      int
		check       string
	}{
		{"expired", se.token("a", -time.Second, nil), 401, auth.CheckExpired},
		{"not yet valid", se.token("a", time.Hour, map[string]any{"nbf": se.clk.Now().Add(time.Minute).Unix()}), 401, auth.CheckNotYetValid},
		{"bad signature", mint(t, jose.ES256, other, "app-1", map[string]any{"sub": "a", "exp": se.clk.Now().Add(time.Hour).Unix(), "ns": []string{"*"}}), 401, auth.CheckSignature},
		{"unknown key", mint(t, jose.ES256, other, "app-2", map[string]any{"sub": "a", "exp": se.clk.Now().Add(time.Hour).Unix(), "ns": []string{"*"}}), 401, auth.CheckUnknownKey},
		{"audience", se.token("a", time.Hour, map[string]any{"aud": "elsewhere"}), 401, auth.CheckAudience},
		{"issuer", se.token("a", time.Hour, map[string]any{"iss": "evil"}), 401, auth.CheckIssuer},
		{"namespace not granted", se.token("a", time.Hour, map[string]any{"ns": []string{"ns-00000000000000000000000000000001"}}), 403, "namespace-not-granted"},
		{"unknown static token", "no-such-token", 401, auth.CheckUnknownToken},
	} {
		status, body := se.status(se.ns, tc.token, nil)
		var b struct{ Code, Check, Message string }
		if err := json.Unmarshal([]byte(body), &b); err != nil || status != tc.status || b.Check != tc.check || b.Message == "" {
			t.Errorf("%s: %d %s, want %d with check %s", tc.name, status, body, tc.status, tc.check)
		}
		if strings.Contains(body, tc.token) {
			t.Errorf("%s: the body repeats the token", tc.name)
		}
		if got := se.metric("nomicore_client_rejections_total", "reason", tc.check); got < 1 {
			t.Errorf("%s: rejections counted %v", tc.name, got)
		}
	}
	// The editors are listed by their user, with their credential's kind and expiry.
	eds := se.srv.EditorsOf(se.ns)
	if len(eds) != 2 || eds[0].Name != "alice" || eds[0].User != "alice" || eds[0].Credential != auth.CredentialJWT ||
		!eds[0].Expires.Equal(se.clk.Now().Add(time.Hour)) || eds[1].Name != "bob" {
		t.Fatalf("editors %+v", eds)
	}
}

// An open connection whose token expires is closed with 4401 at exp (on the fake clock), not
// before; one without expiry stays.
func TestSignedTokens_ExpiryCloses(t *testing.T) {
	se := newSignedEnv(t, nil)
	short := se.dial(se.token("alice", time.Minute, nil))
	short.sync()
	long := se.dial(se.token("bob", 2*time.Minute, nil))
	long.sync()
	static := se.dial("writer")
	static.sync()
	se.clk.Advance(59 * time.Second)
	short.insert(0, "still open ")
	long.waitText("still open ")
	se.clk.Advance(time.Second)
	if code := short.waitClosed(); code != 4401 {
		t.Fatalf("at exp: close %d, want 4401", code)
	}
	if short.closed() == nil || !strings.Contains(short.closed().Error(), "expired") {
		t.Errorf("close reason: %v", short.closed())
	}
	long.insert(0, "x")
	static.waitText("xstill open ")
	se.clk.Advance(time.Minute)
	if code := long.waitClosed(); code != 4401 {
		t.Fatalf("the second token: close %d", code)
	}
	static.insert(0, "y")
	static.waitText("yxstill open ")
	waitMetric(t, se.env, "nomicore_client_disconnects_total", 2, "reason", "token-expired")
}

// A revocation closes the user's open editors (4401) and refuses the user's tokens issued
// before it; a jti revocation refuses that token only; other users go on.
func TestSignedTokens_Revocation(t *testing.T) {
	se := newSignedEnv(t, nil)
	aliceTok := se.token("alice", time.Hour, map[string]any{"jti": "a-1"})
	alice := se.dial(aliceTok)
	alice.sync()
	bobTok := se.token("bob", time.Hour, map[string]any{"jti": "b-1"})
	bob := se.dial(bobTok)
	bob.sync()
	se.clk.Advance(time.Second)
	if _, err := se.revoked.Revoke(context.Background(), "alice", ""); err != nil {
		t.Fatal(err)
	}
	if code := alice.waitClosed(); code != 4401 {
		t.Fatalf("revoked: close %d", code)
	}
	if !strings.Contains(alice.closed().Error(), "revoked") {
		t.Errorf("close reason: %v", alice.closed())
	}
	if status, body := se.status(se.ns, aliceTok, nil); status != 401 || !strings.Contains(body, `"check":"revoked"`) {
		t.Fatalf("the revoked token again: %d %s", status, body)
	}
	se.clk.Advance(time.Second)
	se.dial(se.token("alice", time.Hour, nil)).sync() // issued after the revocation
	bob.insert(0, "bob goes on")
	if _, err := se.revoked.Revoke(context.Background(), "", "b-1"); err != nil {
		t.Fatal(err)
	}
	if code := bob.waitClosed(); code != 4401 {
		t.Fatalf("jti revoked: close %d", code)
	}
	se.dial(se.token("bob", time.Hour, map[string]any{"jti": "b-2"})).sync()
}

// A read-only token (scope) may read but its changes are refused (PermissionDenied), the
// socket stays open.
func TestSignedTokens_ReadOnlyScope(t *testing.T) {
	se := newSignedEnv(t, nil)
	w := se.dial(se.token("writer", time.Hour, nil))
	r := se.dial(se.token("reader", time.Hour, map[string]any{"scope": "read-only"}))
	r.sync() // r is in the room: it hears w's change relayed
	w.insert(0, "hello")
	r.waitText("hello")
	r.insert(0, "nope ")
	r.waitFor("PermissionDenied", func() bool { return r.count(func(m Message) bool { return m.Type == TypeAuth }) == 1 })
	w.insert(5, "!")
	r.waitFor("the writer's change", func() bool { return strings.HasSuffix(r.text(), "hello!") })
	if got := se.docText(); got != "hello!" {
		t.Fatalf("document %q", got)
	}
}

// The webhook: allowed and denied editors, and a webhook that does not answer refuses with
// 503 and Retry-After while another editor is still admitted.
func TestWebhook_Admission(t *testing.T) {
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req auth.WebhookRequest
		json.NewDecoder(r.Body).Decode(&req)
		switch req.Token {
		case "app-user":
			w.Write([]byte(`{"allow":true,"user":"ann","ttlSeconds":30}`))
		case "app-reader":
			w.Write([]byte(`{"allow":true,"readOnly":true,"user":"rob"}`))
		case "app-slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			w.Write([]byte(`{"allow":false}`))
		}
	}))
	defer hook.Close()
	defer close(release)
	se := newSignedEnv(t, func(ch *auth.ClientChain, clk *clock.Fake) {
		wh, err := auth.NewWebhook(auth.WebhookOptions{URL: hook.URL, Node: "hub", Timeout: 500 * time.Millisecond, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		ch.Webhook = wh
	})
	ann := se.dial("app-user")
	ann.insert(0, "ann")
	rob := se.dial("app-reader")
	rob.sync() // as a provider does on open: ann's change is in the answer, or relayed after it
	rob.waitText("ann")
	rob.insert(0, "x")
	rob.waitFor("PermissionDenied", func() bool { return rob.count(func(m Message) bool { return m.Type == TypeAuth }) == 1 })
	if status, body := se.status(se.ns, "stranger", nil); status != 403 || !strings.Contains(body, `"check":"denied"`) {
		t.Fatalf("denied: %d %s", status, body)
	}
	req, _ := http.NewRequest("GET", se.http.URL+"/v1/yjs/"+se.ns+"?token=app-slow", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a webhook that does not answer: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	eds := se.srv.EditorsOf(se.ns)
	if len(eds) != 2 || eds[0].Name != "ann" || eds[0].Credential != auth.CredentialWebhook || !eds[1].ReadOnly {
		t.Fatalf("editors %+v", eds)
	}
}

// Signed tokens on the Hocuspocus endpoint: a document opens with one, a refused one hears
// the failed check's reason (PermissionDenied), the node lists the document's editor by its
// user; at the token's exp the document closes alone ("Unauthorized") while the socket's
// other document goes on, and a revocation of that user closes it too.
func TestSignedTokens_Hocuspocus(t *testing.T) {
	se := newSignedEnv(t, nil)
	a, b := se.ns, se.createNamespace()
	h := se.dialHocus()
	h.open(a, se.token("alice", 30*time.Second, map[string]any{"ns": []string{a, b}}))
	h.open(b, se.token("bob", time.Hour, map[string]any{"ns": []string{a, b}}))
	h.waitFrame("a authenticated", isAuth(a, hocuspocus.AuthAuthenticated))
	h.waitFrame("b authenticated", isAuth(b, hocuspocus.AuthAuthenticated))
	c := se.createNamespace()
	h.open(c, se.token("carol", -time.Second, map[string]any{"ns": []string{c}}))
	if f := h.waitFrame("c refused", isAuth(c, hocuspocus.AuthPermissionDenied)); !strings.Contains(f.text, "expired") {
		t.Errorf("the refusal says %q", f.text)
	}
	if eds := se.srv.EditorsOf(a); len(eds) != 1 || eds[0].User != "alice" || eds[0].Credential != auth.CredentialJWT ||
		!eds[0].Expires.Equal(se.clk.Now().Add(30*time.Second)) {
		t.Fatalf("editors of a: %+v", eds)
	}
	h.insert(a, 0, "before exp")
	h.waitFor("a saved", func() bool { return h.count(isSyncStatus(a, 1)) >= 2 })
	se.clk.Advance(30 * time.Second) // within the socket's 60 s of silence
	if f := h.waitFrame("CLOSE a at exp", isClose(a)); f.text != "Unauthorized" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	h.insert(b, 0, "bob goes on")
	h.waitFor("b saved", func() bool { return h.count(isSyncStatus(b, 1)) >= 2 })
	se.clk.Advance(time.Second)
	if _, err := se.revoked.Revoke(context.Background(), "bob", ""); err != nil {
		t.Fatal(err)
	}
	if f := h.waitFrame("CLOSE b at revocation", isClose(b)); f.text != "Unauthorized" {
		t.Fatalf("CLOSE reason %q", f.text)
	}
	if h.closed() != nil {
		t.Fatalf("the socket closed: %v", h.closed())
	}
	if got := se.docTextOf(a); got != "before exp" {
		t.Fatalf("a reads %q", got)
	}
}
