package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// presenceOf is an editor's awareness state naming user (y-protocols' convention:
// user.name), with a cursor position.
func presenceOf(user string, cursor int) map[string]any {
	return map[string]any{"user": map[string]any{"name": user}, "cursor": cursor}
}

// setPresence sets an editor's own awareness state.
func (a *agent) setPresence(name string, state map[string]any) {
	a.t.Helper()
	a.must("setAwareness", map[string]any{"name": name, "state": state}, nil)
}

// waitPresence waits until editor name holds user's state (exactly state, when not nil) and
// returns how long that took as the agent measured it.
func (a *agent) waitPresence(name, user string, state map[string]any) time.Duration {
	a.t.Helper()
	args := map[string]any{"name": name, "user": user, "timeoutMs": 20000}
	if state != nil {
		args["state"] = state
	}
	var ms int
	a.must("waitPresence", args, &ms)
	return time.Duration(ms) * time.Millisecond
}

// openHocusPresence opens a real HocuspocusProvider (of e2e/hocuspocus/v4) named name on
// p's /v1/hocuspocus for document ns and sets its whole awareness state.
func (a *agent) openHocusPresence(name string, p *proc, ns, token string, state map[string]any) {
	a.t.Helper()
	a.must("open", map[string]any{"name": name, "url": hocusURL(p), "ns": ns, "token": token}, nil)
	a.must("setLocalState", map[string]any{"name": name, "state": state}, nil)
}

// waitPresenceGone waits until editor name holds no state of user, within timeout.
func (a *agent) waitPresenceGone(name, user string, timeout time.Duration) time.Duration {
	a.t.Helper()
	var ms int
	a.must("waitPresence", map[string]any{"name": name, "user": user, "gone": true, "timeoutMs": timeout.Milliseconds()}, &ms)
	return time.Duration(ms) * time.Millisecond
}

// presenceHubCluster starts n nodes of a hub cluster as shipped, every node with the same
// tokens: a client token "editors" (returned) and a replication token for each of peers
// (the files of which it returns by name).
func presenceHubCluster(t *testing.T, n int, peers ...string) (c *hubCluster, clientTok string, tokenFiles map[string]string) {
	t.Helper()
	return presenceHubClusterWith(t, n, nil, peers...)
}

// presenceHubClusterWith is presenceHubCluster with nodes of noEditors (their indexes)
// started without an editor listener (--client-listen off).
func presenceHubClusterWith(t *testing.T, n int, noEditors []int, peers ...string) (c *hubCluster, clientTok string, tokenFiles map[string]string) {
	t.Helper()
	tokenFiles = map[string]string{}
	c = newShippedHubCluster(t, n, func(c *hubCluster) {
		for _, i := range noEditors {
			c.hubs[i].client = ""
		}
		for i := range c.hubs {
			if err := os.MkdirAll(c.data(i), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		clientTok = runToken(t, bin.hub, c.data(0), "--client", "editors")
		for _, p := range peers {
			tokenFiles[p] = filepath.Join(c.dir, p+".token")
			if err := os.WriteFile(tokenFiles[p], []byte(runToken(t, bin.hub, c.data(0), "--peer", p)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(filepath.Join(c.data(0), "tokens.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(c.hubs); i++ {
			if err := os.WriteFile(filepath.Join(c.data(i), "tokens.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	})
	return c, clientTok, tokenFiles
}

// presenceOfPeersAcrossNodes starts a two-node cluster (the nodes of noEditors without an
// editor listener) with peer-a attached to node 1 and peer-b to node 2, and stock
// y-websocket editors pam on peer-a, pia on peer-b and nia on node 2, each with its
// presence set; it returns once each sees the other two.
func presenceOfPeersAcrossNodes(t *testing.T, noEditors []int) (ag *agent, c *hubCluster, ns, clientTok string) {
	t.Helper()
	ag = startAgent(t)
	c, clientTok, tokenFiles := presenceHubClusterWith(t, 2, noEditors, "peer-a", "peer-b")
	ns = c.hubs[0].api().createNamespace()
	tok := map[string]string{}
	for _, name := range []string{"peer-a", "peer-b"} {
		tok[name] = runToken(t, bin.peer, filepath.Join(c.dir, name), "--client", "editors")
	}
	a := c.startPeerClients("peer-a", ns, tokenFiles["peer-a"], true, "--hub-url", c.url(0))
	b := c.startPeerClients("peer-b", ns, tokenFiles["peer-b"], true, "--hub-url", c.url(1))
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	ag.open("pam", a, ns, tok["peer-a"])
	ag.open("pia", b, ns, tok["peer-b"])
	ag.open("nia", c.hubs[1], ns, clientTok)
	users := []string{"pam", "pia", "nia"}
	for i, u := range users {
		ag.setPresence(u, presenceOf(u, i))
	}
	var worst time.Duration
	for _, viewer := range users {
		for i, u := range users {
			if u != viewer {
				worst = max(worst, ag.waitPresence(viewer, u, presenceOf(u, i)))
			}
		}
	}
	t.Logf("the editors on a peer of node 1, a peer of node 2 and node 2 saw each other %v after the last state was set", worst)
	return ag, c, ns, clientTok
}

// Peers of a hub cluster and the cluster's nodes share presence: a peer attached to node 1
// (which has no editor of the document), a peer attached to node 2, and an editor on node
// 2, stock y-websocket editors all: each sees the other two (node 1 relays its peer's
// states to the cluster and the cluster's to its peer; node 2 relays between its editor,
// its peer and the cluster); a change propagates; an editor that closes is removed
// everywhere; an editor that then opens on node 1 sees and is seen by all. The times are
// logged, not asserted.
func TestE2E_Cluster_PresenceWithPeers(t *testing.T) {
	t.Parallel()
	ag, c, ns, clientTok := presenceOfPeersAcrossNodes(t, nil)
	start := time.Now()
	ag.setPresence("pam", presenceOf("pam", 42))
	ag.waitPresence("nia", "pam", presenceOf("pam", 42))
	ag.waitPresence("pia", "pam", presenceOf("pam", 42))
	t.Logf("a cursor move on node 1's peer reached node 2 and its peer in %v", time.Since(start))

	start = time.Now()
	ag.must("close", map[string]any{"name": "pia"}, nil)
	ag.waitPresenceGone("nia", "pia", 10*time.Second)
	ag.waitPresenceGone("pam", "pia", 10*time.Second)
	t.Logf("a closed editor on node 2's peer was removed on node 2 and node 1's peer in %v", time.Since(start))

	ag.open("ned", c.hubs[0], ns, clientTok)
	ag.setPresence("ned", presenceOf("ned", 7))
	ag.waitPresence("ned", "pam", presenceOf("pam", 42))
	ag.waitPresence("ned", "nia", presenceOf("nia", 2))
	ag.waitPresence("pam", "ned", presenceOf("ned", 7))
	ag.waitPresence("nia", "ned", presenceOf("ned", 7))
	if v := c.hubs[1].api().metric(`nomicore_presence_relayed_total{direction="in"}`); v < 2 {
		t.Errorf("node 2 counts %v presence entries received", v)
	}
}

// A cluster node without an editor listener (--client-listen off) still relays its peers'
// presence: an editor on a peer of node 1, one on a peer of node 2 and one on node 2 see
// each other, and a change made on node 1's peer reaches the others.
func TestE2E_Cluster_PresenceWithPeersOfANodeWithoutEditors(t *testing.T) {
	t.Parallel()
	ag, _, _, _ := presenceOfPeersAcrossNodes(t, []int{0})
	ag.setPresence("pam", presenceOf("pam", 42))
	ag.waitPresence("nia", "pam", presenceOf("pam", 42))
	ag.waitPresence("pia", "pam", presenceOf("pam", 42))
}

// Three nodes of a hub cluster as shipped (client listener on, presence relay on by
// default), one stock y-websocket editor on each: each sees the other two's presence; a
// change propagates; an editor that closes is removed everywhere; a node killed takes its
// editors' presence with it within the awareness timeout; a node that shuts down cleanly at
// once (it says so).
// The times are measured and logged (the target is a second on loopback), not asserted.
func TestE2E_Cluster_PresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	ag := startAgent(t)
	c, clientTok, _ := presenceHubCluster(t, 3)
	ns := c.hubs[0].api().createNamespace()
	users := []string{"ada", "bea", "cyd"}
	for i, u := range users {
		ag.open(u, c.hubs[i], ns, clientTok)
	}
	for i, u := range users {
		ag.setPresence(u, presenceOf(u, i))
	}
	var worst time.Duration
	for _, viewer := range users {
		for i, u := range users {
			if u != viewer {
				worst = max(worst, ag.waitPresence(viewer, u, presenceOf(u, i)))
			}
		}
	}
	t.Logf("every editor saw the other two nodes' editors %v after the last state was set", worst)

	// A real Hocuspocus provider on node 3's /v1/hocuspocus and the y-websocket editors on
	// nodes 1 and 2 see each other; its destroy() removes it there.
	hp := startHocusAgent(t, "v4")
	start := time.Now()
	hp.openHocusPresence("hoc", c.hubs[2], ns, clientTok, presenceOf("hoc", 9))
	ag.waitPresence("ada", "hoc", presenceOf("hoc", 9))
	ag.waitPresence("bea", "hoc", presenceOf("hoc", 9))
	hp.waitPresence("hoc", "ada", presenceOf("ada", 0))
	hp.waitPresence("hoc", "bea", presenceOf("bea", 1))
	t.Logf("a Hocuspocus provider on node 3 and the editors on nodes 1 and 2 saw each other %v after it was opened", time.Since(start))
	hp.must("setLocalState", map[string]any{"name": "hoc", "state": presenceOf("hoc", 10)}, nil)
	ag.waitPresence("ada", "hoc", presenceOf("hoc", 10))
	start = time.Now()
	hp.must("close", map[string]any{"name": "hoc"}, nil)
	ag.waitPresenceGone("ada", "hoc", 10*time.Second)
	ag.waitPresenceGone("bea", "hoc", 10*time.Second)
	t.Logf("a destroyed Hocuspocus provider on node 3 was removed on nodes 1 and 2 in %v", time.Since(start))

	// A change on node 1 reaches nodes 2 and 3.
	start = time.Now()
	ag.setPresence("ada", presenceOf("ada", 42))
	for _, viewer := range []string{"bea", "cyd"} {
		ag.waitPresence(viewer, "ada", presenceOf("ada", 42))
	}
	t.Logf("a cursor move on node 1 reached nodes 2 and 3 in %v", time.Since(start))

	// Every node lists every editor present, with its node.
	eventually(t, 10*time.Second, "every node lists the three editors present", func() error {
		for _, h := range c.hubs {
			var st struct {
				Presence []struct {
					User string `json:"user"`
					Node string `json:"node"`
				} `json:"presence"`
			}
			h.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
			got := map[string]string{}
			for _, p := range st.Presence {
				got[p.User] = p.Node
			}
			for i, u := range users {
				if got[u] != fmt.Sprintf("n%d", i+1) {
					return fmt.Errorf("%s lists %v", h.name, st.Presence)
				}
			}
		}
		return nil
	})

	// The dashboard's namespace page of node 1 shows them, with their nodes.
	dash := (&dashBrowser{ctx: browserFor(t)}).newTab(t, "dashboard")
	dash.do("open the namespace page", chromedp.Navigate(c.hubs[0].admin+"/#/ns/"+ns))
	dash.waitFor("the three editors present, each with its node",
		`(() => { const rows = Array.from(document.querySelectorAll('#presence-list tbody tr[data-key]')).map(r => r.cells[0].textContent + '@' + r.cells[1].textContent);
		  return rows.includes('ada@n1 (this node)') && rows.includes('bea@n2') && rows.includes('cyd@n3') })()`,
		20*time.Second)
	dash.noConsoleErrors()

	// An editor that closes is removed on the other nodes.
	start = time.Now()
	ag.must("close", map[string]any{"name": "bea"}, nil)
	for _, viewer := range []string{"ada", "cyd"} {
		ag.waitPresenceGone(viewer, "bea", 10*time.Second)
	}
	t.Logf("a closed editor on node 2 was removed on nodes 1 and 3 in %v", time.Since(start))
	if v := c.hubs[0].api().metric(`nomicore_presence_relayed_total{direction="in"}`); v < 3 {
		t.Errorf("node 1 counts %v presence entries received from the others", v)
	}

	// A node that dies (kill -9) says nothing: its editor's presence goes on the others when
	// it is not renewed within the awareness timeout (30 s; the provider renewed it at most
	// 15 s before).
	ag.open("dee", c.hubs[1], ns, clientTok)
	ag.setPresence("dee", presenceOf("dee", 1))
	ag.waitPresence("ada", "dee", presenceOf("dee", 1))
	ag.waitPresence("cyd", "dee", presenceOf("dee", 1))
	start = time.Now()
	c.signal(1, syscall.SIGKILL)
	ag.waitPresenceGone("ada", "dee", 45*time.Second)
	ag.waitPresenceGone("cyd", "dee", 5*time.Second)
	t.Logf("node 2's editor was removed on nodes 1 and 3 %v after node 2 was killed", time.Since(start))
	ag.must("close", map[string]any{"name": "dee"}, nil)

	// A node that shuts down cleanly: its editor's presence goes at once (well within the
	// 30 s awareness timeout), and the survivors still see each other.
	start = time.Now()
	c.signal(2, syscall.SIGTERM)
	ag.waitPresenceGone("ada", "cyd", 10*time.Second)
	t.Logf("node 3's editor was removed on node 1 %v after node 3 was asked to stop", time.Since(start))
}

// A hub and two peers as shipped (presence relay on), a stock y-websocket editor on each:
// each sees the other two's presence — the hub relays between the peers over the presence
// extension of the replication connections — a change propagates, a closed editor goes
// everywhere; a peer killed with -9 takes its editor's presence off the hub and the other
// peer (the hub removes what a lost connection announced), and it comes back when the peer
// returns. The times are logged, not asserted.
func TestE2E_Editors_PresenceAcrossHubAndPeers(t *testing.T) {
	ag := startAgent(t)
	c, ns, hub, a, b, tok := editorCluster(t)
	ag.open("hal", hub, ns, tok["hub"])
	ag.open("amy", a, ns, tok["peer-a"])
	ag.open("bob", b, ns, tok["peer-b"])
	users := []string{"hal", "amy", "bob"}
	for i, u := range users {
		ag.setPresence(u, presenceOf(u, i))
	}
	var worst time.Duration
	for _, viewer := range users {
		for i, u := range users {
			if u != viewer {
				worst = max(worst, ag.waitPresence(viewer, u, presenceOf(u, i)))
			}
		}
	}
	t.Logf("every editor saw the other two nodes' editors %v after the last state was set", worst)
	// The periodic reconciliation of a live namespace (every 3 s here) leaves presence alone:
	// two of them later, every editor still holds the others' states.
	time.Sleep(7 * time.Second)
	for _, viewer := range users {
		for i, u := range users {
			if u != viewer {
				ag.must("waitPresence", map[string]any{"name": viewer, "user": u, "state": presenceOf(u, i), "timeoutMs": 500}, nil)
			}
		}
	}

	// The real Hocuspocus provider on the hub's /v1/hocuspocus shares the document's presence
	// with the y-websocket editors on the hub and on both peers, both ways.
	hp := startHocusAgent(t, "v4")
	start := time.Now()
	hp.openHocusPresence("hoc", hub, ns, tok["hub"], presenceOf("hoc", 7))
	for _, viewer := range users {
		worst = max(worst, ag.waitPresence(viewer, "hoc", presenceOf("hoc", 7)))
	}
	for i, u := range users {
		hp.waitPresence("hoc", u, presenceOf(u, i))
	}
	t.Logf("a Hocuspocus provider on the hub and the y-websocket editors on the hub and both peers saw each other %v after it was opened", time.Since(start))
	start = time.Now()
	hp.must("setLocalState", map[string]any{"name": "hoc", "state": presenceOf("hoc", 8)}, nil)
	for _, viewer := range users {
		ag.waitPresence(viewer, "hoc", presenceOf("hoc", 8))
	}
	t.Logf("a cursor move of the Hocuspocus provider reached both peers in %v", time.Since(start))

	start = time.Now()
	ag.setPresence("amy", presenceOf("amy", 42))
	ag.waitPresence("bob", "amy", presenceOf("amy", 42))
	ag.waitPresence("hal", "amy", presenceOf("amy", 42))
	hp.waitPresence("hoc", "amy", presenceOf("amy", 42))
	t.Logf("a cursor move on peer-a reached peer-b and the hub (both endpoints) in %v", time.Since(start))

	// destroy() of the Hocuspocus provider removes it on the hub's other endpoint and on both peers.
	start = time.Now()
	hp.must("close", map[string]any{"name": "hoc"}, nil)
	for _, viewer := range users {
		ag.waitPresenceGone(viewer, "hoc", 10*time.Second)
	}
	t.Logf("a destroyed Hocuspocus provider on the hub was removed on the hub and both peers in %v", time.Since(start))
	if v := hub.api().metric(`nomicore_presence_relayed_total{direction="in"}`); v < 2 {
		t.Errorf("the hub counts %v presence entries received", v)
	}

	// Closing an editor on peer-b removes it on the hub and on peer-a.
	start = time.Now()
	ag.must("close", map[string]any{"name": "bob"}, nil)
	ag.waitPresenceGone("hal", "bob", 10*time.Second)
	ag.waitPresenceGone("amy", "bob", 10*time.Second)
	t.Logf("a closed editor on peer-b was removed on the hub and peer-a in %v", time.Since(start))

	// kill -9 of peer-a: its editor goes on the hub and on peer-b, and comes back.
	ag.open("bea", b, ns, tok["peer-b"])
	ag.setPresence("bea", presenceOf("bea", 1))
	ag.waitPresence("amy", "bea", presenceOf("bea", 1))
	start = time.Now()
	a.kill()
	ag.waitPresenceGone("hal", "amy", 45*time.Second)
	ag.waitPresenceGone("bea", "amy", 45*time.Second)
	t.Logf("peer-a's editor was removed on the hub and peer-b %v after peer-a was killed", time.Since(start))
	c.startPeer("peer-a", filepath.Join(c.dir, "peer-a.token"), "--target", ns)
	ag.setPresence("amy", presenceOf("amy", 43)) // the provider reconnects by itself and announces it
	ag.waitPresence("hal", "amy", presenceOf("amy", 43))
	ag.waitPresence("bea", "amy", presenceOf("amy", 43))

	// The hub goes away: a peer keeps what the hub relayed until it expires (30 s without
	// renewal), then removes it; its own editors' presence stays.
	ag.open("ann", c.peers["peer-a"], ns, tok["peer-a"])
	ag.setPresence("ann", presenceOf("ann", 1))
	ag.waitPresence("amy", "ann", presenceOf("ann", 1))
	ag.waitPresence("amy", "bea", nil)
	hub.kill()
	start = time.Now()
	ag.waitPresence("amy", "bea", nil) // kept for now
	gone := ag.waitPresenceGone("amy", "bea", 50*time.Second)
	t.Logf("peer-a removed peer-b's editor %v after the hub was killed (kept %v)", time.Since(start), gone)
	if gone < 10*time.Second {
		t.Errorf("peer-a dropped what its hub relayed %v after losing it, before the awareness timeout", gone)
	}
	ag.waitPresence("amy", "ann", presenceOf("ann", 1))
}

// decodeCaptureJSON runs `nmcr frame decode --chunked --presence` on a capture file and
// returns each frame as JSON.
func decodeCaptureJSON(t *testing.T, path string) []map[string]any {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin.nmcr, "frame", "decode", "--chunked", "--presence")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nmcr frame decode %s: %v: %s", path, err, stderr.String())
	}
	var frames []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var f map[string]any
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatalf("decode output line %q: %v", line, err)
		}
		frames = append(frames, f)
	}
	return frames
}

// Interop: against a hub with the presence relay on (and editors moving on it and on a peer
// that relays), a peer with --presence-relay off and a --generation v1 peer negotiate
// exactly what they did before the extension — their HELLO offers, and the hub's HELLO_ACK
// selects, CAP_CHUNKED_UPDATE and nothing respectively — and no PRESENCE frame crosses their
// connections; their documents replicate, and their editors see the presence of their own
// node only.
func TestE2E_Editors_PresenceInterop(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	hubCap := filepath.Join(c.dir, "hub.frames")
	hub := c.startHub("--capture-frames", hubCap)
	ns := hub.api().createNamespace()
	tok := map[string]string{"hub": c.clientToken("hub", "alice"), "peer-on": c.clientToken("peer-on", "bob"),
		"peer-off": c.clientToken("peer-off", "carol"), "peer-v1": c.clientToken("peer-v1", "dan")}
	caps := map[string]string{}
	peers := map[string]*proc{}
	for _, p := range []struct {
		name  string
		extra []string
	}{{"peer-on", nil}, {"peer-off", []string{"--presence-relay", "off"}}, {"peer-v1", []string{"--generation", "v1"}}} {
		caps[p.name] = filepath.Join(c.dir, p.name+".frames")
		args := append([]string{"--target", ns, "--capture-frames", caps[p.name]}, p.extra...)
		peers[p.name] = c.startPeer(p.name, c.tokenFile(p.name, c.token(p.name)), args...)
		targetState(t, peers[p.name], ns, "live")
	}
	ag.open("hal", hub, ns, tok["hub"])
	ag.open("oni", peers["peer-on"], ns, tok["peer-on"])
	ag.open("ofa", peers["peer-off"], ns, tok["peer-off"])
	ag.open("ofb", peers["peer-off"], ns, tok["peer-off"])
	ag.open("vee", peers["peer-v1"], ns, tok["peer-v1"])
	for i, u := range []string{"hal", "oni", "ofa", "ofb", "vee"} {
		ag.setPresence(u, presenceOf(u, i))
	}
	ag.waitPresence("hal", "oni", nil) // the relay works where it is on
	ag.waitPresence("oni", "hal", nil)
	ag.waitPresence("ofb", "ofa", nil) // local presence works where it is off
	ag.insert("ofa", 0, "off ")
	ag.insert("vee", 0, "v1 ")
	for _, e := range []string{"hal", "oni", "ofa", "vee"} {
		ag.must("waitLength", map[string]any{"name": e, "length": 7, "timeoutMs": 30000}, nil)
	}
	time.Sleep(time.Second) // presence that would cross has had time to
	var states []struct {
		State map[string]any `json:"state"`
	}
	for viewer, foreign := range map[string][]string{"ofa": {"hal", "oni", "vee"}, "vee": {"hal", "oni", "ofa", "ofb"}, "hal": {"ofa", "ofb", "vee"}} {
		ag.must("states", map[string]any{"name": viewer}, &states)
		for _, s := range states {
			if u, ok := s.State["user"].(map[string]any); ok && slices.Contains(foreign, u["name"].(string)) {
				t.Errorf("%s sees %v across a connection without the presence extension", viewer, u["name"])
			}
		}
	}
	for _, p := range peers {
		p.stop()
	}
	hub.stop()

	// CAP_CHUNKED_UPDATE is 1, CAP_NAMESPACE_DELETED 2, CAP_PRESENCE 4.
	want := map[string]string{"peer-on": "7", "peer-off": "3", "peer-v1": "0"}
	for name, path := range caps {
		var hello, ack string
		presence := 0
		for _, f := range decodeCaptureJSON(t, path) {
			m, _ := f["payload"].(map[string]any)
			switch f["type"] {
			case "HELLO":
				hello = fmt.Sprint(m["optionalCapabilities"])
			case "HELLO_ACK":
				ack = fmt.Sprint(m["selectedCapabilities"])
			case "PRESENCE":
				presence++
			}
		}
		if hello != want[name] || ack != want[name] {
			t.Errorf("%s: HELLO offers %q, HELLO_ACK selects %q; want %q", name, hello, ack, want[name])
		}
		if (presence > 0) != (name == "peer-on") {
			t.Errorf("%s: %d PRESENCE frames", name, presence)
		}
	}
	if n := len(decodeCaptureJSON(t, hubCap)); n == 0 {
		t.Error("the hub's capture is empty")
	}
}

// Backpressure: a presence flood on one namespace (editors on the hub changing states of
// 8 KB 25 times a second each) does not slow its document updates on the same hub→peer
// connection: the time from an edit on the hub to its arrival at an editor on the peer is
// measured without and with the flood, in the same run, and reported (not asserted as a
// time); the updates all arrive, and the flood is seen dropping superseded states.
func TestE2E_Editors_PresenceFloodDoesNotSlowUpdates(t *testing.T) {
	ag := startAgent(t)
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	hubTok, peerTok := c.clientToken("hub", "alice"), c.clientToken("peer-a", "bob")
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns)
	targetState(t, a, ns, "live")
	ag.open("writer", hub, ns, hubTok)
	ag.open("reader", a, ns, peerTok)
	length := 0
	measure := func(n int) (p50, worst time.Duration) {
		var ds []time.Duration
		for range n {
			start := time.Now()
			ag.insert("writer", length, "x")
			length++
			ag.must("waitLength", map[string]any{"name": "reader", "length": length, "timeoutMs": 30000}, nil)
			ds = append(ds, time.Since(start))
			time.Sleep(20 * time.Millisecond)
		}
		slices.Sort(ds)
		return ds[len(ds)/2], ds[len(ds)-1]
	}
	quietP50, quietMax := measure(30)
	var flooders []string
	for i := range 10 {
		name := fmt.Sprintf("flood-%d", i)
		ag.open(name, hub, ns, hubTok)
		flooders = append(flooders, name)
	}
	ag.must("flood", map[string]any{"names": flooders, "bytes": 8000, "rate": 25, "seconds": 20}, nil)
	time.Sleep(2 * time.Second) // the flood is under way
	floodP50, floodMax := measure(30)
	t.Logf("edit on the hub → seen by an editor on the peer: without a presence flood p50 %v, max %v; during the flood p50 %v, max %v",
		quietP50, quietMax, floodP50, floodMax)
	t.Logf("hub: presence sent %.0f entries, %.1f MB; dropped as superseded %.0f",
		hub.api().metric(`nomicore_presence_relayed_total{direction="out"}`),
		hub.api().metric(`nomicore_presence_relayed_bytes_total{direction="out"}`)/1e6,
		hub.api().metric(`nomicore_presence_dropped_total{reason="superseded"}`))
	if a.api().metric(`nomicore_presence_relayed_total{direction="in"}`) == 0 {
		t.Fatal("the peer received no presence: there was no flood on the connection")
	}
	waitBody(t, ns, strings.Repeat("x", length), hub, a)
}
