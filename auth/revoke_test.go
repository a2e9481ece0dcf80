package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/nomicore/nomicore/clock"
)

// memConfig is a configuration map in memory, shared by the lists of several "nodes" as a
// hub cluster's is.
type memConfig struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail bool
}

var errNotFound = errors.New("not found")

func (s *memConfig) PutConfig(_ context.Context, k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("store down")
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[k] = append([]byte(nil), v...)
	return nil
}

func (s *memConfig) Config(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return nil, errNotFound
	}
	return v, nil
}

func (s *memConfig) DeleteConfig(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

func (s *memConfig) ConfigKeys(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return nil, errors.New("store down")
	}
	var out []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Revocation by user refuses that user's tokens issued before it (and not after), by jti
// that token only; the list is persisted, another node's list learns it from the store
// (Run), and entries leave after the lifetime.
func TestRevocations(t *testing.T) {
	store := &memConfig{}
	clk := clock.NewFake(testNow)
	ctx := context.Background()
	var changedA, changedB atomic.Int32
	lifetime := DefaultJWTMaxLifetime + DefaultJWTSkew
	a, err := NewRevocationList(ctx, RevocationOptions{Store: store, Lifetime: lifetime, Clock: clk, OnChange: func() { changedA.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRevocationList(ctx, RevocationOptions{Store: store, Lifetime: lifetime, Clock: clk, OnChange: func() { changedB.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	va, _ := NewJWTVerifier(JWTOptions{Secret: testSecret, Revocations: a, Clock: clk})
	vb, _ := NewJWTVerifier(JWTOptions{Secret: testSecret, Revocations: b, Clock: clk})
	hs := signer{alg: jose.HS256, key: testSecret}
	old := hs.mint(t, claimsFor("alice"))
	noIat := hs.mint(t, claimsFor("alice", del("iat")))
	withID := hs.mint(t, claimsFor("bob", set("jti", "t-1")))
	otherID := hs.mint(t, claimsFor("bob", set("jti", "t-2")))
	gOld, err := va.AuthenticateClient(ctx, ClientCredential{Token: old})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if _, err := a.Revoke(ctx, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revoke(ctx, "", "t-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revoke(ctx, "alice", "t-1"); err == nil {
		t.Fatal("sub and jti at once accepted")
	}
	if changedA.Load() != 2 {
		t.Fatalf("OnChange called %d times", changedA.Load())
	}
	_, err = va.RecheckClient(gOld)
	refusedBy(t, err, CheckRevoked)
	for _, tok := range []string{old, noIat, withID} {
		_, err := va.AuthenticateClient(ctx, ClientCredential{Token: tok})
		refusedBy(t, err, CheckRevoked)
	}
	if _, err := va.AuthenticateClient(ctx, ClientCredential{Token: otherID}); err != nil {
		t.Fatalf("another jti of the user: %v", err)
	}
	clk.Advance(time.Second)
	fresh := signer{alg: jose.HS256, key: testSecret}.mint(t, map[string]any{"sub": "alice", "exp": clk.Now().Add(time.Hour).Unix(),
		"iat": clk.Now().Unix(), "ns": []string{"*"}})
	if _, err := va.AuthenticateClient(ctx, ClientCredential{Token: fresh}); err != nil {
		t.Fatalf("a token issued after the revocation: %v", err)
	}

	// Node b learns both from the store.
	if _, err := vb.AuthenticateClient(ctx, ClientCredential{Token: old}); err != nil {
		t.Fatalf("b before loading: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { b.Run(runCtx, DefaultRevocationPoll); close(done) }()
	clk.WaitForTimers(1, 5*time.Second)
	clk.Advance(DefaultRevocationPoll)
	waitFor(t, func() bool { return changedB.Load() == 1 })
	_, err = vb.AuthenticateClient(ctx, ClientCredential{Token: old})
	refusedBy(t, err, CheckRevoked)
	cancel()
	<-done

	// A restarted node reads the list.
	c, err := NewRevocationList(ctx, RevocationOptions{Store: store, Lifetime: lifetime, Clock: clk})
	if err != nil || len(c.List()) != 2 {
		t.Fatalf("reloaded: %v %v", c.List(), err)
	}
	// After the lifetime the entries leave the list and the store.
	clk.Advance(lifetime)
	if changed, err := c.Load(ctx); !changed || err != nil || len(c.List()) != 0 {
		t.Fatalf("expired: %v %v %v", changed, err, c.List())
	}
	if keys, _ := store.ConfigKeys(ctx, ""); len(keys) != 0 {
		t.Fatalf("left in the store: %v", keys)
	}
	// A store that cannot take the revocation: nothing is revoked, the error says so.
	store.fail = true
	if _, err := c.Revoke(ctx, "zed", ""); err == nil {
		t.Fatal("a failed store accepted")
	}
	store.fail = false
	small, _ := NewRevocationList(ctx, RevocationOptions{Store: &memConfig{}, Lifetime: lifetime, Clock: clk, Max: 1})
	small.Revoke(ctx, "a", "")
	if _, err := small.Revoke(ctx, "b", ""); !errors.Is(err, ErrTooManyRevocations) {
		t.Fatalf("over Max: %v", err)
	}
}

// A list that could not be read yet fails closed: signed tokens are refused as "cannot be
// checked now" (503) until Run has read it.
func TestRevocations_NotReadYet(t *testing.T) {
	store := &memConfig{fail: true}
	clk := clock.NewFake(testNow)
	ctx := context.Background()
	l, err := NewRevocationList(ctx, RevocationOptions{Store: store, Lifetime: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewJWTVerifier(JWTOptions{Secret: testSecret, Revocations: l, Clock: clk})
	tok := signer{alg: jose.HS256, key: testSecret}.mint(t, claimsFor("alice"))
	var ue *UnavailableError
	if _, err := v.AuthenticateClient(ctx, ClientCredential{Token: tok}); !errors.As(err, &ue) {
		t.Fatalf("before the list was read: %v", err)
	}
	store.mu.Lock()
	store.fail = false
	store.mu.Unlock()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(runCtx, time.Hour); close(done) }()
	waitFor(t, func() bool { _, err := v.AuthenticateClient(ctx, ClientCredential{Token: tok}); return err == nil })
	cancel()
	<-done
}

// watchedConfig is a memConfig that tells its watchers of every put, as a hub cluster's
// shared map does.
type watchedConfig struct {
	memConfig
	mu       sync.Mutex
	watchers []func()
}

func (s *watchedConfig) WatchConfig(ctx context.Context, prefix string, changed func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, changed)
	return nil
}

func (s *watchedConfig) PutConfig(ctx context.Context, k string, v []byte) error {
	err := s.memConfig.PutConfig(ctx, k, v)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		w()
	}
	return err
}

// Over a store that tells of changes, another node's revocation is loaded when it is
// stored, not at the next poll (the fake clock never reaches it here).
func TestRevocations_Watched(t *testing.T) {
	store := &watchedConfig{}
	clk := clock.NewFake(testNow)
	ctx := context.Background()
	a, _ := NewRevocationList(ctx, RevocationOptions{Store: store, Lifetime: time.Hour, Clock: clk})
	changed := make(chan struct{}, 4)
	b, _ := NewRevocationList(ctx, RevocationOptions{Store: store, Lifetime: time.Hour, Clock: clk, OnChange: func() { changed <- struct{}{} }})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { b.Run(runCtx, time.Hour); close(done) }()
	waitFor(t, func() bool { store.mu.Lock(); defer store.mu.Unlock(); return len(store.watchers) == 1 })
	if _, err := a.Revoke(ctx, "alice", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the other list did not load the revocation")
	}
	if l := b.List(); len(l) != 1 || l[0].Sub != "alice" {
		t.Fatalf("b's list: %+v", l)
	}
	cancel()
	<-done
}

// The webhook: its answer decides (allow, read-only, user), is cached for its TTL by token
// and namespace, a denial is 403-like (ErrForbidden), and a webhook that times out or fails
// refuses with UnavailableError without holding up other checks.
func TestWebhook(t *testing.T) {
	var calls atomic.Int32
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req WebhookRequest
		if err := decodeJSON(r, &req); err != nil || req.Node != "hub-1" || req.NamespaceID == "" || req.RemoteAddr != "192.0.2.1:5" {
			http.Error(w, "bad request", 400)
			return
		}
		switch req.Token {
		case "alice":
			w.Write([]byte(`{"allow":true,"user":"alice@example","ttlSeconds":60}`))
		case "reader":
			w.Write([]byte(`{"allow":true,"readOnly":true,"user":"rita"}`))
		case "denied":
			w.Write([]byte(`{"allow":false,"ttlSeconds":60}`))
		case "slow":
			<-block
		case "garbage":
			w.Write([]byte(`allow`))
		default:
			http.Error(w, "boom", 500)
		}
	}))
	defer srv.Close()
	defer close(block)
	clk := clock.NewFake(testNow)
	store := &memConfig{}
	rl, _ := NewRevocationList(context.Background(), RevocationOptions{Store: store, Lifetime: time.Hour, Clock: clk})
	w, err := NewWebhook(WebhookOptions{URL: srv.URL, Node: "hub-1", Timeout: 300 * time.Millisecond, Clock: clk, Revocations: rl, MaxCached: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ask := func(tok, ns string) (ClientGrant, error) {
		return w.AuthenticateClient(ctx, ClientCredential{Token: tok, NamespaceID: ns, RemoteAddr: "192.0.2.1:5"})
	}
	g, err := ask("alice", nsA)
	if err != nil || g.Name != "alice@example" || g.User != "alice@example" || g.Kind != CredentialWebhook || g.ReadOnly ||
		!g.Allows(nsA) || g.Allows(nsB) {
		t.Fatalf("alice: %+v %v", g, err)
	}
	if _, err := ask("alice", nsA); err != nil || calls.Load() != 1 {
		t.Fatalf("cached: %v, calls %d", err, calls.Load())
	}
	if _, err := ask("alice", nsB); err != nil || calls.Load() != 2 {
		t.Fatalf("another namespace asks again: %v, calls %d", err, calls.Load())
	}
	clk.Advance(61 * time.Second)
	if _, err := ask("alice", nsA); err != nil || calls.Load() != 3 {
		t.Fatalf("after the TTL: %v, calls %d", err, calls.Load())
	}
	if g, err := ask("reader", nsA); err != nil || !g.ReadOnly || g.Name != "rita" {
		t.Fatalf("reader: %+v %v", g, err)
	}
	n := calls.Load()
	ask("reader", nsA)
	if calls.Load() != n+1 {
		t.Fatal("an answer without TTL was cached")
	}
	_, err = ask("denied", nsA)
	var r *ClientRefusal
	if !errors.As(err, &r) || r.Check != CheckDenied || !errors.Is(err, ErrForbidden) {
		t.Fatalf("denied: %v", err)
	}
	if w.Cached() > 2 {
		t.Fatalf("the cache holds %d answers over its bound", w.Cached())
	}
	for _, tok := range []string{"slow", "garbage", "error"} {
		start := time.Now()
		_, err := ask(tok, nsA)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.RetryAfter <= 0 {
			t.Fatalf("%s: want unavailable, got %v", tok, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%s: took %v", tok, time.Since(start))
		}
	}
	// A slow webhook holds up nothing else: a second check answers while one waits.
	slowDone := make(chan error, 1)
	go func() { _, err := ask("slow", nsB); slowDone <- err }()
	waitFor(t, func() bool { return len(w.inFlight) == 1 })
	if _, err := ask("reader", nsB); err != nil {
		t.Fatalf("while the webhook is slow for another: %v", err)
	}
	<-slowDone
	// A revoked user: its cached answer is not reused (the webhook is asked again), and an
	// open connection's grant is refused.
	g, _ = ask("alice", nsA)
	clk.Advance(time.Second)
	if _, err := rl.Revoke(ctx, "alice@example", ""); err != nil {
		t.Fatal(err)
	}
	_, err = w.RecheckClient(g)
	refusedBy(t, err, CheckRevoked)
	n = calls.Load()
	clk.Advance(time.Second)
	if _, err := ask("alice", nsA); err != nil || calls.Load() != n+1 {
		t.Fatalf("after the revocation: %v, calls %d → %d", err, n, calls.Load())
	}
}

// The chain: a signed token goes to the verifier, another token to the static table, then
// to the webhook; each grant is re-checked by its own check.
func TestClientChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	static, err := AddClient(path, ClientGrant{Name: "ed", Namespaces: []string{nsA}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fileClock := clock.NewFake(time.Now())
	r, err := NewReloader(ReloaderOptions{Path: path, Clock: fileClock})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(testNow)
	v, _ := NewJWTVerifier(JWTOptions{Secret: testSecret, Clock: clk})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"allow":true,"user":"wendy"}`))
	}))
	defer srv.Close()
	wh, _ := NewWebhook(WebhookOptions{URL: srv.URL, Clock: clk})
	ctx := context.Background()
	chain := &ClientChain{Static: r, Signed: v}
	cred := func(tok string) ClientCredential { return ClientCredential{Token: tok, NamespaceID: nsA} }
	jwtTok := signer{alg: jose.HS256, key: testSecret}.mint(t, claimsFor("sig"))
	for tok, want := range map[string]string{static: CredentialClientToken, jwtTok: CredentialJWT} {
		g, err := chain.AuthenticateClient(ctx, cred(tok))
		if err != nil || g.Kind != want {
			t.Fatalf("%s: %+v %v", want, g, err)
		}
		if g2, err := chain.RecheckClient(g); err != nil || g2.Kind != want {
			t.Fatalf("recheck %s: %+v %v", want, g2, err)
		}
	}
	_, err = chain.AuthenticateClient(ctx, cred("nope"))
	refusedBy(t, err, CheckUnknownToken)
	_, err = chain.AuthenticateClient(ctx, cred(jwtTok+"x"))
	refusedBy(t, err, CheckSignature)
	chain.Webhook = wh
	g, err := chain.AuthenticateClient(ctx, cred("nope"))
	if err != nil || g.Kind != CredentialWebhook || g.Name != "wendy" {
		t.Fatalf("webhook: %+v %v", g, err)
	}
	if _, err := chain.RecheckClient(g); err != nil {
		t.Fatal(err)
	}
	// A static token that expired is refused as expired, not handed to the webhook.
	exp, err := AddClient(path, ClientGrant{Name: "temp", Namespaces: []string{nsA}, Expires: time.Now().Add(time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := chain.AuthenticateClient(ctx, cred(exp)); err != nil || !g.Expires.Equal(time.Now().Add(time.Minute).Truncate(time.Second)) && g.Expires.IsZero() {
		t.Fatalf("before its expiry: %+v %v", g, err)
	}
	fileClock.Advance(2 * time.Minute)
	_, err = chain.AuthenticateClient(ctx, cred(exp))
	refusedBy(t, err, CheckExpired)
}

func decodeJSON(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }
