package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// testCluster is a hub cluster in one test process: n nodes, each an embedded NATS server
// (routes on loopback, JetStream under a temporary directory) with a registry over it.
// The tests run in parallel (most of their time is spent waiting: for elections, quorum
// probes, deadlines), at most -parallel (GOMAXPROCS) clusters at once.
type testCluster struct {
	t     *testing.T
	dir   string
	addrs []string // route listeners
	nodes []*testNode
	tune  func(*Config)
}

type testNode struct {
	name  string
	node  *Node
	store *Store
	reg   *registry.Registry
	gate  *applyGate // holds back the records the node's registry applies, when closed
}

// applyGate holds back every record the log hands to a node's registry while it is
// closed: the node lags behind the log as a slow node would, for as long as a test needs.
type applyGate struct {
	mu   sync.Mutex    // guards open
	open chan struct{} // closed while the gate is open
}

func newApplyGate() *applyGate {
	g := &applyGate{open: make(chan struct{})}
	close(g.open)
	return g
}

// hold closes the gate; release opens it again.
func (g *applyGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *applyGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *applyGate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// gatedShared is a node's registry.SharedLog with its records passing through a gate.
type gatedShared struct {
	*Node
	gate *applyGate
}

func (s gatedShared) OpenLog(ctx context.Context, owner, ns string, host registry.LogHost) (registry.NamespaceLog, error) {
	return s.Node.OpenLog(ctx, owner, ns, gatedHost{host, s.gate})
}

type gatedHost struct {
	registry.LogHost
	gate *applyGate
}

func (h gatedHost) Apply(recs ...registry.Record) bool {
	h.gate.wait()
	return h.LogHost.Apply(recs...)
}

// freePorts returns n loopback addresses whose ports were free a moment ago. They are
// picked below the kernel's ephemeral range (Linux: 32768–60999), where the ports of every
// listener on port 0 come from (each embedded server opens its client port that way), so
// that nothing else takes them before a node (re)starts on them.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for attempt := 0; len(out) < n; attempt++ {
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(22000))
		if attempt >= 100 {
			addr = "127.0.0.1:0"
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if attempt >= 100 {
				t.Fatal(err)
			}
			continue
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// testConfig is the configuration of node i, quick to notice failures.
func (tc *testCluster) config(i int) Config {
	var routes []string
	for _, a := range tc.addrs {
		routes = append(routes, "nats://"+a)
	}
	level := slog.LevelWarn
	if os.Getenv("NOMICORE_CLUSTER_DEBUG") != "" {
		level = slog.LevelDebug
	}
	cfg := Config{
		NodeName:      "n" + strconv.Itoa(i+1),
		DataDir:       filepath.Join(tc.dir, "n"+strconv.Itoa(i+1)),
		ClusterName:   "test",
		ClusterListen: tc.addrs[i],
		Routes:        routes,
		OpTimeout:     3 * time.Second,
		// A write rides through the election that follows a stopped node (4 to 9 seconds
		// without a stream leader, longer on a loaded machine), as with the defaults.
		PublishTimeout: 12 * time.Second,
		ProbeInterval:  200 * time.Millisecond,
		ProbeTimeout:   time.Second,
		Logger:         slog.New(slog.NewTextHandler(testWriter{tc.t}, &slog.HandlerOptions{Level: level})),
	}
	if tc.tune != nil {
		tc.tune(&cfg)
	}
	return cfg
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", b)
	return len(b), nil
}

// newTestCluster starts n nodes and waits until each has quorum.
func newTestCluster(t *testing.T, n int, tune func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, dir: t.TempDir(), addrs: freePorts(t, n), nodes: make([]*testNode, n), tune: tune}
	t.Cleanup(tc.close)
	for i := range n {
		tc.start(i)
	}
	tc.waitHealthy(30*time.Second, tc.nodes...)
	return tc
}

// start starts (or restarts, on the same address and directory) node i.
func (tc *testCluster) start(i int) *testNode {
	tc.t.Helper()
	cfg := tc.config(i)
	node, err := Start(cfg)
	if err != nil {
		tc.t.Fatalf("starting %s: %v", cfg.NodeName, err)
	}
	store := node.Store()
	gate := newApplyGate()
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: store, Shared: gatedShared{node, gate}, Logger: cfg.Logger,
		SharedApplyTimeout: 15 * time.Second, SharedLoadTimeout: 20 * time.Second, SharedStaleClaim: 3 * time.Second})
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.nodes[i] = &testNode{name: cfg.NodeName, node: node, store: store, reg: reg, gate: gate}
	return tc.nodes[i]
}

// stop closes node i (registry, then node and its server).
func (tc *testCluster) stop(i int) {
	tn := tc.nodes[i]
	if tn == nil {
		return
	}
	tc.nodes[i] = nil
	tn.gate.release() // a record held back would keep the log's follower from stopping
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tn.reg.Close(ctx); err != nil {
		tc.t.Errorf("closing the registry of %s: %v", tn.name, err)
	}
	tn.node.Close(ctx)
}

func (tc *testCluster) close() {
	for i := range tc.nodes {
		tc.stop(i)
	}
}

func (tc *testCluster) waitHealthy(d time.Duration, nodes ...*testNode) {
	tc.t.Helper()
	eventually(tc.t, d, "quorum on every node", func() error {
		for _, tn := range nodes {
			if !tn.node.Healthy() {
				return fmt.Errorf("%s has no quorum (%v)", tn.name, tn.node.Ready())
			}
		}
		return nil
	})
}

// eventually polls cond until it returns nil, failing after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ctxT is the context of a test's calls: it ends after d, or with the test.
var ctxT = testkit.Context

// mapUpdate returns an update that sets key=value in the root map "notes", made by a
// fresh client on the given state.
func mapUpdate(t *testing.T, state []byte, kv ...any) []byte {
	t.Helper()
	doc := yjs.NewDoc()
	if len(state) > 0 {
		if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
			t.Fatal(err)
		}
	}
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	defer unsub()
	m := doc.GetMap("notes")
	doc.Transact(nil, func(*yjs.Transaction) {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := m.Set(kv[i].(string), kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
	})
	return update
}

// notes reads the "notes" map through a lease.
func notes(t *testing.T, l *registry.Lease) map[string]any {
	t.Helper()
	j, err := l.JSON(ctxT(t, 10*time.Second), registry.Root{Name: "notes", Kind: yjs.KindMap})
	if err != nil {
		t.Fatalf("reading the document: %v", err)
	}
	m, _ := j["notes"].(map[string]any)
	return m
}

// open opens a lease on a node, released at the end of the test.
func (tn *testNode) open(t *testing.T, ns string) *registry.Lease {
	t.Helper()
	l, err := tn.reg.Open(ctxT(t, 20*time.Second), "default", ns)
	if err != nil {
		t.Fatalf("%s: open %s: %v", tn.name, ns, err)
	}
	t.Cleanup(l.Release)
	return l
}

// logOf returns the log stream holding namespace ns's log and its subject there, as node
// tn finds them from the namespace's entry.
func (tn *testNode) logOf(t *testing.T, owner, ns string) (jetstream.Stream, string) {
	t.Helper()
	k, err := tn.node.logStreamOf(ctxT(t, 10*time.Second), ns)
	if err != nil {
		t.Fatalf("%s: the log stream of %s: %v", tn.name, ns, err)
	}
	s, err := tn.node.logStream(ctxT(t, 10*time.Second), k)
	if err != nil {
		t.Fatalf("%s: log stream %d: %v", tn.name, k, err)
	}
	return s, logSubjectIn(k, owner, ns)
}

// create creates a namespace through a node.
func (tn *testNode) create(t *testing.T) string {
	t.Helper()
	c, err := tn.reg.Create(ctxT(t, 10*time.Second), "default")
	if err != nil {
		t.Fatalf("%s: create: %v", tn.name, err)
	}
	return c.NamespaceID
}
