package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clientToken adds a client token on a node (`hub token add --client` or `peer token add
// --client`) and returns it.
func (c *cluster) clientToken(node, name string, extra ...string) string {
	c.t.Helper()
	exe, data := bin.hub, c.hubData()
	if node != "hub" {
		exe, data = bin.peer, filepath.Join(c.dir, node)
	}
	out, err := exec.Command(exe, append([]string{"token", "add", "--data", data, "--client", name}, extra...)...).Output()
	if err != nil {
		c.t.Fatalf("%s token add --client: %v", node, err)
	}
	return strings.TrimSpace(string(out))
}

// bodyText reads Y.Text("body") of a namespace through a node's admin API.
func bodyText(t *testing.T, p *proc, ns string) string {
	t.Helper()
	status, b := p.api().do("GET", "/v1/namespaces/"+ns+"/doc?root=body:text", nil)
	if status != 200 {
		return fmt.Sprintf("<status %d>", status)
	}
	var doc map[string]string
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc["body"]
}

func waitBody(t *testing.T, ns, want string, procs ...*proc) {
	t.Helper()
	eventually(t, 30*time.Second, "body text", func() error {
		for _, p := range procs {
			if got := bodyText(t, p, ns); got != want {
				return fmt.Errorf("%s has %.60q (%d bytes), want %.60q (%d bytes)", p.name, got, len(got), want, len(want))
			}
		}
		return nil
	})
}

// editorCluster is a hub and two peers replicating one namespace, with a client token on
// each node.
func editorCluster(t *testing.T) (c *cluster, ns string, hub, a, b *proc, tok map[string]string) {
	c = newCluster(t)
	hub = c.startHub()
	ns = hub.api().createNamespace()
	tok = map[string]string{"hub": c.clientToken("hub", "alice"), "peer-a": c.clientToken("peer-a", "bob"), "peer-b": c.clientToken("peer-b", "carol")}
	a = c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns)
	b = c.startPeer("peer-b", c.tokenFile("peer-b", c.token("peer-b")), "--target", ns)
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	return c, ns, hub, a, b, tok
}

// Stock y-websocket editors on the hub and on two peers converge; each node's document
// (admin API) has the same text.
func TestE2E_Editors_ConvergeAcrossNodes(t *testing.T) {
	ag := startAgent(t)
	_, ns, hub, a, b, tok := editorCluster(t)
	ag.open("h", hub, ns, tok["hub"])
	ag.open("a", a, ns, tok["peer-a"])
	ag.open("b", b, ns, tok["peer-b"])
	ag.insert("h", 0, "[hub]")
	ag.waitText("a", "[hub]")
	ag.waitText("b", "[hub]")
	ag.insert("a", 5, "[a]")
	ag.insert("b", 0, "[b]")
	want := "[b][hub][a]"
	for _, e := range []string{"h", "a", "b"} {
		ag.waitText(e, want)
	}
	waitBody(t, ns, want, hub, a, b)
	// A peer serves its targets only: another namespace of the hub is unknown there.
	other := hub.api().createNamespace()
	resp, err := http.Get("http://" + a.client + "/v1/yjs/" + other + "?token=" + tok["peer-a"])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a namespace peer-a does not replicate: %d, want 404", resp.StatusCode)
	}
	// An admin API write reaches the editors too.
	hub.api().set(ns, map[string]any{"k": "v"})
	ag.insert("h", len(want), "!")
	ag.waitText("b", want+"!")
}

// Awareness between two editors of one node: a state set by one is seen by the other; when
// the first goes away its state goes too.
func TestE2E_Editors_AwarenessOnOneNode(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	tok := c.clientToken("hub", "alice")
	ag.open("x", hub, ns, tok)
	ag.open("y", hub, ns, tok)
	ag.must("setAwareness", map[string]any{"name": "x", "state": map[string]any{"user": map[string]any{"name": "ada"}}}, nil)
	type st struct {
		ClientID uint64         `json:"clientID"`
		State    map[string]any `json:"state"`
	}
	has := func(name, user string) bool {
		var states []st
		ag.must("states", map[string]any{"name": name}, &states)
		for _, s := range states {
			if u, ok := s.State["user"].(map[string]any); ok && u["name"] == user {
				return true
			}
		}
		return false
	}
	eventually(t, 20*time.Second, "y sees x's awareness", func() error {
		if !has("y", "ada") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// y's own initial state has clock 0, which y-protocols does not take from a remote
	// (it announces itself with its next change or its 15 s renewal): only x's is held.
	if v := hub.api().metric(`nomicore_client_awareness_states{side="hub"}`); v != 1 {
		t.Errorf("awareness states gauge %v, want 1 (x's)", v)
	}
	ag.must("close", map[string]any{"name": "x"}, nil)
	eventually(t, 20*time.Second, "x's state removed at y", func() error {
		if has("y", "ada") {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if v := hub.api().metric(`nomicore_client_awareness_states{side="hub"}`); v != 0 {
		t.Errorf("awareness states gauge %v after x left, want 0", v)
	}
}

// A read-only editor syncs and receives, its edits are refused (PermissionDenied) and reach
// no one; a meta change from a writer is refused the same way with zero effect.
func TestE2E_Editors_ReadOnlyAndMetaRefused(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	w := c.clientToken("hub", "writer")
	r := c.clientToken("hub", "reader", "--read-only")
	ag.open("w", hub, ns, w)
	ag.open("r", hub, ns, r)
	ag.open("w2", hub, ns, w)
	ag.insert("w", 0, "shared")
	ag.waitText("r", "shared")
	ag.insert("r", 0, "READER:")
	if ev := ag.waitEvent("r", "permission-denied"); !strings.Contains(ev.Reason, "read-only") {
		t.Errorf("read-only reason %q", ev.Reason)
	}
	ag.insert("w", 6, "!")
	ag.waitText("r", "READER:shared!") // still connected, still receiving
	ag.waitText("w2", "shared!")
	if got := ag.text("w"); got != "shared!" {
		t.Errorf("the writer sees %q", got)
	}
	waitBody(t, ns, "shared!", hub)

	ag.must("setMeta", map[string]any{"name": "w2", "key": "replicationEpoch", "value": 99}, nil)
	if ev := ag.waitEvent("w2", "permission-denied"); !strings.Contains(ev.Reason, "meta") {
		t.Errorf("meta reason %q", ev.Reason)
	}
	var st struct{ ReplicationEpoch float64 }
	hub.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
	if st.ReplicationEpoch != 1 {
		t.Errorf("epoch %v after a refused meta change", st.ReplicationEpoch)
	}
	if v := hub.api().metric(`nomicore_client_refused_updates_total{reason="protected-meta",side="hub"}`); v != 1 {
		t.Errorf("protected-meta refusals %v", v)
	}
	if v := hub.api().metric(`nomicore_client_refused_updates_total{reason="read-only",side="hub"}`); v < 1 {
		t.Errorf("read-only refusals %v", v)
	}
	if !strings.Contains(tail(hub.log, 200), "editor update refused: it changes the protected meta map") {
		t.Error("no log line for the refused meta change")
	}
}

// Refused before the upgrade: 401 without or with an unknown token, 403 for a namespace the
// token does not grant, 404 for a namespace the node does not serve; a removed token
// closes its editor (4401, and the provider stops retrying).
func TestE2E_Editors_RefusedBeforeUpgradeAndRevoked(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	other := hub.api().createNamespace()
	narrow := c.clientToken("hub", "narrow", "--namespace", other)
	gone := c.clientToken("hub", "gone")
	url := "ws://" + hub.client + "/v1/yjs"
	for _, tc := range []struct {
		name, ns, token string
		status          int
		code            string
	}{
		{"none", ns, "", 401, "UNAUTHORIZED"},
		{"unknown", ns, "not-a-token", 401, "UNAUTHORIZED"},
		{"forbidden", ns, narrow, 403, "FORBIDDEN"},
		{"notfound", "ns-0123456789abcdef0123456789abcdef", gone, 404, "NAMESPACE_NOT_FOUND"},
	} {
		ag.must("open", map[string]any{"name": tc.name, "url": url, "ns": tc.ns, "token": tc.token, "wait": false}, nil)
		ev := ag.waitEvent(tc.name, "refused")
		if ev.Status != tc.status || !strings.Contains(ev.Body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, ev.Status, ev.Body, tc.status, tc.code)
		}
		ag.must("close", map[string]any{"name": tc.name}, nil)
	}
	// A bearer header works as well.
	ag.must("open", map[string]any{"name": "bearer", "url": url, "ns": ns, "token": gone, "bearer": true}, nil)
	ag.open("victim", hub, ns, gone)
	out, err := exec.Command(bin.hub, "token", "remove", "--data", c.hubData(), "--client", "gone").CombinedOutput()
	if err != nil {
		t.Fatalf("token remove: %v %s", err, out)
	}
	if ev := ag.waitEvent("victim", "closed"); ev.Code != 4401 {
		t.Errorf("removed token: closed with %d, want 4401", ev.Code)
	}
	if strings.Contains(tail(hub.log, 400), gone) {
		t.Error("the hub logged a client token")
	}
}

// An editor's writes survive kill -9 of the peer they went to: with the hub away, what a
// second editor of the peer saw is on disk, and comes back after a restart; then it reaches
// the hub.
func TestE2E_Editors_WritesSurviveKill9(t *testing.T) {
	ag := startAgent(t)
	c, ns, hub, a, _, tok := editorCluster(t)
	hub.stop() // the peer works alone
	ag.open("e1", a, ns, tok["peer-a"])
	ag.open("e2", a, ns, tok["peer-a"])
	ag.insert("e1", 0, "written while the hub was away")
	ag.waitText("e2", "written while the hub was away") // relayed only once durable
	syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	<-a.done
	ag.must("close", map[string]any{"name": "e1"}, nil)
	ag.must("close", map[string]any{"name": "e2"}, nil)
	a = c.startPeer("peer-a", filepath.Join(c.dir, "peer-a.token"), "--target", ns)
	waitBody(t, ns, "written while the hub was away", a)
	ag.open("e3", a, ns, tok["peer-a"])
	ag.waitText("e3", "written while the hub was away")
	c.startHub()
	waitBody(t, ns, "written while the hub was away", hub)
}

// A 1 MiB paste reaches the other editors of the node, and the node's document.
func TestE2E_Editors_LargePasteOneNode(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	tok := c.clientToken("hub", "alice")
	ag.open("p", hub, ns, tok)
	ag.open("q", hub, ns, tok)
	paste := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	ag.insert("p", 0, paste)
	ag.must("waitLength", map[string]any{"name": "q", "length": len(paste), "timeoutMs": 60000}, nil)
	if got := ag.text("q"); got != paste {
		t.Fatalf("the other editor has %d bytes, not the paste", len(got))
	}
	waitBody(t, ns, paste, hub)
}
