package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// testCluster is a hub cluster in one test process: n nodes, each an embedded NATS server
// (routes on loopback, JetStream under a temporary directory) with a registry over it.
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
}

// freePorts returns n loopback addresses whose ports were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
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
		NodeName:       "n" + strconv.Itoa(i+1),
		DataDir:        filepath.Join(tc.dir, "n"+strconv.Itoa(i+1)),
		ClusterName:    "test",
		ClusterListen:  tc.addrs[i],
		Routes:         routes,
		OpTimeout:      3 * time.Second,
		PublishTimeout: 3 * time.Second,
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
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Store: store, Shared: node, Logger: cfg.Logger,
		SharedApplyTimeout: 5 * time.Second, SharedLoadTimeout: 10 * time.Second, SharedStaleClaim: 3 * time.Second})
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.nodes[i] = &testNode{name: cfg.NodeName, node: node, store: store, reg: reg}
	return tc.nodes[i]
}

// stop closes node i (registry, then node and its server).
func (tc *testCluster) stop(i int) {
	tn := tc.nodes[i]
	if tn == nil {
		return
	}
	tc.nodes[i] = nil
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

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

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

// create creates a namespace through a node.
func (tn *testNode) create(t *testing.T) string {
	t.Helper()
	c, err := tn.reg.Create(ctxT(t, 10*time.Second), "default")
	if err != nil {
		t.Fatalf("%s: create: %v", tn.name, err)
	}
	return c.NamespaceID
}
