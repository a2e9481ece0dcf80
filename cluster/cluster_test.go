package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

var (
	errUnavailable = persistence.ErrUnavailable
	errReadServed  = errors.New("the read was served")
)

func orServed(err error) error {
	if err == nil {
		return errReadServed
	}
	return err
}

// TestCluster_WriteOnOneNodeVisibleOnAll: a namespace created through one node opens on
// every node; a local write acknowledged on one node is in the log (at the position it was
// acknowledged with, on a quorum) and applied there before the acknowledgement, and every
// node applies it.
func TestCluster_WriteOnOneNodeVisibleOnAll(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	leases := make([]*registry.Lease, 3)
	for i, tn := range tc.nodes {
		leases[i] = tn.open(t, ns)
		if got := leases[i].Identity().Epoch; got != 1 {
			t.Fatalf("%s: epoch %d, want 1", tn.name, got)
		}
	}
	if leases[0].Identity() != leases[2].Identity() {
		t.Fatalf("identities differ: %v vs %v", leases[0].Identity(), leases[2].Identity())
	}
	for i := range 3 {
		state, err := leases[i].EncodeState(ctxT(t, 5*time.Second), nil)
		if err != nil {
			t.Fatal(err)
		}
		update := mapUpdate(t, state, fmt.Sprintf("from-%d", i), float64(i))
		res, err := leases[i].WriteLocal(ctxT(t, 10*time.Second), update)
		if err != nil {
			t.Fatalf("write through %s: %v", tc.nodes[i].name, err)
		}
		if !res.Changed || res.Seq == 0 {
			t.Fatalf("write through %s: %+v", tc.nodes[i].name, res)
		}
		// Applied on the writing node before it was acknowledged ...
		if got := notes(t, leases[i])[fmt.Sprintf("from-%d", i)]; got != float64(i) {
			t.Fatalf("%s: own write not applied at acknowledgement: %v", tc.nodes[i].name, got)
		}
		if leases[i].Flushed() < res.Seq {
			t.Fatalf("%s: Flushed %d < acknowledged position %d", tc.nodes[i].name, leases[i].Flushed(), res.Seq)
		}
		// ... and stored in the log at the position it was acknowledged with, as another
		// node reads it. Under a loaded test run that read once answered "message not
		// found" just after the acknowledgement: it is asked again until it answers.
		var msg *jetstream.RawStreamMsg
		stream, subject := tc.nodes[(i+1)%3].logOf(t, "default", ns)
		eventually(t, 10*time.Second, fmt.Sprintf("log position %d read through %s", res.Seq, tc.nodes[(i+1)%3].name), func() (err error) {
			msg, err = stream.GetMsg(ctxT(t, 5*time.Second), res.Seq)
			return err
		})
		rec, _, err := decodeRecord(msg.Data)
		if err != nil || rec.Kind != registry.RecordUpdate || string(rec.Update) != string(update) {
			t.Fatalf("log position %d holds %+v (%v), not the write", res.Seq, rec, err)
		}
		if msg.Subject != subject {
			t.Fatalf("record on subject %q", msg.Subject)
		}
	}
	want := map[string]any{"from-0": 0.0, "from-1": 1.0, "from-2": 2.0}
	for i, l := range leases {
		eventually(t, 10*time.Second, tc.nodes[i].name+" converges", func() error {
			got := notes(t, l)
			for k, v := range want {
				if got[k] != v {
					return fmt.Errorf("notes %v", got)
				}
			}
			return nil
		})
	}
	// The entry is the same everywhere.
	for _, tn := range tc.nodes {
		e, err := tn.store.Entry(ctxT(t, 5*time.Second), ns)
		if err != nil || e.Owner != "default" {
			t.Fatalf("%s: entry %+v, %v", tn.name, e, err)
		}
		list, err := tn.store.Entries(ctxT(t, 5*time.Second), "")
		if err != nil || len(list) != 1 || list[0].NamespaceID != ns {
			t.Fatalf("%s: entries %+v, %v", tn.name, list, err)
		}
	}
	// Another owner does not find it (docs/protocol.md#authorization).
	if _, err := tc.nodes[1].reg.Open(ctxT(t, 5*time.Second), "other", ns); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("open as another owner: %v", err)
	}
	// Every node follows the namespace's log and, converged, is not behind it.
	for _, tn := range tc.nodes {
		eventually(t, 10*time.Second, tn.name+" follows the log", func() error {
			if st, ok := tn.node.LogStatus(ns); !ok || st.LagRecords != 0 {
				return fmt.Errorf("log status %+v, followed %v", st, ok)
			}
			return nil
		})
		if _, ok := tn.node.LogStatus("ns-00000000000000000000000000000000"); ok {
			t.Fatalf("%s follows a namespace nobody opened", tn.name)
		}
	}
}

// TestCluster_FanOutAcrossNodes: an update a peer session submits on one node is
// acknowledged to it once applied, is not echoed back to it, and reaches the sessions of
// every node — including another session on the same node.
func TestCluster_FanOutAcrossNodes(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	var sessions []*registry.Session
	var leases []*registry.Lease
	for i := range 3 {
		l := tc.nodes[i].open(t, ns)
		leases = append(leases, l)
		for range 2 {
			s, _, err := l.OpenSession(ctxT(t, 5*time.Second), registry.SessionOptions{Peer: "peer"})
			if err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, s)
		}
	}
	origin := sessions[0] // on node 1
	update := mapUpdate(t, nil, "k", "v")
	res, err := origin.Apply(ctxT(t, 10*time.Second), update)
	if err != nil || !res.Changed {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	for i, s := range sessions[1:] {
		eventually(t, 10*time.Second, fmt.Sprintf("session %d gets the update", i+1), func() error {
			p := s.Poll()
			if len(p.Updates) == 0 {
				return errors.New("nothing yet")
			}
			return nil
		})
	}
	time.Sleep(200 * time.Millisecond)
	if p := origin.Poll(); len(p.Updates) != 0 {
		t.Fatalf("the update was echoed to its origin session: %d updates", len(p.Updates))
	}

	// A schema replaced through one node is installed on every node, and reaches every
	// session (it is a meta change of the same epoch: nobody is fenced).
	if err := leases[2].ReplaceSchema(ctxT(t, 10*time.Second), "2026-01-01T00:00:00.000Z", map[string]any{"type": "object"}); err != nil {
		t.Fatal(err)
	}
	want, ok := leases[2].ActiveSchema()
	if !ok {
		t.Fatal("no active schema on the node that replaced it")
	}
	for i, l := range leases {
		eventually(t, 10*time.Second, fmt.Sprintf("%s installs the schema", tc.nodes[i].name), func() error {
			if got, ok := l.ActiveSchema(); !ok || got.Fingerprint != want.Fingerprint || got.UpdatedAt != want.UpdatedAt {
				return fmt.Errorf("active schema %+v, %v", got, ok)
			}
			return nil
		})
	}
	for i, s := range sessions {
		eventually(t, 10*time.Second, fmt.Sprintf("session %d gets the schema", i), func() error {
			p := s.Poll()
			if p.Fenced != nil {
				return fmt.Errorf("fenced by a schema change")
			}
			if len(p.Updates) == 0 {
				return errors.New("nothing yet")
			}
			return nil
		})
	}
}

// TestCluster_ConcurrentEpochBumps: two nodes bump the same epoch at once, both expecting
// the current one — exactly one wins (the other gets ErrConflict or ErrChanged and wrote
// nothing), however the two are timed; every node fences its sessions of the old epoch
// when it applies the change; a record admitted under the old epoch that comes after the
// change in the log is refused on every node alike.
func TestCluster_ConcurrentEpochBumps(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	leases := make([]*registry.Lease, 3)
	for i, tn := range tc.nodes {
		leases[i] = tn.open(t, ns)
	}
	old, _, err := leases[2].OpenSession(ctxT(t, 5*time.Second), registry.SessionOptions{Peer: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		results := make([]error, 2)
		epochs := make([]uint64, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := leases[i].BumpEpochFrom(ctxT(t, 15*time.Second), uint64(round+1))
				results[i], epochs[i] = err, id.Epoch
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range results {
			switch {
			case err == nil:
				won++
				if epochs[i] != uint64(round+2) {
					t.Fatalf("round %d: the winner reports epoch %d", round, epochs[i])
				}
			case errors.Is(err, registry.ErrConflict), errors.Is(err, registry.ErrChanged):
			default:
				t.Fatalf("round %d: bump on %s: %v", round, tc.nodes[i].name, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d bumps won (%v), want exactly 1", round, won, results)
		}
		for i, l := range leases {
			eventually(t, 10*time.Second, fmt.Sprintf("%s at epoch %d", tc.nodes[i].name, round+2), func() error {
				if got := l.Identity().Epoch; got != uint64(round+2) {
					return fmt.Errorf("epoch %d", got)
				}
				return nil
			})
		}
	}
	eventually(t, 5*time.Second, "the old session fenced", func() error {
		if p := old.Poll(); p.Fenced == nil {
			return errors.New("not fenced")
		}
		return nil
	})
	if _, err := old.Apply(ctxT(t, 5*time.Second), mapUpdate(t, nil, "late", 1.0)); !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("apply on a fenced session: %v", err)
	}

	// A record admitted under epoch 1, reaching the log after the changes, then a local
	// write: every node refuses the first and applies the second.
	nl, err := tc.nodes[1].node.OpenLog(ctxT(t, 5*time.Second), "default", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	published := make(chan error, 1)
	if err := nl.Publish(registry.Record{Kind: registry.RecordUpdate, Epoch: 1, Token: 1 << 60, Update: mapUpdate(t, nil, "stale", true)},
		func(err error) { published <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	state, _ := leases[0].EncodeState(ctxT(t, 5*time.Second), nil)
	if _, err := leases[0].WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, state, "after", true)); err != nil {
		t.Fatal(err)
	}
	for i, l := range leases {
		eventually(t, 10*time.Second, tc.nodes[i].name+" applies the write after the stale record", func() error {
			n := notes(t, l)
			if n["after"] != true {
				return fmt.Errorf("notes %v", n)
			}
			if _, ok := n["stale"]; ok {
				return fmt.Errorf("the stale record was applied: %v", n)
			}
			return nil
		})
	}
	// A node that loads the namespace now replays the same decisions.
	tc.stop(2)
	tn := tc.start(2)
	tc.waitHealthy(30*time.Second, tn)
	l := tn.open(t, ns)
	n := notes(t, l)
	if n["after"] != true || n["stale"] != nil || l.Identity().Epoch != 4 {
		t.Fatalf("after reload: epoch %d, notes %v", l.Identity().Epoch, n)
	}
}

// TestCluster_GuardedChangesCheckTheCluster: an epoch bump or schema replacement that
// names what it replaces is checked against the cluster's state, not the node's own view:
// on a node that has not applied a sibling's change yet, the admin API's bump expecting the
// epoch that change replaced is 409 EPOCH_MISMATCH (it would otherwise bump a second time,
// over an epoch its operator never saw), and so is a schema replacement (409
// SCHEMA_MISMATCH). Nothing of the refused changes is written anywhere.
func TestCluster_GuardedChangesCheckTheCluster(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	n1, n2 := tc.nodes[0], tc.nodes[1]
	ns := n1.create(t)
	l1, l2 := n1.open(t, ns), n2.open(t, ns)
	api1, api2 := adminServer(t, n1), adminServer(t, n2)

	check := func(what string, status int, body string, wantStatus int, want string) {
		t.Helper()
		if status != wantStatus || !strings.Contains(body, want) {
			t.Fatalf("%s: %d %s, want %d %s", what, status, body, wantStatus, want)
		}
	}
	// lagging makes n2 miss n1's next change until a moment after its own request began.
	lagging := func(change func()) {
		t.Helper()
		n2.gate.hold()
		change()
		go func() {
			time.Sleep(500 * time.Millisecond)
			n2.gate.release()
		}()
	}

	lagging(func() {
		status, body := post(t, api1, "/v1/namespaces/"+ns+"/epoch", `{"expectedEpoch":1}`)
		check("n1 bumps from 1", status, body, 200, `"replicationEpoch":2`)
		if e := l2.Identity().Epoch; e != 1 {
			t.Fatalf("n2 already at epoch %d: the gate did not hold it back", e)
		}
	})
	status, body := post(t, api2, "/v1/namespaces/"+ns+"/epoch", `{"expectedEpoch":1}`)
	check("n2 bumps from 1 after n1 did", status, body, 409, "EPOCH_MISMATCH")

	lagging(func() {
		status, body := put(t, api1, "/v1/namespaces/"+ns+"/schema", `{"definition":{"type":"object"},"expectedFingerprint":""}`)
		check("n1 replaces no schema", status, body, 200, "semanticFingerprint")
		if _, ok := l2.ActiveSchema(); ok {
			t.Fatal("n2 already has the schema: the gate did not hold it back")
		}
	})
	status, body = put(t, api2, "/v1/namespaces/"+ns+"/schema", `{"definition":{"type":"array"},"expectedFingerprint":""}`)
	check("n2 replaces no schema after n1 did", status, body, 409, "SCHEMA_MISMATCH")

	want, _ := l1.ActiveSchema()
	for i, tn := range tc.nodes {
		l := tn.open(t, ns)
		eventually(t, 10*time.Second, tc.nodes[i].name+" holds n1's changes only", func() error {
			got, _ := l.ActiveSchema()
			if e := l.Identity().Epoch; e != 2 || got.Fingerprint != want.Fingerprint {
				return fmt.Errorf("epoch %d, schema %q (want 2, %q)", e, got.Fingerprint, want.Fingerprint)
			}
			return nil
		})
	}
	raw, err := n2.node.OpenLog(ctxT(t, 5*time.Second), "default", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if m, err := raw.Meta(ctxT(t, 5*time.Second)); err != nil || m.Gen != 2 || m.Epoch != 2 {
		t.Fatalf("the cluster's meta record: %+v, %v (want two changes, epoch 2)", m, err)
	}
}

// adminServer serves the hub admin API of a node on loopback.
func adminServer(t *testing.T, tn *testNode) string {
	t.Helper()
	api, err := adminapi.New(adminapi.Options{Side: observer.SideHub, Registry: tn.reg, Store: tn.store, LeaseIdle: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { srv.Close(); api.Close() })
	return srv.URL
}

func post(t *testing.T, base, path, body string) (int, string) {
	return send(t, "POST", base+path, body)
}
func put(t *testing.T, base, path, body string) (int, string) { return send(t, "PUT", base+path, body) }

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 20*time.Second), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCluster_LargeUpdates: an update of many MiB (a peer's catch-up difference can be
// 32 MiB with the binaries' limits) is one record of the log: published through one node,
// applied on every node, and there for a node that loads the namespace afterwards (from the
// snapshot compaction made of it, over the object store's chunks).
func TestCluster_LargeUpdates(t *testing.T) {
	t.Parallel()
	// The binaries' largest (a 32 MiB difference) without the race detector; with it, 10
	// MiB — still ten times NATS's default max_payload and over its 8 MiB advice.
	size := 32<<20 - 64<<10
	if raceEnabled || testing.Short() {
		size = 10 << 20
	}
	tc := newTestCluster(t, 3, func(c *Config) { c.CompactAfterBytes = 8 << 20 })
	ns := tc.nodes[0].create(t)
	l1, l2 := tc.nodes[0].open(t, ns), tc.nodes[1].open(t, ns)
	big := strings.Repeat("z", size)
	res, err := l1.WriteLocal(ctxT(t, 60*time.Second), mapUpdate(t, nil, "big", big))
	if err != nil {
		t.Fatalf("a write of %d MiB: %v", size>>20, err)
	}
	if _, err := l2.WriteLocal(ctxT(t, 20*time.Second), mapUpdate(t, nil, "small", true)); err != nil {
		t.Fatal(err)
	}
	check := func(name string, l *registry.Lease) {
		t.Helper()
		eventually(t, 60*time.Second, name+" holds the large update", func() error {
			n := notes(t, l)
			if s, _ := n["big"].(string); s != big || n["small"] != true {
				return fmt.Errorf("%d bytes, small %v", len(s), n["small"])
			}
			return nil
		})
	}
	check(tc.nodes[1].name, l2)
	eventually(t, 60*time.Second, "a snapshot past the large update", func() error {
		li, err := tc.nodes[0].node.LogInfo(ctxT(t, 5*time.Second), "default", ns)
		if err != nil {
			return err
		}
		if li.SnapshotThrough < res.Seq || li.SnapshotBytes < uint64(size) {
			return fmt.Errorf("snapshot through %d (%d bytes), the update at %d", li.SnapshotThrough, li.SnapshotBytes, res.Seq)
		}
		return nil
	})
	check(tc.nodes[2].name, tc.nodes[2].open(t, ns))
}

// TestCluster_NoQuorum: a node whose siblings are gone refuses writes — local ones, an
// editor's (ErrDegraded: the editor endpoint closes with 1013, the admin API answers 503)
// and a peer's (PERSISTENCE_DEGRADED) — keeps serving reads of what it has loaded, and
// accepts writes again by itself once a sibling is back.
func TestCluster_NoQuorum(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.ProbeFailures = 2 })
	n1 := tc.nodes[0]
	ns := n1.create(t)
	l := n1.open(t, ns)
	if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "before", true)); err != nil {
		t.Fatal(err)
	}
	sess, _, err := l.OpenSession(ctxT(t, 5*time.Second), registry.SessionOptions{Peer: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	tc.stop(1)
	tc.stop(2)
	eventually(t, 20*time.Second, "quorum lost", func() error {
		if n1.node.Healthy() {
			return errors.New("still healthy")
		}
		return nil
	})
	if err := n1.node.Ready(); err == nil {
		t.Fatal("Ready() is nil without quorum")
	}
	start := time.Now()
	if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "during", true)); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("local write without quorum: %v", err)
	}
	w, err := l.Watch(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := writeExcept(t, l, w, mapUpdate(t, nil, "during-editor", true)); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("an editor's write without quorum: %v", err)
	}
	if _, err := sess.Apply(ctxT(t, 10*time.Second), mapUpdate(t, nil, "during-peer", true)); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("peer update without quorum: %v", err)
	}
	if _, err := l.BumpEpoch(ctxT(t, 10*time.Second)); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("epoch bump without quorum: %v", err)
	}
	if _, err := n1.reg.Create(ctxT(t, 10*time.Second), "default"); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("create without quorum: %v", err)
	}
	if _, err := n1.store.Entry(ctxT(t, 10*time.Second), ns); err != nil {
		t.Fatalf("entry of a known namespace without quorum: %v", err)
	}
	if n := notes(t, l); n["before"] != true {
		t.Fatalf("read without quorum: %v", n)
	}
	if sv, err := sess.StateVector(ctxT(t, 5*time.Second)); err != nil || len(sv) == 0 {
		t.Fatalf("state vector without quorum: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("refusals took %v", d)
	}
	tc.start(1)
	tc.waitHealthy(30*time.Second, n1)
	eventually(t, 20*time.Second, "writes accepted again", func() error {
		_, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "after", true))
		return err
	})
	if n := notes(t, l); n["after"] != true || n["during"] != nil || n["during-editor"] != nil {
		t.Fatalf("after recovery: %v", n)
	}
}

// TestCluster_RestartedNodeCatchesUp: a node that was down while others wrote loads the
// namespace with every write acknowledged meanwhile; a node that kept it loaded while a
// sibling restarted keeps following.
func TestCluster_RestartedNodeCatchesUp(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	l1 := tc.nodes[0].open(t, ns)
	l3 := tc.nodes[2].open(t, ns)
	if _, err := l1.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "k0", 0.0)); err != nil {
		t.Fatal(err)
	}
	tc.stop(2)
	_ = l3
	l2 := tc.nodes[1].open(t, ns)
	for i := 1; i <= 20; i++ {
		l := l1
		if i%2 == 0 {
			l = l2
		}
		if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("k%d", i), float64(i))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	tn := tc.start(2)
	if err := tn.node.Ready(); err == nil {
		t.Fatal("a node that has just started reports ready")
	}
	// Once ready — quorum, and its replicas caught up with the cluster — the restarted node
	// opens the namespace at the first attempt, with every write acknowledged meanwhile.
	eventually(t, 30*time.Second, "the restarted node ready", tn.node.Ready)
	l3 = tn.open(t, ns)
	n := notes(t, l3)
	for i := 0; i <= 20; i++ {
		if n[fmt.Sprintf("k%d", i)] != float64(i) {
			t.Fatalf("restarted node misses k%d: %v", i, n)
		}
	}
	// The other nodes follow writes made through the restarted one.
	if _, err := l3.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "from-restarted", true)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "write of the restarted node everywhere", func() error {
		for _, l := range []*registry.Lease{l1, l2} {
			if notes(t, l)["from-restarted"] != true {
				return errors.New("not yet")
			}
		}
		return nil
	})
}

// TestCluster_CompactionKeepsLogBounded: with a small threshold the log of a namespace
// written many times stays bounded (a snapshot and at most about two intervals of
// records), and a node that loads it afterwards has every write.
func TestCluster_CompactionKeepsLogBounded(t *testing.T) {
	t.Parallel()
	const every = 20
	tc := newTestCluster(t, 3, func(c *Config) { c.CompactAfterRecords = every })
	ns := tc.nodes[0].create(t)
	l1 := tc.nodes[0].open(t, ns)
	l2 := tc.nodes[1].open(t, ns)
	const writes = 200
	for i := range writes {
		l := l1
		if i%3 == 0 {
			l = l2
		}
		if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("k%d", i), float64(i))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	stream, subject := tc.nodes[0].logOf(t, "default", ns)
	eventually(t, 20*time.Second, "log bounded", func() error {
		info, err := stream.Info(ctxT(t, 5*time.Second), jetstream.WithSubjectFilter(subject))
		if err != nil {
			return err
		}
		if n := info.State.Subjects[subject]; n > 3*every {
			return fmt.Errorf("%d records of %d writes stay in the log", n, writes)
		}
		return nil
	})
	if _, err := tc.nodes[0].node.res.snaps.GetInfo(ctxT(t, 5*time.Second), ns); err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	l3 := tc.nodes[2].open(t, ns)
	n := notes(t, l3)
	for i := range writes {
		if n[fmt.Sprintf("k%d", i)] != float64(i) {
			t.Fatalf("a node loading from the snapshot misses k%d (%d keys)", i, len(n))
		}
	}
	var done uint64
	for _, tn := range tc.nodes {
		done += tn.store.Stats().Compactions
	}
	if done == 0 {
		t.Fatal("no compaction counted")
	}
}

// TestCluster_WaitsHaveDeadlines: with the rest of the cluster gone, every operation that
// needs it ends by its deadline with a classified error — never a hang.
func TestCluster_WaitsHaveDeadlines(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.OpTimeout, c.PublishTimeout, c.ProbeFailures = time.Second, 2*time.Second, 2 })
	n1 := tc.nodes[0]
	ns := n1.create(t)
	l := n1.open(t, ns)
	other := n1.create(t)
	tc.stop(1)
	tc.stop(2)
	eventually(t, 20*time.Second, "quorum lost", func() error {
		if n1.node.Healthy() {
			return errors.New("still healthy")
		}
		return nil
	})
	check := func(what string, err error, want ...error) {
		t.Helper()
		for _, w := range want {
			if errors.Is(err, w) {
				return
			}
		}
		t.Errorf("%s: %v, want one of %v", what, err, want)
	}
	bounded := func(what string, f func() error, want ...error) {
		t.Helper()
		start := time.Now()
		err := f()
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s took %v", what, d)
		}
		check(what, err, want...)
	}
	ctx := context.Background() // no deadline from the caller: the node's own apply
	bounded("entries", func() error { _, err := n1.store.Entries(ctx, ""); return err }, errUnavailable)
	// Reads may be answered by this node's replica of a bucket (the answer may be old):
	// either that answer or a classified error.
	bounded("unknown entry", func() error { _, err := n1.store.Entry(ctx, "ns-00000000000000000000000000000000"); return err },
		errUnavailable, persistence.ErrNotFound)
	bounded("config", func() error { return n1.store.PutConfig(ctx, "k", []byte("v")) }, errUnavailable)
	bounded("open an unloaded namespace", func() error {
		l, err := n1.reg.Open(ctx, "default", other)
		if err == nil {
			l.Release()
			return errReadServed
		}
		return err
	}, registry.ErrDegraded, errReadServed)
	bounded("create", func() error { _, err := n1.reg.Create(ctx, "default"); return err }, registry.ErrDegraded)
	bounded("write", func() error { _, err := l.WriteLocal(ctx, mapUpdate(t, nil, "x", 1.0)); return err }, registry.ErrDegraded)
	// The log itself, without the registry's quorum check in front.
	raw, err := n1.node.OpenLog(ctx, "default", ns, nil)
	if err == nil {
		defer raw.Close()
		bounded("head", func() error { _, err := raw.Head(ctx); return orServed(err) }, errUnavailable, errReadServed)
		bounded("meta", func() error { _, err := raw.Meta(ctx); return orServed(err) }, errUnavailable, errReadServed)
		bounded("claim", func() error { return raw.ClaimMeta(ctx, registry.MetaState{Revision: 1}, registry.MetaState{Gen: 1}) },
			errUnavailable, registry.ErrConflict)
		bounded("publish", func() error {
			done := make(chan error, 1)
			if err := raw.Publish(registry.Record{Kind: registry.RecordUpdate, Token: 1, Update: mapUpdate(t, nil, "y", 1.0)}, func(err error) { done <- err }); err != nil {
				return err
			}
			return <-done
		}, errUnavailable)
	} else {
		check("open log", err, errUnavailable)
	}
}

// TestCluster_ExternalNATS: two hub nodes on an existing NATS server (--nats-url) act as
// one hub like embedded ones.
func TestCluster_ExternalNATS(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	var tns []*testNode
	for i := range 2 {
		cfg := Config{NodeName: fmt.Sprintf("x%d", i+1), NATSURL: srv.ClientURL(), Replicas: 1,
			ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second}
		node, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: node.Store(), Shared: node})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			reg.Close(ctx)
			node.Close(ctx)
		})
		tns = append(tns, &testNode{name: cfg.NodeName, node: node, store: node.Store(), reg: reg})
	}
	eventually(t, 20*time.Second, "ready", func() error {
		for _, tn := range tns {
			if !tn.node.Healthy() {
				return fmt.Errorf("%s: %v", tn.name, tn.node.Ready())
			}
		}
		return nil
	})
	ns := tns[0].create(t)
	l1, l2 := tns[0].open(t, ns), tns[1].open(t, ns)
	if _, err := l2.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "k", "v")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the write on the other node", func() error {
		if notes(t, l1)["k"] != "v" {
			return errors.New("not yet")
		}
		return nil
	})
	if tns[0].node.ClientURL() != "" {
		t.Fatal("a node on an existing NATS reports a client URL of its own")
	}
	// The server carries messages of 1 MiB (its default max_payload): the nodes publish
	// updates that fit in one record and refuse larger ones, publishing nothing.
	if got, want := tns[0].node.MaxUpdateBytes(), 1<<20-recordOverhead-messageOverhead; got != want {
		t.Fatalf("MaxUpdateBytes %d on a NATS with max_payload 1 MiB, want %d", got, want)
	}
	records := func() int {
		t.Helper()
		li, err := tns[1].node.LogInfo(ctxT(t, 5*time.Second), "default", ns)
		if err != nil {
			t.Fatal(err)
		}
		return li.Records
	}
	before := records()
	if _, err := l2.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "big", strings.Repeat("x", 1<<20))); !errors.Is(err, registry.ErrApplyFailed) {
		t.Fatalf("an update over the record limit: %v", err)
	}
	if _, err := l2.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "fits", strings.Repeat("y", 900<<10))); err != nil {
		t.Fatalf("an update that fits: %v", err)
	}
	eventually(t, 10*time.Second, "the update that fits on the other node", func() error {
		n := notes(t, l1)
		if len(fmt.Sprint(n["fits"])) != 900<<10 || n["big"] != nil {
			return fmt.Errorf("%d keys", len(n))
		}
		return nil
	})
	if after := records(); after != before+1 {
		t.Fatalf("the namespace's log went from %d to %d records for one update that fit", before, after)
	}
	// A read of the leader answers "not found" for a key that does not exist, and
	// unavailable about a stream the server does not know (a node catching up with the
	// cluster), never "not found" — which would tell a peer its namespace does not exist.
	if _, err := tns[0].store.Entry(ctxT(t, 5*time.Second), "ns-00000000000000000000000000000000"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("an absent entry: %v", err)
	}
	_, err = tns[0].node.leaderGet(ctxT(t, 5*time.Second), "KV_no_such_bucket", "$KV.no_such_bucket.k")
	if err = classify("reading", time.Second, err); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("a read of a stream the server does not know: %v", err)
	}
}

// TestCluster_InterruptedBumpIsCompleted: a node that claimed an epoch bump and died
// before publishing it blocks nobody for good — while the claim is fresh other nodes
// answer ErrConflict; once it is older than SharedStaleClaim the next node asked for a
// change completes it from the meta record (every node then fences on it), answers
// ErrConflict, and the bump after that proceeds.
func TestCluster_InterruptedBumpIsCompleted(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	leases := make([]*registry.Lease, 3)
	for i, tn := range tc.nodes {
		leases[i] = tn.open(t, ns)
	}
	sess, _, err := leases[2].OpenSession(ctxT(t, 5*time.Second), registry.SessionOptions{Peer: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	// The claim of a bump to epoch 2, as a node that died right after it left it.
	raw, err := tc.nodes[1].node.OpenLog(ctxT(t, 5*time.Second), "default", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cur, err := raw.Meta(ctxT(t, 5*time.Second))
	if err != nil || cur.Gen != 0 || cur.Epoch != 1 {
		t.Fatalf("meta record %+v, %v", cur, err)
	}
	next := cur
	next.Gen, next.Epoch = 1, 2
	if err := raw.ClaimMeta(ctxT(t, 5*time.Second), cur, next); err != nil {
		t.Fatal(err)
	}
	// A second claim on the same revision loses.
	if err := raw.ClaimMeta(ctxT(t, 5*time.Second), cur, next); !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("a second claim on the same revision: %v", err)
	}
	claimed := time.Now()
	if _, err := leases[0].BumpEpoch(ctxT(t, 10*time.Second)); !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("bump while a fresh claim is open: %v", err)
	}
	if time.Since(claimed) < 3*time.Second && leases[0].Identity().Epoch != 1 {
		t.Fatal("the open claim was applied")
	}
	time.Sleep(time.Until(claimed.Add(3500 * time.Millisecond)))
	if _, err := leases[0].BumpEpoch(ctxT(t, 10*time.Second)); !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("bump that completes the stale claim: %v", err)
	}
	for i, l := range leases {
		eventually(t, 10*time.Second, tc.nodes[i].name+" at epoch 2", func() error {
			if e := l.Identity().Epoch; e != 2 {
				return fmt.Errorf("epoch %d", e)
			}
			return nil
		})
	}
	eventually(t, 5*time.Second, "the session of epoch 1 fenced", func() error {
		if sess.Poll().Fenced == nil {
			return errors.New("not fenced")
		}
		return nil
	})
	id, err := leases[1].BumpEpoch(ctxT(t, 10*time.Second))
	if err != nil || id.Epoch != 3 {
		t.Fatalf("the bump after: %v, %v", id, err)
	}
}

// WatchConfig: a change of the configuration map under the prefix, made on one node, is
// told on another (a put and a delete); a key under another prefix is not.
func TestCluster_WatchConfig(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan struct{}, 8)
	if err := tc.nodes[1].store.WatchConfig(ctx, "watched/", func() { changes <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not told", what)
		}
	}
	if err := tc.nodes[0].store.PutConfig(ctx, "other/k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := tc.nodes[0].store.PutConfig(ctx, "watched/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	wait("a put")
	if err := tc.nodes[2].store.DeleteConfig(ctx, "watched/a"); err != nil {
		t.Fatal(err)
	}
	wait("a delete")
	select {
	case <-changes:
		t.Fatal("told of a change under another prefix")
	case <-time.After(300 * time.Millisecond):
	}
}

// TestCluster_DeleteEverywhere: a namespace deleted through one node is closed on every
// node that has it loaded (their sessions are told: Poll.Deleted), later opens are
// ErrDeleted on every node, nothing of its document stays in JetStream (its log holds the
// deletion record alone, its snapshot is gone), a lease still held elsewhere writes
// nothing, its id is never created again, and its name is the owner's to give again.
func TestCluster_DeleteEverywhere(t *testing.T) {
	t.Parallel()
	const every = 20
	tc := newTestCluster(t, 3, func(c *Config) { c.CompactAfterRecords = every })
	created, err := tc.nodes[0].reg.CreateWith(ctxT(t, 10*time.Second), "default",
		registry.CreateOptions{Name: "minutes", Labels: map[string]string{"team": "red"}})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.NamespaceID
	if _, err := tc.nodes[1].reg.CreateWith(ctxT(t, 10*time.Second), "default", registry.CreateOptions{Name: "minutes"}); !errors.Is(err, registry.ErrNameTaken) {
		t.Fatalf("the same name through another node: %v, want ErrNameTaken", err)
	}
	var leases []*registry.Lease
	var sessions []*registry.Session
	for i := range 3 {
		l := tc.nodes[i].open(t, ns)
		leases = append(leases, l)
		s, _, err := l.OpenSession(ctxT(t, 5*time.Second), registry.SessionOptions{Peer: "peer"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sessions = append(sessions, s)
	}
	for i := range 3 * every {
		if _, err := leases[i%2].WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("k%d", i), float64(i))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	js := tc.nodes[0].node.res
	logStream, subject := tc.nodes[0].logOf(t, "default", ns)
	eventually(t, 20*time.Second, "a snapshot", func() error {
		_, err := js.snaps.GetInfo(ctxT(t, 5*time.Second), ns)
		return err
	})

	if err := tc.nodes[2].reg.Delete(ctxT(t, 10*time.Second), "default", ns, 2); !errors.Is(err, registry.ErrChanged) {
		t.Fatalf("a delete expecting another epoch: %v, want ErrChanged", err)
	}
	if err := tc.nodes[2].reg.Delete(ctxT(t, 30*time.Second), "default", ns, 1); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for i, s := range sessions {
		eventually(t, 10*time.Second, fmt.Sprintf("the session on %s told", tc.nodes[i].name), func() error {
			if p := s.Poll(); !p.Deleted || !p.Closed {
				return fmt.Errorf("poll %+v", p)
			}
			return nil
		})
	}
	for _, tn := range tc.nodes {
		eventually(t, 10*time.Second, tn.name+" refuses it", func() error {
			if _, err := tn.reg.Open(ctxT(t, 10*time.Second), "default", ns); !errors.Is(err, registry.ErrDeleted) {
				return fmt.Errorf("open: %v, want ErrDeleted", err)
			}
			return nil
		})
	}
	if _, err := leases[1].WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "late", "write")); err == nil {
		t.Fatal("a lease held on another node wrote to the deleted namespace")
	}
	info, err := logStream.Info(ctxT(t, 5*time.Second), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subject]; n != 1 {
		t.Fatalf("%d records stay in the deleted namespace's log, want the deletion record alone", n)
	}
	if _, err := js.snaps.GetInfo(ctxT(t, 5*time.Second), ns); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the deleted namespace's snapshot: %v, want it gone", err)
	}
	if err := tc.nodes[1].reg.Delete(ctxT(t, 10*time.Second), "default", ns, 1); !errors.Is(err, registry.ErrDeleted) {
		t.Fatalf("a second delete: %v, want ErrDeleted", err)
	}
	err = tc.nodes[1].store.CreateEntry(ctxT(t, 10*time.Second),
		persistence.Entry{NamespaceID: ns, Owner: "default", State: persistence.StateActive, CreatedAt: time.Now()}, []byte{0, 0})
	if !errors.Is(err, persistence.ErrExists) {
		t.Fatalf("creating the deleted id again: %v, want ErrExists", err)
	}
	again, err := tc.nodes[1].reg.CreateWith(ctxT(t, 10*time.Second), "default", registry.CreateOptions{Name: "minutes"})
	if err != nil || again.NamespaceID == ns {
		t.Fatalf("the freed name: %+v, %v", again, err)
	}
	// A listing reads node 0's replica of the entries, which may not hold node 1's create yet
	// (docs/cluster.md, "listing namespaces").
	eventually(t, 10*time.Second, "listing by name on another node", func() error {
		page, err := tc.nodes[0].store.ListEntries(ctxT(t, 10*time.Second), persistence.EntryQuery{Name: "minutes"})
		if err != nil || len(page.Entries) != 1 || page.Entries[0].NamespaceID != again.NamespaceID {
			return fmt.Errorf("listing by name: %+v, %v", page, err)
		}
		return nil
	})
}

// TestCluster_DeleteRacesAnEpochBump: a delete through one node and an epoch bump through
// another, both expecting the same epoch at the same moment: exactly one of them is made,
// however they are timed — the delete's tombstone and the bump's claim are both
// compare-and-set on the namespace's meta record. When the bump wins, the namespace is
// still there at the new epoch; when the delete wins, it is gone everywhere.
func TestCluster_DeleteRacesAnEpochBump(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	outcomes := map[string]int{}
	for round := range 6 {
		ns := tc.nodes[0].create(t)
		bumper := tc.nodes[1].open(t, ns)
		tc.nodes[0].open(t, ns).Release() // loaded and caught up on the deleting node too
		var wg sync.WaitGroup
		var delErr, bumpErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			delErr = tc.nodes[0].reg.Delete(ctxT(t, 20*time.Second), "default", ns, 1)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, bumpErr = bumper.BumpEpochFrom(ctxT(t, 20*time.Second), 1)
		}()
		close(start)
		wg.Wait()
		l, openErr := tc.nodes[2].reg.Open(ctxT(t, 20*time.Second), "default", ns)
		if openErr == nil {
			l.Release()
		}
		switch {
		case delErr == nil && bumpErr != nil:
			outcomes["delete won"]++
			if !errors.Is(openErr, registry.ErrDeleted) {
				t.Fatalf("round %d: the delete won (the bump: %v), yet node 3 opens the namespace: %v", round, bumpErr, openErr)
			}
		case bumpErr == nil && delErr != nil:
			outcomes["bump won"]++
			if !errors.Is(delErr, registry.ErrChanged) && !errors.Is(delErr, registry.ErrConflict) {
				t.Fatalf("round %d: the bump won; the delete failed with %v, want ErrChanged or ErrConflict", round, delErr)
			}
			if openErr != nil {
				t.Fatalf("round %d: the bump won, yet node 3 cannot open the namespace: %v", round, openErr)
			}
		default:
			t.Fatalf("round %d: delete %v, bump %v: want exactly one made", round, delErr, bumpErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestCluster_InterruptedDeleteIsCompleted: a delete interrupted after its tombstone (the
// deleting node died before publishing the deletion record) leaves the namespace open on a
// node that had it loaded; the next delete of it, through any node's admin API, answers 404
// NAMESPACE_DELETED and completes it: that node's session is told, and the log keeps the
// deletion record alone.
func TestCluster_InterruptedDeleteIsCompleted(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	logStream, subject := tc.nodes[0].logOf(t, "default", ns)
	l := tc.nodes[1].open(t, ns)
	s, _, err := l.OpenSession(ctxT(t, 5*time.Second), registry.SessionOptions{Peer: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 5 {
		if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("k%d", i), float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tc.nodes[0].node.Versions().PutVersion(ctxT(t, 10*time.Second), persistence.Version{NamespaceID: ns, Kind: persistence.VersionManual,
		Label: "before", CreatedAt: time.Now()}, []byte("state")); err != nil {
		t.Fatal(err)
	}
	// The tombstone alone, as a node that died right after it leaves it.
	if _, err := tc.nodes[0].store.updateEntry(ctxT(t, 10*time.Second), ns, func(v *entryValue) error {
		*v = tombstone(*v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if p := s.Poll(); p.Deleted || p.Closed {
		t.Fatalf("the session was told before any delete completed: %+v", p)
	}
	if status, body := send(t, "DELETE", adminServer(t, tc.nodes[2])+"/v1/namespaces/"+ns+"?expectedEpoch=1", ""); status != 404 ||
		!strings.Contains(body, "NAMESPACE_DELETED") {
		t.Fatalf("deleting it again: %d %s, want 404 NAMESPACE_DELETED", status, body)
	}
	eventually(t, 10*time.Second, "the session on n2 told", func() error {
		if p := s.Poll(); !p.Deleted {
			return fmt.Errorf("poll %+v", p)
		}
		return nil
	})
	info, err := logStream.Info(ctxT(t, 5*time.Second), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subject]; n != 1 {
		t.Fatalf("%d records stay in the log, want the deletion record alone", n)
	}
	// The completed delete is the namespace's "deleted" change in the feed of every node,
	// and its versions are gone.
	for _, n := range tc.nodes {
		eventually(t, 10*time.Second, "the deleted change in the feed", func() error {
			kinds := feedKinds(t, n.node, ns)
			if len(kinds) == 0 || kinds[len(kinds)-1] != persistence.ChangeDeleted || slices.Index(kinds, persistence.ChangeDeleted) != len(kinds)-1 {
				return fmt.Errorf("the feed's changes of the namespace: %v; want one deleted, last", kinds)
			}
			return nil
		})
	}
	if list, err := tc.nodes[1].node.Versions().Versions(ctxT(t, 5*time.Second), ns); err != nil || len(list) != 0 {
		t.Fatalf("the versions of the deleted namespace: %+v, %v; want none", list, err)
	}
	// Once completed, another delete changes nothing.
	if err := tc.nodes[1].reg.Delete(ctxT(t, 20*time.Second), "default", ns, 1); !errors.Is(err, registry.ErrDeleted) {
		t.Fatalf("a third delete: %v", err)
	}
	info, err = logStream.Info(ctxT(t, 5*time.Second), jetstream.WithSubjectFilter(subject))
	if err != nil || info.State.Subjects[subject] != 1 {
		t.Fatalf("after a third delete: %v records (%v)", info.State.Subjects[subject], err)
	}
}

// feedKinds reads node's change feed from its start and returns the kinds of ns's changes.
func feedKinds(t *testing.T, node *Node, ns string) []persistence.ChangeKind {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	r, err := node.ChangeFeed().Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var kinds []persistence.ChangeKind
	for {
		evs, err := r.Next(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return kinds
		}
		for _, e := range evs {
			if e.NamespaceID == ns {
				kinds = append(kinds, e.Kind)
			}
		}
	}
}
