package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/yjs"
)

// docs/protocol.md#safe-fields at the process boundary: after a run with connections,
// namespaces, refusals, a revoked upgrade and an epoch conflict, the JSON logs of the hub and
// the peer hold no token, no owner, no document content and no Yjs bytes — and every event
// line has its type and side.
func TestE2E_S23_3_LogsCarryNoSecrets(t *testing.T) {
	const hubOwner, peerOwner = "owner-hub-5e1f", "owner-peer-9c2d"
	const content = "CONTENT-SENTINEL-41d7"
	c := newCluster(t)
	token := c.token("peer-a", "--owner", hubOwner)
	hub := c.startHub()
	var created struct{ NamespaceID string }
	hub.api().json("POST", "/v1/namespaces", []byte(`{"owner":"`+hubOwner+`"}`), 201, &created)
	ns := created.NamespaceID
	a := c.startPeer("peer-a", c.tokenFile("peer-a", token))
	a.api().json("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`","owner":"`+peerOwner+`"}`), 201, nil)
	targetState(t, a, ns, "live")

	// A write whose bytes we keep, a protected write refused, a bad-token upgrade.
	status, state := a.api().do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatal(status)
	}
	doc := yjs.NewDoc()
	yjs.ApplyUpdate(doc, state, nil)
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	doc.GetMap("notes").Set("secret", content)
	unsub()
	if status, b := a.api().do("POST", "/v1/namespaces/"+ns+"/update", update); status != 204 {
		t.Fatalf("write: %d %s", status, b)
	}
	converged(t, ns, map[string]any{"secret": content}, hub, a)
	if status, _ := a.api().do("POST", "/v1/namespaces/"+ns+"/update", metaUpdate(t, state)); status != 409 {
		t.Fatalf("protected write: %d", status)
	}
	c.startPeer("peer-x", c.tokenFile("peer-x", "wrong-token-2b7e"), "--target", ns)
	hub.api().json("POST", "/v1/namespaces/"+ns+"/epoch", []byte(`{"expectedEpoch":1}`), 200, nil)
	targetState(t, a, ns, "conflicted")
	for _, p := range c.peerList() {
		p.stop()
	}
	hub.stop()

	sentinels := []string{token, "wrong-token-2b7e", hubOwner, peerOwner, content,
		hex.EncodeToString(update), base64.StdEncoding.EncodeToString(update), base64.RawURLEncoding.EncodeToString(update)}
	events, sawNS := 0, false
	for _, p := range append(c.peerList(), hub) {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if line == "" || strings.HasPrefix(line, "=== start") {
				continue
			}
			for _, s := range sentinels {
				if strings.Contains(line, s) {
					t.Errorf("%s log line %d carries %q: %s", p.name, i+1, s, line)
				}
			}
			sawNS = sawNS || strings.Contains(line, ns) // control: the scan sees event payloads
			var rec map[string]any
			if err := json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&rec); err != nil {
				t.Errorf("%s log line %d is not JSON: %s", p.name, i+1, line)
				continue
			}
			if typ, ok := rec["type"]; ok {
				events++
				if rec["msg"] != typ && rec["msg"] != "frame-summary" || (rec["side"] != "hub" && rec["side"] != "peer") {
					t.Errorf("%s: malformed event line %s", p.name, line)
				}
			}
		}
	}
	if events < 10 || !sawNS {
		t.Fatalf("%d event lines, namespace id seen %v: the scan saw too little", events, sawNS)
	}
}

// metaUpdate returns an update that writes under the protected root meta.
func metaUpdate(t *testing.T, state []byte) []byte {
	t.Helper()
	doc := yjs.NewDoc()
	yjs.ApplyUpdate(doc, state, nil)
	var u []byte
	unsub := doc.OnUpdate(func(b []byte, _ any) { u = append([]byte(nil), b...) })
	doc.GetMap("meta").Set("replicationEpoch", 99.0)
	unsub()
	return u
}
