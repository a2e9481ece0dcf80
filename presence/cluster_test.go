package presence

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/yws"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRoom is a yws.RemoteStates that records what other nodes announce.
type fakeRoom struct {
	mu      sync.Mutex // guards the fields below
	local   []yws.AwarenessEntry
	states  map[uint64]string     // client id → state, from other nodes
	origins map[uint64]yws.Origin // client id → who announced it
	removed []yws.Origin
	bound   int
}

func newFakeRoom(bound int, local ...yws.AwarenessEntry) *fakeRoom {
	return &fakeRoom{local: local, states: map[uint64]string{}, origins: map[uint64]yws.Origin{}, bound: bound}
}

func (r *fakeRoom) Apply(origin yws.Origin, entries []yws.AwarenessEntry) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	dropped := 0
	for _, e := range entries {
		if _, ok := r.states[e.ClientID]; !ok && len(r.states) >= r.bound {
			dropped++
			continue
		}
		r.states[e.ClientID], r.origins[e.ClientID] = string(e.State), origin
	}
	return dropped
}

func (r *fakeRoom) RemoveOrigin(origin yws.Origin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, origin)
	for id, o := range r.origins {
		if o == origin {
			delete(r.states, id)
			delete(r.origins, id)
		}
	}
}

func (r *fakeRoom) Local() []yws.AwarenessEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.local)
}

func (r *fakeRoom) state(id uint64) (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states[id], r.origins[id].Node
}

func natsServer(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	testkit.Must(t, err)
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	return srv.ClientURL()
}

type testNode struct {
	nc  *nats.Conn
	rel *Cluster
	reg *prometheus.Registry
}

func startNode(t *testing.T, url, name string, maxStates int) *testNode {
	t.Helper()
	nc, err := nats.Connect(url)
	testkit.Must(t, err)
	t.Cleanup(nc.Close)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	testkit.Must(t, err)
	rel, err := NewCluster(nc, ClusterOptions{Node: name, MaxStates: maxStates, MaxStateBytes: 64, Metrics: m})
	testkit.Must(t, err)
	return &testNode{nc: nc, rel: rel, reg: reg}
}

func (n *testNode) metric(t *testing.T, name string, label string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	testkit.Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

const testNS = "ns-0123456789abcdef0123456789abcdef"

// Two nodes relay a namespace's presence over NATS: a node that joins late asks and hears
// the states the other holds; changes go across, each client's latest; another namespace's
// subject hears nothing; a state over the size bound and a message that does not decode are
// dropped and counted; a node that leaves takes its states with it.
func TestCluster_RelayBetweenNodes(t *testing.T) {
	url := natsServer(t)
	n1, n2 := startNode(t, url, "n1", 3), startNode(t, url, "n2", 3)
	r1 := newFakeRoom(3, yws.AwarenessEntry{ClientID: 10, Clock: 2, State: []byte(`{"user":{"name":"ada"}}`)})
	l1 := n1.rel.Join("default", testNS, r1)
	r2 := newFakeRoom(3)
	l2 := n2.rel.Join("default", testNS, r2)
	testkit.Eventually(t, 10*time.Second, "n2 hears n1's states in answer to its query", func() bool {
		s, o := r2.state(10)
		return s == `{"user":{"name":"ada"}}` && o == "n1"
	})
	other := newFakeRoom(3)
	l3 := n2.rel.Join("default", "ns-ffffffffffffffffffffffffffffffff", other)
	defer l3.Close()

	for i := range 20 {
		l2.Publish([]yws.AwarenessEntry{{ClientID: 20, Clock: uint64(i + 1), State: []byte(`{"cursor":` + string(rune('0'+i%10)) + `}`)}})
	}
	l2.Publish([]yws.AwarenessEntry{{ClientID: 20, Clock: 21, State: []byte(`{"cursor":"last"}`)}})
	testkit.Eventually(t, 10*time.Second, "n1 hears n2's latest state", func() bool {
		s, o := r1.state(20)
		return s == `{"cursor":"last"}` && o == "n2"
	})
	if s, _ := other.state(20); s != "" {
		t.Fatal("another namespace heard the change")
	}
	if n2.metric(t, "nomicore_presence_dropped_total", DropSuperseded) == 0 {
		t.Fatal("20 changes of one client in one interval: none counted as superseded")
	}

	// A state over the bound, and bytes that do not decode.
	big := make([]byte, 100)
	for i := range big {
		big[i] = 'x'
	}
	l2.Publish([]yws.AwarenessEntry{{ClientID: 21, Clock: 1, State: []byte(`"` + string(big) + `"`)}})
	m := nats.NewMsg(Subject("default", testNS))
	m.Header.Set(headerNode, "n9")
	m.Header.Set(headerKind, kindUpdate)
	m.Data = []byte{5, 1}
	testkit.Must(t, n2.nc.PublishMsg(m))
	testkit.Eventually(t, 10*time.Second, "the drops counted", func() bool {
		return n1.metric(t, "nomicore_presence_dropped_total", DropTooLarge) == 1 &&
			n1.metric(t, "nomicore_presence_dropped_total", DropMalformed) == 1
	})
	if s, _ := r1.state(21); s != "" {
		t.Fatal("a state over the size bound was taken")
	}

	// n2's namespace opens again while the first link is still closing: the first link's
	// leave removes what it announced, not what the second one announces.
	l2b := n2.rel.Join("default", testNS, newFakeRoom(3))
	l2b.Publish([]yws.AwarenessEntry{{ClientID: 30, Clock: 1, State: []byte(`{"user":{"name":"bea"}}`)}})
	testkit.Eventually(t, 10*time.Second, "n1 hears the second link", func() bool {
		s, _ := r1.state(30)
		return s != ""
	})
	l2.Close()
	testkit.Eventually(t, 10*time.Second, "the first link's states removed on n1", func() bool {
		s, _ := r1.state(20)
		return s == ""
	})
	if s, _ := r1.state(30); s == "" {
		t.Fatal("the first link's leave removed the second link's state")
	}
	l2b.Close()
	testkit.Eventually(t, 10*time.Second, "n2's states removed on n1", func() bool {
		s, _ := r1.state(30)
		return s == ""
	})
	if s, _ := r1.state(10); s != "" {
		t.Fatal("n1 took its own state from the wire")
	}
	l1.Close()
	if got := n1.metric(t, "nomicore_presence_relayed_total", "in"); got < 1 {
		t.Fatalf("n1 received %v entries", got)
	}
}
