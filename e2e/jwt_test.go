package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// appKeys are an application's signing keys: an HS256 secret, ES256 and RSA key pairs. The
// nodes get the secret file and the public keys (a JWKS file); the application's server
// (jose in the agent, go-jose here) signs with the private ones.
type appKeys struct {
	dir        string
	secret     string
	secretFile string
	ec         *ecdsa.PrivateKey
	rsa        *rsa.PrivateKey
	keysFile   string
}

func newAppKeys(t *testing.T) *appKeys {
	t.Helper()
	k := &appKeys{dir: t.TempDir(), secret: "e2e-hs256-secret-of-more-than-32-bytes!"}
	k.ec, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k.rsa, _ = rsa.GenerateKey(rand.Reader, 2048)
	k.secretFile = filepath.Join(k.dir, "jwt-secret")
	if err := os.WriteFile(k.secretFile, []byte(k.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.keysFile = filepath.Join(k.dir, "jwks.json")
	k.writeKeys(t, jose.JSONWebKey{Key: &k.ec.PublicKey, KeyID: "app-ec-1", Algorithm: "ES256", Use: "sig"},
		jose.JSONWebKey{Key: &k.rsa.PublicKey, KeyID: "app-rsa-1", Algorithm: "RS256", Use: "sig"})
	return k
}

// writeKeys replaces the JWKS file (atomically, as an operator's deployment would).
func (k *appKeys) writeKeys(t *testing.T, keys ...jose.JSONWebKey) {
	t.Helper()
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	tmp := k.keysFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, k.keysFile); err != nil {
		t.Fatal(err)
	}
}

// flags are a node's flags for these keys.
func (k *appKeys) flags() []string {
	return []string{"--client-jwt-secret-file", k.secretFile, "--client-jwt-keys", k.keysFile,
		"--client-jwt-issuer", "https://app.example", "--client-jwt-audience", "nomicore"}
}

// privateJWK is the private key as jose imports it.
func privateJWK(t *testing.T, key any) map[string]any {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKey{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// joseMint has the agent's jose sign claims (the usual ones of claimsFor merged in).
func (a *agent) joseMint(args map[string]any) string {
	a.t.Helper()
	var tok string
	a.must("mint", args, &tok)
	return tok
}

// claims are a valid claim set for user on the namespaces ns, changed by mods (nil deletes).
func claims(user string, ns []string, mods map[string]any) map[string]any {
	c := map[string]any{"sub": user, "ns": ns, "iss": "https://app.example", "aud": "nomicore"}
	for k, v := range mods {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// upgradeRefusal tries an editor's upgrade with a token and returns the status and body.
func upgradeRefusal(t *testing.T, p *proc, ns, token string) (int, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+p.client+"/v1/yjs/"+ns, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, nil // accepted: the connection is dropped
	}
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), token) {
		t.Errorf("the refusal repeats the token: %s", b)
	}
	var body map[string]string
	json.Unmarshal(b, &body)
	return resp.StatusCode, body
}

// Signed tokens on a hub and a peer configured with the same keys, as an application uses
// them: tokens minted by jose (the agent) and by go-jose open the real y-websocket provider
// on either node and converge; every failed check is refused before the upgrade naming the
// check; a read-only scope cannot write; a token that expires closes its socket with 4401
// and the provider comes back with a fresh one; a revocation closes the user's editor and
// refuses the token; the node names the editor by its user, never logs a token.
func TestE2E_SignedTokens(t *testing.T) {
	ag := startAgent(t)
	keys := newAppKeys(t)
	c := newCluster(t)
	hub := c.startHub(keys.flags()...)
	ns := hub.api().createNamespace()
	other := hub.api().createNamespace()
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), append([]string{"--target", ns}, keys.flags()...)...)
	targetState(t, a, ns, "live")

	ecJWK := privateJWK(t, keys.ec)
	es256 := func(user string, ns []string, expiresIn string, mods map[string]any) string {
		return ag.joseMint(map[string]any{"alg": "ES256", "jwk": ecJWK, "kid": "app-ec-1", "claims": claims(user, ns, mods), "expiresIn": expiresIn})
	}
	alice := es256("alice", []string{ns}, "1h", nil)
	ag.open("alice-hub", hub, ns, alice)
	ag.must("open", map[string]any{"name": "alice-peer", "url": "ws://" + a.client + "/v1/yjs", "ns": ns, "token": alice, "bearer": true}, nil)
	hs := ag.joseMint(map[string]any{"alg": "HS256", "secret": keys.secret, "claims": claims("bob", []string{"*"}, nil), "expiresIn": "1h"})
	ag.open("bob", hub, ns, hs)
	// go-jose, RS256, as a Go application's server would.
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: keys.rsa}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "app-rsa-1"))
	if err != nil {
		t.Fatal(err)
	}
	goTok, err := jwt.Signed(sg).Claims(claims("gopher", []string{ns}, map[string]any{"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	ag.open("gopher", a, ns, goTok)
	ag.insert("alice-hub", 0, "[hub]")
	ag.insert("gopher", 0, "[peer]")
	for _, e := range []string{"alice-hub", "alice-peer", "bob", "gopher"} {
		eventually(t, 30*time.Second, e+" converged", func() error {
			if got := ag.text(e); got != "[peer][hub]" && got != "[hub][peer]" {
				return fmt.Errorf("%q", got)
			}
			return nil
		})
	}

	// Refusals, each with jose-made tokens but the hand-made ones a library refuses to make.
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: mustPKIX(t, &keys.rsa.PublicKey)})
	now := time.Now().Unix()
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	payload, _ := json.Marshal(claims("mallory", []string{"*"}, map[string]any{"exp": now + 3600}))
	algNone := hdr + "." + base64.RawURLEncoding.EncodeToString(payload) + "."
	for _, tc := range []struct {
		name, token string
		status      int
		check       string
	}{
		{"expired", es256("a", []string{ns}, "", map[string]any{"iat": now - 120, "exp": now - 60}), 401, "expired"},
		{"not yet valid", es256("a", []string{ns}, "1h", map[string]any{"nbf": now + 300}), 401, "not-yet-valid"},
		{"bad signature", ag.joseMint(map[string]any{"alg": "ES256", "jwk": privateJWK(t, otherEC), "kid": "app-ec-1", "claims": claims("a", []string{ns}, nil), "expiresIn": "1h"}), 401, "bad-signature"},
		{"unknown key", ag.joseMint(map[string]any{"alg": "ES256", "jwk": privateJWK(t, otherEC), "kid": "app-ec-9", "claims": claims("a", []string{ns}, nil), "expiresIn": "1h"}), 401, "unknown-key"},
		{"alg none", algNone, 401, "algorithm"},
		{"HS256 signed with the RSA public key", ag.joseMint(map[string]any{"alg": "HS256", "secret": string(rsaPEM), "kid": "app-rsa-1", "claims": claims("a", []string{ns}, nil), "expiresIn": "1h"}), 401, "algorithm"},
		{"wrong audience", es256("a", []string{ns}, "1h", map[string]any{"aud": "another-service"}), 401, "audience"},
		{"wrong issuer", es256("a", []string{ns}, "1h", map[string]any{"iss": "https://evil.example"}), 401, "issuer"},
		{"namespace not granted", es256("a", []string{other}, "1h", nil), 403, "namespace-not-granted"},
		{"no exp", es256("a", []string{ns}, "", nil), 401, "claims"},
	} {
		status, body := upgradeRefusal(t, hub, ns, tc.token)
		if status != tc.status || body["check"] != tc.check || body["message"] == "" {
			t.Errorf("%s: %d %v, want %d with check %s", tc.name, status, body, tc.status, tc.check)
		}
	}

	// A read-only scope: the provider's change is refused (PermissionDenied), the socket
	// stays open and it keeps reading.
	ag.open("reader", hub, ns, es256("rita", []string{ns}, "1h", map[string]any{"scope": "read-only"}))
	ag.insert("reader", 0, "nope")
	if ev := ag.waitEvent("reader", "permission-denied"); !strings.Contains(ev.Reason, "read-only") {
		t.Errorf("permission denied: %q", ev.Reason)
	}
	ag.insert("bob", 0, "!")
	eventually(t, 30*time.Second, "the reader reads on", func() error {
		if got := ag.text("reader"); !strings.Contains(got, "!") {
			return fmt.Errorf("%q", got)
		}
		return nil
	})
	if got := bodyText(t, hub, ns); strings.Contains(got, "nope") {
		t.Fatalf("the read-only change reached the document: %q", got)
	}

	// Expiry: a token valid for 3 s closes its socket with 4401; the application gives the
	// provider a fresh token and it syncs again.
	ag.open("short", hub, ns, es256("sam", []string{ns}, "3s", nil))
	if ev := ag.waitEvent("short", "closed"); ev.Code != 4401 || !strings.Contains(ev.Reason, "expired") {
		t.Fatalf("at exp: %+v, want 4401 expired", ev)
	}
	ag.must("retoken", map[string]any{"name": "short", "token": es256("sam", []string{ns}, "1h", nil), "timeoutMs": 30000}, nil)
	ag.insert("short", 0, "back ")
	ag.waitText("bob", ag.text("short"))

	// The namespace's status names the editors by user and credential; no log line holds a
	// token.
	st := hub.api()
	var status struct {
		EditorList []struct{ Name, User, Credential string } `json:"editorList"`
	}
	st.json("GET", "/v1/namespaces/"+ns, nil, 200, &status)
	users := map[string]string{}
	for _, e := range status.EditorList {
		users[e.User] = e.Credential
	}
	if users["alice"] != "jwt" || users["bob"] != "jwt" || users["rita"] != "jwt" {
		t.Errorf("the hub's editors: %+v", status.EditorList)
	}

	// Revocation of alice on the hub: her hub editor is closed, her token refused there; the
	// peer is another node with its own list, revoked through its own API.
	start := time.Now()
	st.json("POST", "/v1/clients/revoke", []byte(`{"sub":"alice"}`), 200, nil)
	if ev := ag.waitEvent("alice-hub", "closed"); ev.Code != 4401 || !strings.Contains(ev.Reason, "revoked") {
		t.Fatalf("revoked: %+v", ev)
	}
	t.Logf("alice's editor closed %v after the revocation", time.Since(start))
	if s, body := upgradeRefusal(t, hub, ns, alice); s != 401 || body["check"] != "revoked" {
		t.Fatalf("the revoked token on the hub: %d %v", s, body)
	}
	ag.insert("alice-peer", 0, "a")
	a.api().json("POST", "/v1/clients/revoke", []byte(`{"sub":"alice"}`), 200, nil)
	if ev := ag.waitEvent("alice-peer", "closed"); ev.Code != 4401 {
		t.Fatalf("revoked on the peer: %+v", ev)
	}
	// A token issued after the revocation opens (iat counts in seconds: one issued in the
	// revocation's second is refused too).
	time.Sleep(time.Until(start.Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	fresh := es256("alice", []string{ns}, "1h", nil)
	ag.open("alice-again", hub, ns, fresh)

	for _, p := range []*proc{hub, a} {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{alice, hs, goTok, fresh} {
			if strings.Contains(string(b), tok) || strings.Contains(string(b), tok[strings.LastIndexByte(tok, '.')+1:]) {
				t.Fatalf("%s's log holds a token", p.name)
			}
		}
	}
}

func mustPKIX(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// Keys rotate by kid: in the keys file (a new key is used once the file changed, the old
// one refused once it left) and at a JWKS URL (a token naming a kid the node has not seen
// makes it fetch the URL again).
func TestE2E_SignedTokens_KeyRotation(t *testing.T) {
	ag := startAgent(t)
	keys := newAppKeys(t)
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var mu sync.Mutex
	served := []jose.JSONWebKey{{Key: &k1.PublicKey, KeyID: "url-1", Algorithm: "ES256", Use: "sig"}}
	var fetches atomic.Int32
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: served})
	}))
	defer jwks.Close()
	c := newCluster(t)
	hub := c.startHub(append(keys.flags(), "--client-jwt-jwks-url", jwks.URL)...)
	ns := hub.api().createNamespace()
	mint := func(key *ecdsa.PrivateKey, kid, user string) string {
		return ag.joseMint(map[string]any{"alg": "ES256", "jwk": privateJWK(t, key), "kid": kid, "claims": claims(user, []string{ns}, nil), "expiresIn": "1h"})
	}
	eventually(t, 10*time.Second, "the JWKS URL fetched at start", func() error {
		if fetches.Load() == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	ag.open("u1", hub, ns, mint(k1, "url-1", "u1"))
	mu.Lock()
	served = append(served, jose.JSONWebKey{Key: &k2.PublicKey, KeyID: "url-2", Algorithm: "ES256", Use: "sig"})
	mu.Unlock()
	ag.open("u2", hub, ns, mint(k2, "url-2", "u2"))

	// The keys file: a new key beside the old, then the old one retired.
	k3, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys.writeKeys(t, jose.JSONWebKey{Key: &keys.ec.PublicKey, KeyID: "app-ec-1", Algorithm: "ES256", Use: "sig"},
		jose.JSONWebKey{Key: &k3.PublicKey, KeyID: "app-ec-2", Algorithm: "ES256", Use: "sig"})
	ag.open("f2", hub, ns, mint(k3, "app-ec-2", "f2"))
	keys.writeKeys(t, jose.JSONWebKey{Key: &k3.PublicKey, KeyID: "app-ec-2", Algorithm: "ES256", Use: "sig"})
	old := mint(keys.ec, "app-ec-1", "f1")
	eventually(t, 10*time.Second, "the retired key refused", func() error {
		if s, body := upgradeRefusal(t, hub, ns, old); s != 401 || body["check"] != "unknown-key" {
			return fmt.Errorf("%d %v", s, body)
		}
		return nil
	})
	ag.insert("u1", 0, "rotated")
	ag.waitText("f2", "rotated")
}

// The auth webhook as an application runs one: it allows, allows read-only and denies by
// the token it is shown; its answers are reused for their TTL; one that does not answer in
// time refuses that editor with 503 and Retry-After while others are admitted.
func TestE2E_AuthWebhook(t *testing.T) {
	ag := startAgent(t)
	var calls atomic.Int32
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct{ Token, NamespaceID, Node, RemoteAddr string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Node == "" || req.RemoteAddr == "" || req.NamespaceID == "" {
			http.Error(w, "bad request", 400)
			return
		}
		switch req.Token {
		case "session-ann":
			fmt.Fprint(w, `{"allow":true,"user":"ann@example","ttlSeconds":60}`)
		case "session-rob":
			fmt.Fprint(w, `{"allow":true,"readOnly":true,"user":"rob@example","ttlSeconds":60}`)
		case "session-slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			fmt.Fprint(w, `{"allow":false}`)
		}
	}))
	defer hook.Close()
	defer close(release)
	c := newCluster(t)
	hub := c.startHub("--client-auth-webhook", hook.URL, "--client-auth-webhook-timeout", "1s")
	ns := hub.api().createNamespace()
	ag.open("ann", hub, ns, "session-ann")
	ag.open("ann-2", hub, ns, "session-ann")
	if n := calls.Load(); n != 1 {
		t.Fatalf("the webhook was asked %d times for one token and namespace within its TTL", n)
	}
	ag.open("rob", hub, ns, "session-rob")
	ag.insert("ann", 0, "hello")
	ag.waitText("rob", "hello")
	ag.insert("rob", 0, "x")
	ag.waitEvent("rob", "permission-denied")
	if s, body := upgradeRefusal(t, hub, ns, "session-eve"); s != 403 || body["check"] != "denied" {
		t.Fatalf("denied: %d %v", s, body)
	}
	// A webhook that hangs: refused in about the timeout, with Retry-After; another editor is
	// admitted meanwhile.
	slow := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+hub.client+"/v1/yjs/"+ns+"?token=session-slow", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		slow <- resp
	}()
	time.Sleep(100 * time.Millisecond)
	ag.open("ann-3", hub, ns, "session-ann")
	resp := <-slow
	if resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a webhook that does not answer: %v", resp)
	}
	var st struct {
		EditorList []struct{ User, Credential string } `json:"editorList"`
	}
	hub.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
	if len(st.EditorList) != 4 || st.EditorList[0].Credential != "webhook" {
		t.Fatalf("editors %+v", st.EditorList)
	}
}

// In a hub cluster every node accepts a signed token made with the key they share, and a
// revocation made through one node's admin API reaches every node: the user's editors on
// the other nodes are closed (4401) and its token refused there, while another user's
// editors go on.
func TestE2E_Cluster_SignedTokensAndRevocation(t *testing.T) {
	t.Parallel()
	ag := startAgent(t)
	keys := newAppKeys(t)
	c := newShippedHubCluster(t, 3, nil, keys.flags()...)
	ns := c.hubs[0].api().createNamespace()
	ecJWK := privateJWK(t, keys.ec)
	mint := func(user string) string {
		return ag.joseMint(map[string]any{"alg": "ES256", "jwk": ecJWK, "kid": "app-ec-1", "claims": claims(user, []string{ns}, nil), "expiresIn": "1h"})
	}
	carl, dora := mint("carl"), mint("dora")
	for i, h := range c.hubs {
		ag.open(fmt.Sprintf("carl-%d", i+1), h, ns, carl)
	}
	ag.open("dora-3", c.hubs[2], ns, dora)
	ag.insert("carl-1", 0, "one token, three nodes")
	ag.waitText("dora-3", "one token, three nodes")
	start := time.Now()
	c.hubs[0].api().json("POST", "/v1/clients/revoke", []byte(`{"sub":"carl"}`), 200, nil)
	for i := range c.hubs {
		if ev := ag.waitEvent(fmt.Sprintf("carl-%d", i+1), "closed"); ev.Code != 4401 {
			t.Fatalf("carl's editor on node %d: %+v", i+1, ev)
		}
	}
	t.Logf("carl's editors on three nodes closed %v after the revocation on node 1", time.Since(start))
	for _, h := range c.hubs[1:] {
		eventually(t, 10*time.Second, "the revoked token refused on "+h.name, func() error {
			if s, body := upgradeRefusal(t, h, ns, carl); s != 401 || body["check"] != "revoked" {
				return fmt.Errorf("%d %v", s, body)
			}
			return nil
		})
	}
	ag.insert("dora-3", 0, "still here: ")
	eventually(t, 30*time.Second, "dora's write on every node", func() error {
		for _, h := range c.hubs {
			if got := bodyText(t, h, ns); got != "still here: one token, three nodes" {
				return fmt.Errorf("%s: %q", h.name, got)
			}
		}
		return nil
	})
}

// goMint signs claims with the application's ES256 key (go-jose), valid for an hour.
func (k *appKeys) goMint(t *testing.T, c map[string]any) string {
	t.Helper()
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.ec}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "app-ec-1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c["iat"], c["exp"] = now.Unix(), now.Add(time.Hour).Unix()
	tok, err := jwt.Signed(sg).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The editor page in a real browser with signed tokens: what a read-write token's page types
// reaches the document; a read-only scope's page is read-only from the start.
func TestE2E_Browser_EditorPageWithSignedToken(t *testing.T) {
	browser := browserFor(t)
	keys := newAppKeys(t)
	c := newCluster(t)
	hub := c.startHub(keys.flags()...)
	ns := hub.api().createNamespace()
	writer := keys.goMint(t, claims("wendy", []string{ns}, nil))
	reader := keys.goMint(t, claims("rita", []string{ns}, map[string]any{"scope": "read-only"}))
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	screenshotsOnFailure(t, map[string]context.Context{"signed": tab})
	ctx, cancelNav := context.WithTimeout(tab, 30*time.Second)
	err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("http://%s/edit/%s?token=%s", hub.client, ns, writer)),
		chromedp.WaitEnabled(chromedp.ID("body")), chromedp.Click(chromedp.ID("body")), chromedp.SendKeys(chromedp.ID("body"), "typed with a JWT"))
	cancelNav()
	if err != nil {
		t.Fatalf("the read-write page: %v", err)
	}
	waitBody(t, ns, "typed with a JWT", hub)
	var st struct {
		EditorList []struct{ User, Credential string } `json:"editorList"`
	}
	hub.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
	if len(st.EditorList) != 1 || st.EditorList[0].User != "wendy" || st.EditorList[0].Credential != "jwt" {
		t.Fatalf("the page's editor: %+v", st.EditorList)
	}
	ctx, cancelNav = context.WithTimeout(tab, 30*time.Second)
	defer cancelNav()
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("http://%s/edit/%s?token=%s", hub.client, ns, reader))); err != nil {
		t.Fatalf("the read-only page: %v", err)
	}
	ro, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('body').readOnly`))
	if err != nil || !ro {
		t.Fatalf("the read-only scope's page is not read-only (%v, %v)", ro, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("body")))
		if err == nil && v == "typed with a JWT" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read-only page shows %q (%v)", v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The dashboard's namespace page names the editor by its user, never the token.
	dash := (&dashBrowser{ctx: browser}).newTab(t, "dashboard")
	dash.do("open the namespace page", chromedp.Navigate(hub.admin+"/#/ns/"+ns))
	dash.waitFor("rita listed as a read-only signed-token editor",
		`Array.from(document.querySelectorAll('#editor-list tbody tr[data-key]')).some(r => r.cells[0].textContent === 'rita' && r.cells[1].textContent === 'signed token' && r.cells[2].textContent === 'read-only')`,
		20*time.Second)
	var page string
	dash.eval(`document.body.innerText`, &page)
	if strings.Contains(page, reader) || strings.Contains(page, writer) {
		t.Fatal("the dashboard shows a token")
	}
	dash.noConsoleErrors()
}
