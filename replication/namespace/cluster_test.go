package namespace_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
	"github.com/nomicore/nomicore/yjs"
)

// A cluster of one hub and several peers over real WebSockets on loopback, each instance
// with its own bbolt store in a temporary directory, the real clock, and one recorder for
// every event of every instance.

// Sentinels: none of these may appear in any event (docs/protocol.md#safe-fields).
const (
	hubOwner  = "tenant-hub-owner"
	peerOwner = "tenant-peer-owner"
	docText   = "DOCTEXT"
)

// clusterRoots are the roots the cluster's documents hold.
var clusterRoots = []registry.Root{
	{Name: registry.MetaRoot, Kind: yjs.KindMap},
	{Name: "app", Kind: yjs.KindMap},
	{Name: "list", Kind: yjs.KindArray},
}

const rawPeerID = "peer-raw"

func clusterConfig(t testing.TB) protocol.Config {
	c := protocol.DefaultConfig()
	c.Generation = protocol.GenerationV1
	c.BaseBackoff, c.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	must(t, c.Validate())
	return c
}

type cluster struct {
	t     testing.TB
	cfg   protocol.Config
	rec   *observertest.Recorder
	table *auth.PeerTable
	srv   *httptest.Server
	url   string

	hubDir string
	hub    atomic.Pointer[hubNode]
	peers  []*peerNode
}

type hubNode struct {
	store *persistence.BoltStore
	reg   *registry.Registry
	nsl   *namespace.Hub
	hub   *ws.Hub
}

type peerNode struct {
	c     *cluster
	id    string
	token string
	dir   string
	store *persistence.BoltStore
	reg   *registry.Registry
	tc    *namespace.TargetController
	peer  *ws.Peer
	net   *netCtl
}

func storeOptions() persistence.Options {
	return persistence.Options{Compactor: registry.Compactor()}
}

func newCluster(t testing.TB, cfg protocol.Config, peers int) *cluster {
	t.Helper()
	c := &cluster{t: t, cfg: cfg, rec: &observertest.Recorder{}, hubDir: filepath.Join(t.TempDir(), "hub")}
	var entries []auth.PeerEntry
	for i := range peers + 1 {
		id := fmt.Sprintf("peer-%d", i)
		if i == peers {
			id = rawPeerID // a hand-played peer (dialWire)
		}
		entries = append(entries, auth.PeerEntry{PeerInstanceID: id, TokenSHA256: auth.HashToken("token-" + id), Owner: hubOwner,
			Namespaces: []string{"*"}, Read: true, Submit: true})
	}
	var err error
	c.table, err = auth.NewPeerTable(entries)
	must(t, err)
	c.startHub()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/replication", func(w http.ResponseWriter, r *http.Request) {
		if h := c.hub.Load(); h != nil {
			h.hub.ServeHTTP(w, r)
			return
		}
		http.Error(w, "restarting", http.StatusServiceUnavailable)
	})
	c.srv = httptest.NewServer(mux)
	c.url = "ws" + strings.TrimPrefix(c.srv.URL, "http") + "/v1/replication"
	for i := range peers {
		c.peers = append(c.peers, c.newPeer(fmt.Sprintf("peer-%d", i)))
	}
	t.Cleanup(func() {
		for _, p := range c.peers {
			p.stop()
		}
		c.stopHub()
		c.srv.Close()
		c.rec.AssertValid(t)
		sentinels := []string{hubOwner, peerOwner, docText, "token-" + rawPeerID}
		for _, p := range c.peers {
			sentinels = append(sentinels, p.token)
		}
		c.rec.AssertSafe(t, sentinels...)
	})
	return c
}

func (c *cluster) startHub() {
	c.t.Helper()
	st, err := persistence.OpenDataDir(c.hubDir, storeOptions())
	must(c.t, err)
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st, StageClock: clock.Real()})
	must(c.t, err)
	nsl, err := namespace.NewHub(namespace.HubOptions{Registry: reg})
	must(c.t, err)
	hub, err := ws.NewHub(ws.HubOptions{Config: c.cfg, InstanceID: hubID, Auth: c.table, Namespaces: nsl.NewHandler, Observer: c.rec})
	must(c.t, err)
	c.hub.Store(&hubNode{store: st, reg: reg, nsl: nsl, hub: hub})
}

// stopHub shuts the hub down in the docs/protocol.md#restart-and-shutdown order: replication,
// registry, store.
func (c *cluster) stopHub() {
	c.t.Helper()
	h := c.hub.Swap(nil)
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(c.t, h.hub.Shutdown(ctx))
	must(c.t, h.reg.Close(ctx))
	must(c.t, h.store.Close(ctx))
}

func (c *cluster) hubReg() *registry.Registry { return c.hub.Load().reg }

func (c *cluster) newPeer(id string) *peerNode {
	c.t.Helper()
	p := &peerNode{c: c, id: id, token: "token-" + id, dir: filepath.Join(filepath.Dir(c.hubDir), id), net: newNetCtl()}
	p.start()
	return p
}

func (p *peerNode) start(targets ...namespace.Target) {
	t := p.c.t
	t.Helper()
	var err error
	p.store, err = persistence.OpenDataDir(p.dir, storeOptions())
	must(t, err)
	p.reg, err = registry.New(registry.Config{Role: registry.RolePeer, Catalog: p.store, Documents: p.store, StageClock: clock.Real()})
	must(t, err)
	p.tc, err = namespace.NewTargetController(namespace.TargetControllerOptions{Registry: p.reg, Targets: targets})
	must(t, err)
	p.peer, err = ws.NewPeer(ws.PeerOptions{Config: p.c.cfg, InstanceID: p.id, HubInstanceID: hubID, URL: p.c.url,
		Token: func() (string, error) { return p.token, nil }, Namespaces: p.tc.NewHandler, Observer: p.c.rec,
		Dialer: ws.WebSocketDialer{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: p.net.dial}}}})
	must(t, err)
	p.peer.Start()
}

// stop shuts the peer down in the docs/protocol.md#restart-and-shutdown order: connection,
// namespace layer, registry, store. It returns the targets, for a restart.
func (p *peerNode) stop() []namespace.Target {
	if p.peer == nil {
		return nil
	}
	var targets []namespace.Target
	for _, st := range p.tc.Targets() {
		targets = append(targets, st.Target)
	}
	p.peer.Close()
	p.tc.Close()
	p.net.resume()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(p.c.t, p.reg.Close(ctx))
	must(p.c.t, p.store.Close(ctx))
	p.peer = nil
	return targets
}

func (p *peerNode) target(ns protocol.NamespaceID) {
	must(p.c.t, p.tc.AddTarget(namespace.Target{NamespaceID: ns.String(), Owner: peerOwner}))
}

func (p *peerNode) state(ns protocol.NamespaceID) observer.ChannelState {
	st, _ := p.tc.Target(ns.String())
	return st.State
}

// create makes n namespaces on the hub and makes every peer target them.
func (c *cluster) create(n int) []protocol.NamespaceID {
	c.t.Helper()
	var out []protocol.NamespaceID
	for range n {
		cr, err := c.hubReg().Create(ctxT(c.t), hubOwner)
		must(c.t, err)
		ns := protocol.MustNamespaceID(cr.NamespaceID)
		out = append(out, ns)
		for _, p := range c.peers {
			p.target(ns)
		}
	}
	return out
}

// waitStates waits until every peer's target of each namespace is in state want.
func (c *cluster) waitStates(nss []protocol.NamespaceID, want observer.ChannelState, peers ...*peerNode) {
	c.t.Helper()
	if peers == nil {
		peers = c.peers
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var bad []string
		for _, p := range peers {
			for _, ns := range nss {
				if s := p.state(ns); s != want {
					bad = append(bad, fmt.Sprintf("%s/%s=%s", p.id, ns.String()[len(ns.String())-4:], s))
				}
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not %s: %v", want, bad)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replica is one instance's view of a namespace: its JSON and decoded state vector.
type replica struct {
	json map[string]any
	sv   yjs.StateVector
}

func readReplica(t testing.TB, reg *registry.Registry, own string, ns protocol.NamespaceID) (replica, error) {
	ctx := ctxT(t)
	l, err := reg.Open(ctx, own, ns.String())
	if err != nil {
		return replica{}, err
	}
	defer l.Release()
	j, err := l.JSON(ctx, clusterRoots...)
	if err != nil {
		return replica{}, err
	}
	b, err := l.StateVector(ctx)
	if err != nil {
		return replica{}, err
	}
	sv, err := yjs.DecodeStateVector(b)
	return replica{j, sv}, err
}

// converged waits until the hub and the given peers hold identical documents (JSON and state
// vectors) for every namespace.
func (c *cluster) converged(nss []protocol.NamespaceID, peers ...*peerNode) {
	c.t.Helper()
	if peers == nil {
		peers = c.peers
	}
	var why string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		why = c.divergence(nss, peers)
		if why == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no convergence: %s\n%s", why, c.diagnose())
}

// diagnose summarizes what the cluster did: the events that are not per-frame, counted,
// and every target's state.
func (c *cluster) diagnose() string {
	var b strings.Builder
	counts := map[string]int{}
	for _, e := range c.rec.Events() {
		if e.Type().PerFrame() {
			continue
		}
		key := string(e.Side) + " " + string(e.Type())
		switch p := e.Payload.(type) {
		case observer.NamespaceError:
			key += " " + string(p.Code) + " " + string(p.Direction)
		case observer.NamespaceFailed:
			key += " " + string(p.Cause)
		case observer.ResyncRequired:
			key += " " + string(p.Cause)
		case observer.ChannelStateChanged:
			key += " " + string(p.From) + "→" + string(p.To)
		case observer.ConnectionBackoffScheduled:
			key += " " + string(p.Reason)
		case observer.ConnectionFailed:
			key += " " + string(p.Code)
		}
		counts[key]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %4d %s\n", counts[k], k)
	}
	for _, p := range c.peers {
		if p.tc == nil {
			continue
		}
		for _, st := range p.tc.Targets() {
			fmt.Fprintf(&b, "  %s %s %s\n", p.id, st.NamespaceID, st.State)
		}
	}
	return b.String()
}

func (c *cluster) divergence(nss []protocol.NamespaceID, peers []*peerNode) string {
	for _, ns := range nss {
		want, err := readReplica(c.t, c.hubReg(), hubOwner, ns)
		if err != nil {
			return "hub: " + err.Error()
		}
		for _, p := range peers {
			got, err := readReplica(c.t, p.reg, peerOwner, ns)
			if err != nil {
				return p.id + ": " + err.Error()
			}
			if !reflect.DeepEqual(got.sv, want.sv) {
				return fmt.Sprintf("%s %s: state vector %v, hub %v", p.id, ns, got.sv, want.sv)
			}
			if !reflect.DeepEqual(got.json, want.json) {
				return fmt.Sprintf("%s %s: document differs from the hub's", p.id, ns)
			}
		}
	}
	return ""
}

// ---- writers ----------------------------------------------------------------------------------

// writer makes application updates on one instance's replica of a namespace, as the admin
// API's local write would: each from its own Yjs client, through the registry's sequencer.
type writer struct {
	t        testing.TB
	reg      *registry.Registry
	own      string
	ns       protocol.NamespaceID
	doc      *yjs.Doc
	last     []byte
	rng      *rand.Rand
	name     string
	writes   int
	inserts  int
	pad      string       // appended to every value (large updates)
	progress atomic.Int64 // writes applied, for other goroutines
}

var clientIDs atomic.Uint32

func newWriter(t testing.TB, reg *registry.Registry, own string, ns protocol.NamespaceID, name string, seed uint64) *writer {
	w := &writer{t: t, reg: reg, own: own, ns: ns, name: name, rng: rand.New(rand.NewPCG(seed, 7)),
		doc: yjs.NewDoc(yjs.WithClientID(1000 + clientIDs.Add(1)))}
	w.doc.OnUpdate(func(u []byte, _ any) { w.last = u })
	return w
}

// write makes n random writes: map keys shared by every writer (concurrent sets of one key)
// and array inserts.
func (w *writer) write(n int) error {
	l, err := w.reg.Open(ctxT(w.t), w.own, w.ns.String())
	if err != nil {
		return err
	}
	defer l.Release()
	for range n {
		w.writes++
		v := fmt.Sprintf("%s-%s-%d%s", docText, w.name, w.writes, w.pad)
		w.last = nil
		if w.rng.IntN(3) == 0 {
			arr := w.doc.GetArray("list")
			if err := arr.Insert(w.rng.IntN(arr.Len()+1), v); err != nil {
				return err
			}
			w.inserts++
		} else if err := w.doc.GetMap("app").Set(fmt.Sprintf("k%d", w.rng.IntN(8)), v); err != nil {
			return err
		}
		if _, err := l.WriteLocal(ctxT(w.t), w.last); err != nil {
			return fmt.Errorf("%s write %d: %w", w.name, w.writes, err)
		}
		w.progress.Add(1)
	}
	return nil
}

// writeAll runs one writer per (replica, namespace) concurrently, n writes each.
func writeAll(t testing.TB, ws []*writer, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(ws))
	for _, w := range ws {
		wg.Go(func() {
			if err := w.write(n); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// waitProgress waits until the writers applied n writes in all.
func waitProgress(t testing.TB, ws []*writer, n int64) {
	t.Helper()
	testkit.Eventually(t, wait, "writes applied", func() bool {
		var sum int64
		for _, w := range ws {
			sum += w.progress.Load()
		}
		return sum >= n
	})
}

// ---- network control ------------------------------------------------------------------------

// netCtl wraps a peer's TCP connections: it can drop them abruptly (a lost socket) or stop
// reading from them (a peer that reads nothing, so the hub's writes to it back up).
type netCtl struct {
	mu      sync.Mutex // guards conns, paused and resumed
	conns   []*ctlConn
	paused  bool
	resumed chan struct{}
}

func newNetCtl() *netCtl { return &netCtl{resumed: make(chan struct{})} }

func (n *netCtl) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cc := &ctlConn{Conn: c, n: n, closed: make(chan struct{})}
	n.mu.Lock()
	n.conns = append(n.conns, cc)
	n.mu.Unlock()
	return cc, nil
}

// drop closes every connection at once, without a close handshake.
func (n *netCtl) drop() {
	n.mu.Lock()
	cs := n.conns
	n.conns = nil
	n.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

func (n *netCtl) pause() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.paused {
		n.paused = true
		n.resumed = make(chan struct{})
	}
}

func (n *netCtl) resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused {
		n.paused = false
		close(n.resumed)
	}
}

func (n *netCtl) gate() (bool, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused, n.resumed
}

type ctlConn struct {
	net.Conn
	n      *netCtl
	once   sync.Once
	closed chan struct{}
}

func (c *ctlConn) Read(b []byte) (int, error) {
	for {
		paused, resumed := c.n.gate()
		if !paused {
			break
		}
		select {
		case <-resumed:
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	return c.Conn.Read(b)
}

func (c *ctlConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// ---- a hand-played peer over a real WebSocket ---------------------------------------------------

// wsMessenger carries messages over a real coder/websocket client connection.
type wsMessenger struct{ c *websocket.Conn }

func (m wsMessenger) Send(b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return m.c.Write(ctx, websocket.MessageBinary, b)
}

func (m wsMessenger) Recv(ctx context.Context) ([]byte, error) {
	_, b, err := m.c.Read(ctx)
	return b, err
}

// dialWire connects a hand-played peer with the token of peer id and completes the
// handshake.
func (c *cluster) dialWire(id string) *wire {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer token-" + id}}})
	must(c.t, err)
	conn.SetReadLimit(int64(c.cfg.MaxFrameBytes))
	c.t.Cleanup(func() { _ = conn.CloseNow() })
	w := newWire(c.t, wsMessenger{conn}, c.cfg)
	h := wstest.Hello(peerID, hubID)
	h.PeerInstanceID = id
	h.OptionalCapabilities = 0
	w.send(h)
	expect[*protocol.HelloAck](w)
	return w
}
