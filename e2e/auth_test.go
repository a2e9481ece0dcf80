package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docs/protocol.md#transport-and-authentication, docs/protocol.md#authorization through the
// processes: a bad or missing token gets 401 before any WebSocket, a peer with a bad token
// stays blocked; a namespace its token does not list is refused; removing a peer's token on
// the hub revokes its live connection, and narrowing a grant in the tokens file ends the
// namespace it lost — both without restarting the hub.
func TestE2E_Authorization(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub()
	ns1 := hub.api().createNamespace()
	ns2 := hub.api().createNamespace()

	// Upgrades without or with a wrong token: 401, no WebSocket.
	for name, header := range map[string]string{"missing": "", "wrong": "Bearer not-a-token"} {
		req, _ := http.NewRequest("GET", "http://"+c.hubRepl+"/v1/replication", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s token: upgrade answered %d, want 401", name, resp.StatusCode)
		}
	}
	// A peer with a bad token is refused and stays blocked
	// (docs/protocol.md#peer-connection-states), not ready.
	bad := c.startPeer("peer-x", c.tokenFile("peer-x", "not-a-token"), "--target", ns1)
	eventually(t, 10*time.Second, "bad-token peer blocked", func() error {
		status, body := bad.api().do("GET", "/readyz", nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "blocked") {
			return fmt.Errorf("readyz %d %s", status, body)
		}
		return nil
	})
	if got := hub.api().metric(`nomicore_auth_upgrade_rejections_total{reason="invalid-credentials",side="hub"}`); got < 2 {
		t.Errorf("hub counted %v invalid-credentials rejections", got)
	}
	if tg := bad.api().target(ns1); tg["state"] != "targeted" {
		t.Errorf("bad-token peer's target is %v", tg["state"])
	}
	// A blocked peer dials again when its token file changes: give it a real token.
	c.tokenFile("peer-x", c.token("peer-x", "--namespace", ns1))
	targetState(t, bad, ns1, "live")

	// peer-a may replicate ns1 only: ns2 is refused, ns1 goes live.
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a", "--namespace", ns1)), "--target", ns1, "--target", ns2)
	targetState(t, a, ns1, "live")
	targetState(t, a, ns2, "failed")
	if status, _ := a.api().do("GET", "/v1/namespaces/"+ns2+"/doc", nil); status != http.StatusServiceUnavailable {
		t.Errorf("the refused namespace has a replica: doc answered %d", status)
	}

	// peer-b may replicate everything; peer-c too.
	b := c.startPeer("peer-b", c.tokenFile("peer-b", c.token("peer-b")), "--target", ns1)
	cc := c.startPeer("peer-c", c.tokenFile("peer-c", c.token("peer-c")), "--target", ns1, "--target", ns2)
	targetState(t, b, ns1, "live")
	targetState(t, cc, ns1, "live")
	targetState(t, cc, ns2, "live")
	hub.api().set(ns1, map[string]any{"v": "1"})
	converged(t, ns1, map[string]any{"v": "1"}, hub, a, b, cc)

	// Remove peer-b's token: its live connection is revoked (GOAWAY REAUTH_REQUIRED), its
	// one re-authentication is refused, it stays out.
	out, err := execHub("token", "remove", "--data", c.hubData(), "--peer", "peer-b")
	if err != nil {
		t.Fatalf("hub token remove: %v %s", err, out)
	}
	eventually(t, 15*time.Second, "peer-b revoked", func() error {
		status, body := b.api().do("GET", "/readyz", nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "blocked") {
			return fmt.Errorf("peer-b readyz %d %s", status, body)
		}
		return nil
	})

	// Narrow peer-c's grant in place (same token, ns2 only): its ns1 channel ends, ns2 stays.
	narrow(t, filepath.Join(c.hubData(), "tokens.json"), "peer-c", []string{ns2})
	targetState(t, cc, ns1, "failed")
	hub.api().set(ns1, map[string]any{"v": "2"})
	hub.api().set(ns2, map[string]any{"w": "2"})
	converged(t, ns1, map[string]any{"v": "2"}, hub, a)
	converged(t, ns2, map[string]any{"w": "2"}, hub, cc)
	time.Sleep(300 * time.Millisecond)
	for _, p := range []*proc{b, cc} {
		if n, _ := p.api().notes(ns1); n["v"] != "1" {
			t.Errorf("%s still receives ns1 after its access was withdrawn: %v", p.name, n)
		}
	}
	// Rotation without a restart: a second token for peer-c, installed on the peer, then the
	// old one removed. The hub revokes peer-c's connection (GOAWAY REAUTH_REQUIRED); peer-c
	// authenticates again at once with the new token and reconciles.
	var oldPrefix string
	if out, err := execHub("token", "list", "--data", c.hubData()); err != nil {
		t.Fatalf("hub token list: %v %s", err, out)
	} else {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "peer-c" {
				oldPrefix = strings.TrimSuffix(strings.TrimPrefix(f[1], "sha256:"), "…")
			}
		}
	}
	if oldPrefix == "" {
		t.Fatal("hub token list does not show peer-c")
	}
	c.tokenFile("peer-c", c.token("peer-c", "--namespace", ns2, "--additional"))
	if out, err := execHub("token", "remove", "--data", c.hubData(), "--peer", "peer-c", "--sha256", oldPrefix); err != nil {
		t.Fatalf("hub token remove: %v %s", err, out)
	}
	eventually(t, 15*time.Second, "peer-c reconnected with its new token", func() error {
		if v := cc.api().metric(`nomicore_goaways_received_total{reason="REAUTH_REQUIRED",side="peer"}`); v < 1 {
			return fmt.Errorf("no REAUTH_REQUIRED yet")
		}
		if status, body := cc.api().do("GET", "/readyz", nil); status != 200 {
			return fmt.Errorf("readyz %d %s", status, body)
		}
		return nil
	})
	targetState(t, cc, ns2, "live")
	hub.api().set(ns2, map[string]any{"w": "3"})
	converged(t, ns2, map[string]any{"w": "3"}, hub, cc)

	if got := hub.api().metric(`nomicore_token_reloads_total{reason="changed",side="hub"}`); got < 2 {
		t.Errorf("hub counted %v token reloads", got)
	}
}

func execHub(args ...string) ([]byte, error) {
	return execCommand(bin.hub, args...)
}

// narrow rewrites one peer's namespaces in the tokens file, keeping its token, the way an
// operator edits the file (atomically: write a temporary file, rename).
func narrow(t *testing.T, path, peer string, namespaces []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Peers {
		if p["instanceId"] == peer {
			p["namespaces"] = namespaces
		}
	}
	out, _ := json.Marshal(f)
	tmp := path + ".edit"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// SIGHUP makes the hub re-read its tokens file at once (here the poll is an hour away).
func TestE2E_SighupReloadsTokens(t *testing.T) {
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub("--tokens-poll", "1h")
	ns1, ns2 := hub.api().createNamespace(), hub.api().createNamespace()
	a := c.startPeer("peer-a", tok, "--target", ns1, "--target", ns2)
	targetState(t, a, ns1, "live")
	targetState(t, a, ns2, "live")
	narrow(t, filepath.Join(c.hubData(), "tokens.json"), "peer-a", []string{ns2})
	time.Sleep(200 * time.Millisecond)
	if tg := a.api().target(ns1); tg["state"] != "live" {
		t.Fatalf("the change applied before SIGHUP (poll is 1h): %v", tg["state"])
	}
	if err := syscall.Kill(hub.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	targetState(t, a, ns1, "failed")
	targetState(t, a, ns2, "live")
}

// A namespace of owner alice, asked for by a peer whose token is for owner default: the peer
// gets NAMESPACE_NOT_FOUND, as for a missing namespace (docs/protocol.md#authorization), and
// its reason says that this may be an owner mismatch and where to look; the hub's log names
// the peer, both owners and the fix. Following the fix (the token's owner set to alice in the
// tokens file) lets the peer replicate it without a restart.
func TestE2E_OwnerMismatchNamesBothOwners(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub()
	var created struct{ NamespaceID string }
	hub.api().json("POST", "/v1/namespaces", []byte(`{"owner":"alice"}`), http.StatusCreated, &created)
	ns := created.NamespaceID
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns)
	targetState(t, a, ns, "failed")
	tg := a.api().target(ns)
	if tg["code"] != "NAMESPACE_NOT_FOUND" || !strings.Contains(fmt.Sprint(tg["reason"]), "another owner") {
		t.Fatalf("the peer's target: %v", tg)
	}
	tokens := filepath.Join(c.hubData(), "tokens.json")
	var line map[string]any
	eventually(t, 10*time.Second, "the hub's log line", func() error {
		for _, l := range strings.Split(tail(hub.log, 400), "\n") {
			if strings.Contains(l, `"msg":"a peer asked for a namespace of another owner`) {
				return json.Unmarshal([]byte(l), &line)
			}
		}
		return fmt.Errorf("not logged")
	})
	fix := fmt.Sprint(line["fix"])
	if line["peer"] != "peer-a" || line["namespaceId"] != ns || line["tokenOwner"] != "default" || line["namespaceOwner"] != "alice" ||
		!strings.Contains(fix, `set "owner":"alice" in peer-a's entry of `+tokens) {
		t.Fatalf("the hub's log line: %v", line)
	}

	// The fix, as it says: the owner of peer-a's entry becomes alice.
	b, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	file["peers"].([]any)[0].(map[string]any)["owner"] = "alice"
	b, _ = json.Marshal(file)
	if err := os.WriteFile(tokens+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tokens+".tmp", tokens); err != nil {
		t.Fatal(err)
	}
	hub.api().set(ns, map[string]any{"greeting": "for alice"})
	targetState(t, a, ns, "live")
	converged(t, ns, map[string]any{"greeting": "for alice"}, hub, a)
}
