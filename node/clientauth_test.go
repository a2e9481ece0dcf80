package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yws"
)

// credentialsNode is a hub's editor endpoint and admin API as `hub serve` wires them, on a
// bbolt store: the static tokens file, signed tokens (HS256 secret file), the revocation
// list in the store.
type credentialsNode struct {
	t       *testing.T
	admin   *httptest.Server
	editors *httptest.Server
	ns      string
	secret  []byte
}

func newCredentialsNode(t *testing.T, extraFlags ...string) *credentialsNode {
	t.Helper()
	dir := t.TempDir()
	secret := []byte("0123456789abcdef0123456789abcdef!")
	secretFile := filepath.Join(dir, "jwt-secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	f := cli.NewFlags("test", "test [flags]", "")
	common := RegisterCommon(f)
	cf := RegisterClientFlags(f, "127.0.0.1:0")
	args := append([]string{"--client-jwt-secret-file", secretFile, "--client-jwt-audience", "nomicore"}, extraFlags...)
	if _, _, ok := f.Parse(args, cli.IO{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}); !ok {
		t.Fatal("flags refused")
	}
	if err := common.Resolve(); err != nil {
		t.Fatal(err)
	}
	if err := cf.Check(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	inst, err := OpenInstance(filepath.Join(dir, "data"), registry.RoleHub, observer.SideHub, clock.Real(), log)
	if err != nil {
		t.Fatal(err)
	}
	created, err := inst.Registry.Create(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "data", auth.FileName)
	var editors *yws.Server
	revalidate := func() {
		if editors != nil {
			editors.Revalidate()
		}
	}
	static, err := auth.NewReloader(auth.ReloaderOptions{Path: tokens, OnChange: revalidate})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cf.NewClientAuth(context.Background(), ClientAuthOptions{Static: static, Store: inst.Store, Node: "hub", OnChange: revalidate, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	opts := cf.Options(inst, common, ca.Chain)
	opts.Namespaces = HubNamespaces(inst.Store)
	if editors, err = yws.New(opts); err != nil {
		t.Fatal(err)
	}
	ed := httptest.NewServer(editors)
	adminOpts := inst.AdminOptions(common)
	adminOpts.Clients = &ClientAdmin{Path: tokens, Static: static, Revoked: ca.Revocations}
	adminOpts.EditorList = EditorList(&editors)
	adminOpts.Listeners = map[string]string{"client": strings.TrimPrefix(ed.URL, "http://")}
	api, err := adminapi.New(adminOpts)
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(api)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		editors.Shutdown(ctx)
		ed.Close()
		api.Close()
		admin.Close()
		inst.Close()
	})
	return &credentialsNode{t: t, admin: admin, editors: ed, ns: created.NamespaceID, secret: secret}
}

func (n *credentialsNode) do(method, path string, body any) (int, map[string]any) {
	n.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, n.admin.URL+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// editorConn is an open editor connection whose reader records how it ended.
type editorConn struct{ ended chan error }

func (n *credentialsNode) dial(ns, token string) (*editorConn, int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(n.editors.URL, "http")+"/v1/yjs/"+ns+"?token="+token, nil)
	if err != nil {
		if resp == nil {
			n.t.Fatal(err)
		}
		return nil, resp.StatusCode
	}
	n.t.Cleanup(func() { ws.CloseNow() })
	ec := &editorConn{ended: make(chan error, 1)}
	go func() { // read until closed, as a provider does
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				ec.ended <- err
				return
			}
		}
	}()
	return ec, 101
}

// closedWith waits until the connection is closed and returns the close status.
func closedWith(t *testing.T, ec *editorConn) websocket.StatusCode {
	t.Helper()
	select {
	case err := <-ec.ended:
		return websocket.CloseStatus(err)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection stayed open")
		return -1
	}
}

// The admin API's /v1/clients on a node as served: a token minted there opens the editor
// endpoint at once and is listed without itself; a widened grant keeps the token; DELETE
// closes its editor; a revocation through the API closes a signed token's editor and refuses
// it; the namespace's status names the editors by user.
func TestClientAdmin_MintListChangeRemoveRevoke(t *testing.T) {
	n := newCredentialsNode(t)
	other := "ns-0123456789abcdef0123456789abcdef"
	status, created := n.do("POST", "/v1/clients", map[string]any{"name": "alice", "namespaces": []string{n.ns}, "expiresIn": "24h"})
	tok, _ := created["token"].(string)
	if status != 201 || tok == "" || created["expiresAt"] == nil || !strings.Contains(created["connectsWith"].(string), "/v1/yjs/") {
		t.Fatalf("POST /v1/clients: %d %v", status, created)
	}
	if status, body := n.do("POST", "/v1/clients", map[string]any{"name": "alice"}); status != 409 || body["code"] != "CLIENT_EXISTS" {
		t.Fatalf("the same name again: %d %v", status, body)
	}
	for _, bad := range []map[string]any{{"name": "Alice!"}, {"name": "bob", "expiresIn": "-1h"}, {"name": "bob", "namespaces": []string{"docs"}}, {}} {
		if status, _ := n.do("POST", "/v1/clients", bad); status != 400 {
			t.Errorf("POST %v: %d", bad, status)
		}
	}
	ws, code := n.dial(n.ns, tok)
	if code != 101 {
		t.Fatalf("the minted token: %d", code)
	}
	status, list := n.do("GET", "/v1/clients", nil)
	raw, _ := json.Marshal(list)
	if status != 200 || strings.Contains(string(raw), tok) || !strings.Contains(string(raw), `"name":"alice"`) {
		t.Fatalf("GET /v1/clients: %d %s", status, raw)
	}
	if _, c := n.dial(other, tok); c != 403 {
		t.Fatalf("a namespace not granted: %d", c)
	}
	if status, body := n.do("PATCH", "/v1/clients/alice", map[string]any{"namespaces": []string{n.ns, other}}); status != 200 {
		t.Fatalf("PATCH: %d %v", status, body)
	}
	if _, c := n.dial(other, tok); c != 404 { // granted now; the namespace does not exist on this hub
		t.Fatalf("after widening: %d, want 404 (granted, not served)", c)
	}
	status, st := n.do("GET", "/v1/namespaces/"+n.ns, nil)
	eds, _ := json.Marshal(st["editorList"])
	if status != 200 || !strings.Contains(string(eds), `"name":"alice"`) || !strings.Contains(string(eds), `"credential":"client-token"`) {
		t.Fatalf("the namespace's editors: %d %s", status, eds)
	}
	if status, _ := n.do("DELETE", "/v1/clients/alice", nil); status != 200 {
		t.Fatalf("DELETE: %d", status)
	}
	if code := closedWith(t, ws); code != 4401 {
		t.Fatalf("the removed token's editor: close %d", code)
	}
	if status, _ := n.do("DELETE", "/v1/clients/alice", nil); status != 404 {
		t.Fatalf("DELETE again: %d", status)
	}

	// A signed token, revoked through the API.
	sg, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: n.secret}, nil)
	now := time.Now()
	signed, _ := jwt.Signed(sg).Claims(map[string]any{"sub": "bob@example", "aud": "nomicore", "ns": []string{"*"},
		"iat": now.Add(-2 * time.Second).Unix(), "exp": now.Add(time.Hour).Unix()}).Serialize()
	ws, code = n.dial(n.ns, signed)
	if code != 101 {
		t.Fatalf("signed token: %d", code)
	}
	// The editor joins its namespace's room just after the upgrade.
	testkit.Eventually(t, 5*time.Second, "the signed token's editor listed", func() bool {
		_, st = n.do("GET", "/v1/namespaces/"+n.ns, nil)
		eds, _ = json.Marshal(st["editorList"])
		return strings.Contains(string(eds), `"user":"bob@example"`)
	})
	if !strings.Contains(string(eds), `"credential":"jwt"`) || strings.Contains(string(eds), signed) {
		t.Fatalf("the signed token's editor: %s", eds)
	}
	if status, body := n.do("POST", "/v1/clients/revoke", map[string]any{"sub": "bob@example", "jti": "x"}); status != 400 {
		t.Fatalf("sub and jti: %d %v", status, body)
	}
	start := time.Now()
	if status, body := n.do("POST", "/v1/clients/revoke", map[string]any{"sub": "bob@example"}); status != 200 || body["sub"] != "bob@example" {
		t.Fatalf("revoke: %d %v", status, body)
	}
	if code := closedWith(t, ws); code != 4401 {
		t.Fatalf("the revoked user's editor: close %d", code)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("closed %v after the revocation", d)
	}
	if _, c := n.dial(n.ns, signed); c != 401 {
		t.Fatalf("the revoked token again: %d", c)
	}
	status, revs := n.do("GET", "/v1/clients/revocations", nil)
	if raw, _ := json.Marshal(revs); status != 200 || !strings.Contains(string(raw), "bob@example") {
		t.Fatalf("revocations: %d %s", status, raw)
	}
}

// The flags refuse what cannot work.
func TestClientFlags_Credentials(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--client-auth", "none", "--client-jwt-secret-file", "x"}, "--client-auth none"},
		{[]string{"--client-jwt-audience", "a"}, "give their key too"},
		{[]string{"--client-jwt-jwks-url", "ftp://x"}, "http:// or https://"},
		{[]string{"--client-auth-webhook", "localhost:9"}, "http:// or https://"},
		{[]string{"--client-jwt-secret-file", "x", "--client-jwt-max-lifetime", "10s"}, "at least 1m"},
		{[]string{"--presence-relay", "yes"}, "want on or off"},
	} {
		f := cli.NewFlags("test", "test [flags]", "")
		cf := RegisterClientFlags(f, "127.0.0.1:0")
		if _, _, ok := f.Parse(tc.args, cli.IO{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}); !ok {
			t.Fatalf("%v: parse", tc.args)
		}
		if err := cf.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// The bounds of a Hocuspocus socket are flags: their defaults are the endpoint's, a value
// given reaches the endpoint's options, and one that is not positive is refused.
func TestClientFlags_HocuspocusBounds(t *testing.T) {
	parse := func(args ...string) *ClientFlags {
		t.Helper()
		f := cli.NewFlags("test", "test [flags]", "")
		cf := RegisterClientFlags(f, "127.0.0.1:0")
		if _, _, ok := f.Parse(args, cli.IO{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}); !ok {
			t.Fatalf("%v: parse", args)
		}
		return cf
	}
	def := parse()
	if err := def.Check(); err != nil {
		t.Fatal(err)
	}
	if h := def.Hocuspocus; h.MaxDocuments != yws.DefaultMaxDocumentsPerSocket || h.HeldBytes != yws.DefaultHeldBytes ||
		h.HeldMessages != yws.DefaultHeldMessages || h.PendingDocuments != yws.DefaultPendingDocuments {
		t.Fatalf("defaults %+v", h)
	}
	cf := parse("--hocuspocus-documents-per-socket", "3", "--hocuspocus-held-bytes", "1000", "--hocuspocus-held-messages", "7",
		"--hocuspocus-pending-documents", "2")
	if err := cf.Check(); err != nil {
		t.Fatal(err)
	}
	o := cf.Options(&Instance{}, &Common{}, nil).Hocuspocus
	if o.MaxDocuments != 3 || o.HeldBytes != 1000 || o.HeldMessages != 7 || o.PendingDocuments != 2 {
		t.Fatalf("the endpoint's options %+v", o)
	}
	for _, flag := range []string{"--hocuspocus-documents-per-socket", "--hocuspocus-held-bytes", "--hocuspocus-held-messages", "--hocuspocus-pending-documents"} {
		if err := parse(flag, "0").Check(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s 0: %v", flag, err)
		}
	}
}
