package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

// The write-door matrix: every way to write a document (a door) on every kind of node, each
// write read back through the admin API of every node that serves the namespace and by a
// fresh editor on each of them. The binaries run with their shipped defaults but for their
// addresses and data directories (client listeners on, shipped timers), as a user runs
// them. A door is a row of writeDoors, a kind of node a row of nodeKinds; the matrix is
// their product, one namespace per cell.

// doorNode is one process of the matrix, with a client token for its editors.
type doorNode struct {
	p     *proc
	token string // a client token of this node's client listener
}

// writeDoor is one way to write: write puts text into Y.Text("body") of ns through node n.
// It returns once the door counts the write as made (for the admin API: answered 204; for
// an editor: the node's document holds it and the editor has left). attach sets up a writer
// of the door on a node that is about to lose its quorum (see refusedWriter).
type writeDoor struct {
	name   string
	write  func(t *testing.T, m *doorMatrix, n doorNode, ns, text string)
	attach func(t *testing.T, m *doorMatrix, n doorNode, ns string) refusedWriter
}

// refusedWriter is a writer of one door on a node that cannot store writes for a while.
// write makes the write then and checks that the door refuses it to the writer in its own
// way; retry is what the writer does once the node can store again (an application writes
// again; a y-websocket provider resends by itself when it reconnects) and returns once the
// node holds the write.
type refusedWriter struct {
	write func(t *testing.T, text string)
	retry func(t *testing.T)
}

// nodeKind is one kind of node: which node of the matrix is written to, which serve the same
// namespaces (the writer among them), and on which side its namespaces are created.
type nodeKind struct {
	name    string
	writer  func(m *doorMatrix) doorNode
	serving func(m *doorMatrix) []doorNode
	hubSide string // "single" or "cluster": where the kind's namespaces are created
}

var writeDoors = []writeDoor{
	{"admin-api", writeThroughAdminAPI, adminAPIWriter},
	{"y-websocket", writeThroughEditor, editorWriter},
	{"hocuspocus", writeThroughHocuspocus, hocuspocusWriter},
	// The same door with another credential: a signed token (jose, HS256) every node of the
	// matrix accepts, being configured with the same secret.
	{"y-websocket-jwt", writeThroughSignedEditor, signedEditorWriter},
}

var nodeKinds = []nodeKind{
	{name: "single-hub", hubSide: "single",
		writer:  func(m *doorMatrix) doorNode { return m.hub },
		serving: func(m *doorMatrix) []doorNode { return []doorNode{m.hub, m.hubPeer} }},
	{name: "peer-of-single-hub", hubSide: "single",
		writer:  func(m *doorMatrix) doorNode { return m.hubPeer },
		serving: func(m *doorMatrix) []doorNode { return []doorNode{m.hubPeer, m.hub} }},
	{name: "cluster-node", hubSide: "cluster",
		writer:  func(m *doorMatrix) doorNode { return m.nodes[0] },
		serving: func(m *doorMatrix) []doorNode { return append(append([]doorNode{}, m.nodes...), m.clusterPeer) }},
	{name: "peer-of-cluster", hubSide: "cluster",
		writer:  func(m *doorMatrix) doorNode { return m.clusterPeer },
		serving: func(m *doorMatrix) []doorNode { return append([]doorNode{m.clusterPeer}, m.nodes...) }},
}

// doorMatrix is the set-up the cells share: a single hub with a peer, and a hub cluster of
// three nodes with a peer that lists every node (node 2 first, so that what is written on
// node 1 reaches it through the log).
type doorMatrix struct {
	t            *testing.T
	ag           *agent
	hp           *agent // the Hocuspocus provider's (4.x)
	single       *cluster
	hub, hubPeer doorNode
	hc           *hubCluster
	nodes        []doorNode
	clusterPeer  doorNode
	namespaces   map[string]string // cell name → namespace id
	refusals     map[string]string // door name → namespace id of its refusal on a cluster node
	jwtSecret    string            // every node's --client-jwt-secret-file holds it
	jwtFlags     []string
	jwt          string // a signed token every node accepts (minted by jose)

	mu      sync.Mutex // guards editors
	editors int        // numbers the agent's editors
}

func cellName(d writeDoor, k nodeKind) string { return d.name + "@" + k.name }

// signed is n with the matrix's signed token in place of its client token.
func (m *doorMatrix) signed(n doorNode) doorNode {
	n.token = m.jwt
	return n
}

// newDoorMatrix starts every process and creates a namespace per cell, on the hub or node 3
// (not the node the cluster cells write to), which both peers replicate.
func newDoorMatrix(t *testing.T, ag *agent) *doorMatrix {
	m := &doorMatrix{t: t, ag: ag, namespaces: map[string]string{}, refusals: map[string]string{},
		jwtSecret: "the-write-door-matrix-hs256-secret-32+"}
	secretFile := filepath.Join(t.TempDir(), "jwt-secret")
	if err := os.WriteFile(secretFile, []byte(m.jwtSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	m.jwtFlags = []string{"--client-jwt-secret-file", secretFile}
	m.jwt = ag.joseMint(map[string]any{"alg": "HS256", "secret": m.jwtSecret, "expiresIn": "4h",
		"claims": map[string]any{"sub": "matrix-user", "ns": []string{"*"}}})
	m.single = newCluster(t)
	hubTok := m.single.clientToken("hub", "matrix")
	m.single.hub = &proc{t: t, name: "hub", admin: "http://" + freeAddr(t), client: freeAddr(t), log: filepath.Join(m.single.dir, "hub.log")}
	m.single.hub.args = append([]string{"serve", "--listen", m.single.hubRepl, "--admin-listen", m.single.hub.adminAddr(),
		"--client-listen", m.single.hub.client, "--data", m.single.hubData()}, m.jwtFlags...)
	if err := m.single.hub.start(); err != nil {
		t.Fatalf("hub: %v", err)
	}
	m.hub = doorNode{p: m.single.hub, token: hubTok}
	m.hc = newShippedHubCluster(t, 3, func(c *hubCluster) {
		for i := range c.hubs {
			if err := os.MkdirAll(c.data(i), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		peerTok := runToken(t, bin.hub, c.data(0), "--peer", "peer-c")
		clientTok := runToken(t, bin.hub, c.data(0), "--client", "matrix")
		b, err := os.ReadFile(filepath.Join(c.data(0), "tokens.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(c.hubs); i++ {
			if err := os.WriteFile(filepath.Join(c.data(i), "tokens.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(c.dir, "peer-c.token"), []byte(peerTok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, p := range c.hubs {
			m.nodes = append(m.nodes, doorNode{p: p, token: clientTok})
		}
	}, m.jwtFlags...)

	var single, clustered []string
	for _, k := range nodeKinds {
		for _, d := range writeDoors {
			var ns string
			if k.hubSide == "single" {
				ns = m.hub.p.api().createNamespace()
				single = append(single, ns)
			} else {
				ns = m.nodes[2].p.api().createNamespace()
				clustered = append(clustered, ns)
			}
			m.namespaces[cellName(d, k)] = ns
		}
	}
	for _, d := range writeDoors {
		ns := m.nodes[2].p.api().createNamespace()
		clustered = append(clustered, ns)
		m.refusals[d.name] = ns
	}
	m.hubPeer = m.startPeer("peer-h", m.single.dir, m.single.token("peer-h"),
		[]string{"ws://" + m.single.hubRepl + "/v1/replication"}, single)
	m.single.peers["peer-h"] = m.hubPeer.p
	m.clusterPeer = m.startPeer("peer-c", m.hc.dir, readTokenFile(t, filepath.Join(m.hc.dir, "peer-c.token")),
		[]string{m.hc.url(1), m.hc.url(2), m.hc.url(0)}, clustered)
	m.hc.peers["peer-c"] = m.clusterPeer.p
	for _, ns := range single {
		targetState(t, m.hubPeer.p, ns, "live")
	}
	for _, ns := range clustered {
		targetState(t, m.clusterPeer.p, ns, "live")
	}
	return m
}

// runToken runs `EXE token add --data DIR ARGS…` and returns the token it prints.
func runToken(t *testing.T, exe, data string, args ...string) string {
	out, err := exec.Command(exe, append([]string{"token", "add", "--data", data}, args...)...).Output()
	if err != nil {
		t.Fatalf("%s token add %v: %v", filepath.Base(exe), args, err)
	}
	return strings.TrimSpace(string(out))
}

func readTokenFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// startPeer starts a peer with the shipped defaults but for its addresses, its data, its
// hub's endpoints, its token and its targets; it has a client token of its own.
func (m *doorMatrix) startPeer(name, dir, peerToken string, hubURLs, targets []string) doorNode {
	t := m.t
	data := filepath.Join(dir, name)
	clientTok := runToken(t, bin.peer, data, "--client", "matrix")
	tokenFile := filepath.Join(dir, name+".token")
	if err := os.WriteFile(tokenFile, []byte(peerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, log: filepath.Join(dir, name+".log")}
	for attempt := 0; ; attempt++ {
		p.admin, p.client = "http://"+freeAddr(t), freeAddr(t)
		p.args = append([]string{"run", "--instance-id", name, "--token-file", tokenFile, "--admin-listen", p.adminAddr(),
			"--client-listen", p.client, "--data", data}, m.jwtFlags...)
		for _, u := range hubURLs {
			p.args = append(p.args, "--hub-url", u)
		}
		for _, ns := range targets {
			p.args = append(p.args, "--target", ns)
		}
		err := p.start()
		if err == nil {
			return doorNode{p: p, token: clientTok}
		}
		if attempt == 2 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// editorName returns a fresh name for an agent's editor.
func (m *doorMatrix) editorName(what string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.editors++
	return fmt.Sprintf("%s-%d", what, m.editors)
}

// agentCall runs an agent operation, failing t (the cell's test) on error.
func (m *doorMatrix) agentCall(t *testing.T, op string, args map[string]any, result any) {
	t.Helper()
	if err := m.ag.call(op, args, result); err != nil {
		t.Fatal(err)
	}
}

// openEditor opens a stock y-websocket editor on n's client listener and waits until it
// synced.
func (m *doorMatrix) openEditor(t *testing.T, name string, n doorNode, ns string) {
	t.Helper()
	m.agentCall(t, "open", map[string]any{"name": name, "url": "ws://" + n.p.client + "/v1/yjs", "ns": ns, "token": n.token, "timeoutMs": 30000}, nil)
}

// adminBody reads Y.Text("body") through n's admin API ("<status N>" when it cannot).
func adminBody(t *testing.T, n doorNode, ns string) string {
	t.Helper()
	a := api{t: t, base: n.p.admin, client: n.p.httpClient()}
	status, b := a.do("GET", "/v1/namespaces/"+ns+"/doc?root=body:text", nil)
	if status != 200 {
		return fmt.Sprintf("<status %d: %s>", status, b)
	}
	var doc map[string]string
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v: %s", n.p.name, err, b)
	}
	return doc["body"]
}

// waitAdminBody waits until n's admin API reads text.
func waitAdminBody(t *testing.T, n doorNode, ns, text string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, n.p.name+"'s admin API reads the text", func() error {
		if got := adminBody(t, n, ns); got != text {
			return fmt.Errorf("it reads %q, want %q", got, text)
		}
		return nil
	})
}

// writeThroughAdminAPI is the application's door: POST …/update with an update made on the
// document's current state (GET …/update), answered 204 once it is applied and durable.
func writeThroughAdminAPI(t *testing.T, _ *doorMatrix, n doorNode, ns, text string) {
	t.Helper()
	a := api{t: t, base: n.p.admin, client: n.p.httpClient()}
	status, state := a.do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatalf("GET update on %s: %d %s", n.p.name, status, state)
	}
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		t.Fatal(err)
	}
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	err := doc.GetText("body").Insert(doc.GetText("body").Len(), text, nil)
	unsub()
	if err != nil {
		t.Fatal(err)
	}
	if status, b := a.do("POST", "/v1/namespaces/"+ns+"/update", update); status != 204 {
		t.Fatalf("POST update on %s: %d %s", n.p.name, status, b)
	}
}

// writeThroughEditor is an editor's door: a stock y-websocket provider on the node's client
// listener types the text; once the node's document holds it, the editor leaves (so the
// node no longer keeps the namespace loaded for it).
func writeThroughEditor(t *testing.T, m *doorMatrix, n doorNode, ns, text string) {
	t.Helper()
	name := m.editorName("writer")
	m.openEditor(t, name, n, ns)
	m.agentCall(t, "insert", map[string]any{"name": name, "index": 0, "text": text}, nil)
	waitAdminBody(t, n, ns, text, 30*time.Second)
	m.agentCall(t, "close", map[string]any{"name": name}, nil)
}

// writeThroughHocuspocus is the door of an application built on @hocuspocus/provider (Tiptap
// and others): a HocuspocusProvider on the node's /v1/hocuspocus types the text and waits
// until the provider counts it saved (SyncStatus: durable on the node), then leaves.
func writeThroughHocuspocus(t *testing.T, m *doorMatrix, n doorNode, ns, text string) {
	t.Helper()
	name := m.editorName("hocus-writer")
	if err := m.hp.call("open", map[string]any{"name": name, "url": hocusURL(n.p), "ns": ns, "token": n.token, "timeoutMs": 30000}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.hp.call("insert", map[string]any{"name": name, "index": 0, "text": text}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.hp.call("waitSaved", map[string]any{"name": name, "timeoutMs": 30000}, nil); err != nil {
		t.Fatal(err)
	}
	if got := adminBody(t, n, ns); got != text {
		t.Fatalf("the provider counts its change saved, but %s reads %q", n.p.name, got)
	}
	if err := m.hp.call("close", map[string]any{"name": name}, nil); err != nil {
		t.Fatal(err)
	}
}

// hocuspocusWriter: a provider connected while the node was ready types; without quorum
// the node cannot store it, so the provider never hears it is saved (hasUnsyncedChanges
// stays true) and the node does not apply it; once the quorum is back the provider
// reconnects and resends it by itself, and then counts it saved.
func hocuspocusWriter(t *testing.T, m *doorMatrix, n doorNode, ns string) refusedWriter {
	t.Helper()
	name := m.editorName("hocus-refused")
	if err := m.hp.call("open", map[string]any{"name": name, "url": hocusURL(n.p), "ns": ns, "token": n.token, "timeoutMs": 30000}, nil); err != nil {
		t.Fatal(err)
	}
	var text string
	return refusedWriter{
		write: func(t *testing.T, s string) {
			t.Helper()
			text = s
			if err := m.hp.call("insert", map[string]any{"name": name, "index": 0, "text": text}, nil); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) {
				var st hocusState
				if err := m.hp.call("state", map[string]any{"name": name}, &st); err != nil {
					t.Fatal(err)
				}
				if !st.HasUnsyncedChanges {
					t.Fatalf("the provider counts its change saved on a node without quorum: %+v", st)
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
		retry: func(t *testing.T) {
			t.Helper()
			if err := m.hp.call("waitSaved", map[string]any{"name": name, "timeoutMs": 60000}, nil); err != nil {
				t.Fatal(err)
			}
			waitAdminBody(t, n, ns, text, 60*time.Second)
			if err := m.hp.call("close", map[string]any{"name": name}, nil); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// writeThroughSignedEditor is writeThroughEditor presenting the matrix's signed token.
func writeThroughSignedEditor(t *testing.T, m *doorMatrix, n doorNode, ns, text string) {
	t.Helper()
	writeThroughEditor(t, m, m.signed(n), ns, text)
}

// signedEditorWriter is editorWriter presenting the matrix's signed token.
func signedEditorWriter(t *testing.T, m *doorMatrix, n doorNode, ns string) refusedWriter {
	t.Helper()
	return editorWriter(t, m, m.signed(n), ns)
}

// textUpdate returns an update that inserts text at the start of Y.Text("body") of a
// document in state.
func textUpdate(t *testing.T, state []byte, text string) []byte {
	t.Helper()
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		t.Fatal(err)
	}
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	err := doc.GetText("body").Insert(0, text, nil)
	unsub()
	if err != nil {
		t.Fatal(err)
	}
	return update
}

// adminAPIWriter: an application that read the document (GET …/update) while the node was
// ready makes its change; POST …/update on a node that cannot store it is answered 503
// PERSISTENCE_DEGRADED, and the application posts it again later.
func adminAPIWriter(t *testing.T, _ *doorMatrix, n doorNode, ns string) refusedWriter {
	t.Helper()
	status, state := api{t: t, base: n.p.admin, client: n.p.httpClient()}.do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		t.Fatalf("GET update on %s: %d %s", n.p.name, status, state)
	}
	var update []byte
	return refusedWriter{
		write: func(t *testing.T, text string) {
			t.Helper()
			update = textUpdate(t, state, text)
			a := api{t: t, base: n.p.admin, client: n.p.httpClient()}
			if status, b := a.do("POST", "/v1/namespaces/"+ns+"/update", update); status != 503 || !strings.Contains(string(b), "PERSISTENCE_DEGRADED") {
				t.Fatalf("POST update on %s without quorum: %d %s, want 503 PERSISTENCE_DEGRADED", n.p.name, status, b)
			}
		},
		retry: func(t *testing.T) {
			t.Helper()
			a := api{t: t, base: n.p.admin, client: n.p.httpClient()}
			eventually(t, 30*time.Second, "the application's write taken again", func() error {
				if status, b := a.do("POST", "/v1/namespaces/"+ns+"/update", update); status != 204 {
					return fmt.Errorf("%d %s", status, b)
				}
				return nil
			})
		},
	}
}

// editorWriter: an editor connected while the node was ready (without quorum the node
// refuses new editors before the upgrade) types; the node closes its connection with 1013
// (try again later) and applies nothing; the provider keeps the change and resends it in
// its resync once it can connect again.
func editorWriter(t *testing.T, m *doorMatrix, n doorNode, ns string) refusedWriter {
	t.Helper()
	name := m.editorName("refused")
	m.openEditor(t, name, n, ns)
	var text string
	return refusedWriter{
		write: func(t *testing.T, s string) {
			t.Helper()
			text = s
			m.agentCall(t, "insert", map[string]any{"name": name, "index": 0, "text": text}, nil)
			var ev agentEvent
			m.agentCall(t, "waitEvent", map[string]any{"name": name, "type": "close", "timeoutMs": 30000}, &ev)
			if ev.Code != 1013 {
				t.Fatalf("the editor's connection closed with %d %q, want 1013", ev.Code, ev.Reason)
			}
		},
		retry: func(t *testing.T) {
			t.Helper()
			waitAdminBody(t, n, ns, text, 60*time.Second)
			m.agentCall(t, "close", map[string]any{"name": name}, nil)
		},
	}
}

// waitReadyz waits until p's /readyz answers want.
func waitReadyz(t *testing.T, p *proc, want int, timeout time.Duration) {
	t.Helper()
	a := api{t: t, base: p.admin, client: p.httpClient()}
	eventually(t, timeout, fmt.Sprintf("%s /readyz %d", p.name, want), func() error {
		if status, b := a.do("GET", "/readyz", nil); status != want {
			return fmt.Errorf("%d %s", status, b)
		}
		return nil
	})
}

// readBack checks that every node serving ns has text: through its admin API and in a
// fresh editor attached to it.
func (m *doorMatrix) readBack(t *testing.T, serving []doorNode, ns, text string) {
	t.Helper()
	for _, n := range serving {
		waitAdminBody(t, n, ns, text, 30*time.Second)
	}
	for _, n := range serving {
		name := m.editorName("reader-" + n.p.name)
		m.openEditor(t, name, n, ns)
		err := m.ag.call("waitText", map[string]any{"name": name, "text": text, "timeoutMs": 30000}, nil)
		m.agentCall(t, "close", map[string]any{"name": name}, nil)
		if err != nil {
			t.Errorf("a fresh editor on %s: %v", n.p.name, err)
		}
	}
}

// TestE2E_WriteDoors runs the write-door matrix (see writeDoors and nodeKinds). Then, on a
// cluster node that lost its quorum, each door refuses its write to the writer, and the
// writer's retry reaches every node once the quorum is back. Then the single hub and
// cluster node 1 are killed (SIGKILL) and restarted: each still has every write of its
// namespaces. No node logged a store operation it does not support.
func TestE2E_WriteDoors(t *testing.T) {
	t.Parallel()
	ag := startAgent(t)
	hp := startHocusAgent(t, "v4")
	m := newDoorMatrix(t, ag)
	m.hp = hp
	texts := map[string]string{}
	for _, k := range nodeKinds {
		for _, d := range writeDoors {
			cell := cellName(d, k)
			ns := m.namespaces[cell]
			text := fmt.Sprintf("written through %s on the %s", d.name, k.name)
			texts[cell] = text
			t.Run(cell, func(t *testing.T) {
				d.write(t, m, k.writer(m), ns, text)
				m.readBack(t, k.serving(m), ns, text)
			})
		}
	}

	// Without quorum (nodes 2 and 3 stopped) node 1 cannot store a write: each door refuses
	// it to its writer and node 1 does not apply it; once the nodes are back, the writer's
	// retry reaches every node.
	refusedTexts := map[string]string{}
	for _, d := range writeDoors {
		refusedTexts[d.name] = fmt.Sprintf("written through %s on a cluster node without quorum", d.name)
	}
	t.Run("refused-without-quorum", func(t *testing.T) {
		n1 := m.nodes[0]
		writers := map[string]refusedWriter{}
		for _, d := range writeDoors {
			writers[d.name] = d.attach(t, m, n1, m.refusals[d.name])
		}
		signal := func(sig syscall.Signal) {
			for _, n := range m.nodes[1:] {
				if err := syscall.Kill(-n.p.cmd.Process.Pid, sig); err != nil {
					t.Error(err)
				}
			}
		}
		signal(syscall.SIGSTOP)
		stopped := true
		defer func() {
			if stopped {
				signal(syscall.SIGCONT)
			}
		}()
		waitReadyz(t, n1.p, 503, 60*time.Second)
		texts := refusedTexts
		for _, d := range writeDoors {
			writers[d.name].write(t, texts[d.name])
			// Node 1 does not serve what it refused (a read of a namespace it no longer has
			// loaded is refused too, without quorum).
			if got := adminBody(t, n1, m.refusals[d.name]); strings.Contains(got, texts[d.name]) {
				t.Fatalf("%s: node 1 applied a write it refused: %q", d.name, got)
			}
		}
		signal(syscall.SIGCONT)
		stopped = false
		for _, n := range m.nodes {
			waitReadyz(t, n.p, 200, 60*time.Second)
		}
		serving := append(append([]doorNode{}, m.nodes...), m.clusterPeer)
		for _, d := range writeDoors {
			writers[d.name].retry(t)
			m.readBack(t, serving, m.refusals[d.name], texts[d.name])
		}
	})

	// Every write is durable where it was made: the single hub and cluster node 1 are
	// killed (SIGKILL) and restarted, and still read it — the retried ones too.
	m.hub.p.kill()
	m.hc.hubs[0].kill()
	if err := m.hub.p.start(); err != nil {
		t.Fatalf("hub: %v", err)
	}
	m.hc.startHub(0)
	m.hc.waitReady(0, 60*time.Second)
	for _, k := range nodeKinds {
		restarted := m.hub
		if k.hubSide == "cluster" {
			restarted = m.nodes[0]
		}
		for _, d := range writeDoors {
			cell := cellName(d, k)
			if got := adminBodyEventually(t, restarted, m.namespaces[cell], texts[cell]); got != texts[cell] {
				t.Errorf("%s: after a restart %s reads %q, want %q", cell, restarted.p.name, got, texts[cell])
			}
		}
	}
	for _, d := range writeDoors {
		if got := adminBodyEventually(t, m.nodes[0], m.refusals[d.name], refusedTexts[d.name]); got != refusedTexts[d.name] {
			t.Errorf("%s, retried after a refusal: after a restart %s reads %q, want %q", d.name, m.nodes[0].p.name, got, refusedTexts[d.name])
		}
	}

	procs := []*proc{m.hub.p, m.hubPeer.p, m.clusterPeer.p}
	for _, n := range m.nodes {
		procs = append(procs, n.p)
	}
	for _, p := range procs {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "operation not supported") {
				t.Errorf("%s logged a store operation it does not support: %s", p.name, line)
				break
			}
		}
	}
}

// adminBodyEventually reads n's Y.Text("body") until it is want or 30 s have passed, and
// returns the last reading.
func adminBodyEventually(t *testing.T, n doorNode, ns, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := adminBody(t, n, ns)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}
