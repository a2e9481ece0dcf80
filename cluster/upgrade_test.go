package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// TestCluster_UpgradeFromOneLogStream: a cluster whose nodes kept every log in
// NOMICORE_LOG (entries naming no stream, as earlier versions wrote them, and as one log
// stream configured still does) is stopped and started again spreading new namespaces over
// three streams: the earlier namespaces keep their logs in NOMICORE_LOG, with everything
// written before, and take writes there; new namespaces go to the stream their id hashes
// to; every node agrees; and the feed after a cursor of before (a plain number) gives
// every change after it, in every stream.
func TestCluster_UpgradeFromOneLogStream(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.LogStreams = 1 })
	var before []string
	for i := range 4 {
		tn := tc.nodes[i%3]
		ns := tn.create(t)
		before = append(before, ns)
		l := tn.open(t, ns)
		if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "before", float64(i))); err != nil {
			t.Fatal(err)
		}
		e, err := tn.node.res.entries.Get(ctxT(t, 5*time.Second), ns)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(e.Value(), []byte(`"log"`)) {
			t.Fatalf("an entry of a one-stream cluster names a stream, which earlier versions did not: %s", e.Value())
		}
	}
	if _, err := tc.nodes[0].node.js.Stream(ctxT(t, 5*time.Second), logStreamName(1)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("a one-stream cluster has %s: %v", logStreamName(1), err)
	}
	// The cursor a reader (a webhook endpoint, the versions scheduler) kept from the feed of
	// before: a plain number, a position in NOMICORE_LOG.
	info, err := tc.nodes[0].node.res.stream.Info(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	oldCursor := changefeed.Cursor(strconv.FormatUint(info.State.LastSeq, 10))
	for i := range tc.nodes {
		tc.stop(i)
	}
	tc.tune = func(c *Config) { c.LogStreams = 3 }
	for i := range tc.nodes {
		tc.start(i)
	}
	tc.waitHealthy(30*time.Second, tc.nodes...)
	for i, tn := range tc.nodes {
		eventually(t, 30*time.Second, tn.name+" ready", tn.node.Ready)
		for j, ns := range before {
			stream, err := tn.node.LogStreamName(ctxT(t, 5*time.Second), ns)
			if err != nil || stream != StreamName {
				t.Fatalf("%s: the log of %s written before the upgrade is in %q (%v)", tn.name, ns, stream, err)
			}
			l := tn.open(t, ns)
			if n := notes(t, l); n["before"] != float64(j) {
				t.Fatalf("%s: %s after the upgrade holds %v", tn.name, ns, n)
			}
			key := fmt.Sprintf("after-%d", i)
			if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, key, true)); err != nil {
				t.Fatalf("%s: writing to %s after the upgrade: %v", tn.name, ns, err)
			}
			_, subject := tn.logOf(t, "default", ns)
			if subject != logSubjectIn(0, "default", ns) {
				t.Fatalf("%s: %s logs to %s", tn.name, ns, subject)
			}
		}
	}
	for _, tn := range tc.nodes {
		for _, ns := range before {
			l := tn.open(t, ns)
			eventually(t, 10*time.Second, tn.name+" holds every write of "+ns, func() error {
				n := notes(t, l)
				for i := range tc.nodes {
					if n[fmt.Sprintf("after-%d", i)] != true {
						return fmt.Errorf("notes %v", n)
					}
				}
				return nil
			})
		}
	}
	used := map[string]bool{}
	for i := range 12 {
		tn := tc.nodes[i%3]
		ns := tn.create(t)
		want := logStreamName(placeLog(ns, 3))
		for _, other := range tc.nodes {
			if got, err := other.node.LogStreamName(ctxT(t, 5*time.Second), ns); err != nil || got != want {
				t.Fatalf("%s: a namespace created after the upgrade logs to %q (%v), want %s", other.name, got, err, want)
			}
		}
		used[want] = true
		if _, err := tn.open(t, ns).WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "new", true)); err != nil {
			t.Fatal(err)
		}
	}
	if len(used) < 2 {
		t.Fatalf("twelve new namespaces all log to %v", used)
	}
	// The feed after the cursor of before: the writes after it to the namespaces in
	// NOMICORE_LOG, and every change of the new ones, wherever their logs are.
	kinds := map[string][]persistence.ChangeKind{}
	for _, e := range readFeed(t, tc.nodes[1].node, oldCursor) {
		kinds[e.NamespaceID] = append(kinds[e.NamespaceID], e.Kind)
	}
	for _, ns := range before {
		if k := kinds[ns]; len(k) < len(tc.nodes) || slices.Contains(k, persistence.ChangeCreated) {
			t.Fatalf("after the cursor of before, %s (in NOMICORE_LOG) has the changes %v", ns, k)
		}
		delete(kinds, ns)
	}
	if len(kinds) != 12 {
		t.Fatalf("after the cursor of before, %d new namespaces (want 12): %v", len(kinds), kinds)
	}
	for ns, k := range kinds {
		if len(k) != 2 || k[0] != persistence.ChangeCreated || k[1] != persistence.ChangeUpdated {
			t.Fatalf("after the cursor of before, %s (new) has the changes %v", ns, k)
		}
	}
}

// simulateNode writes a node's entry and, until stop, its quorum probes, as a node of
// another version does: format is the log format its entry names (0: none, as earlier
// versions wrote).
func simulateNode(t *testing.T, via *Node, name string, format int, probes bool) (stop func()) {
	t.Helper()
	b, _ := json.Marshal(nodeRecord{Incarnation: "0123456789abcdef", Started: time.Now().UTC(), LogFormat: format})
	if _, err := via.res.nodes.Put(ctxT(t, 5*time.Second), name, b); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m := nats.NewMsg(subjectRoot + ".probe." + name)
				m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
				_, _ = via.js.PublishMsg(ctxT(t, time.Second), m, jetstream.WithExpectStream(StreamName))
				select {
				case <-done:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// TestCluster_EarlierVersionAliveRefusesWrites: while a node of an earlier version — its
// entry names no log format — is alive (probing), the nodes of this version refuse every
// write, saying which node to upgrade, so that none writes a batch or a spread log it
// could not read; they accept writes again when it stops (a node taken out of the
// cluster) and once it starts again upgraded. A node of an earlier version that never
// probed does not count.
func TestCluster_EarlierVersionAliveRefusesWrites(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	n1 := tc.nodes[0]
	ns := n1.create(t)
	l := n1.open(t, ns)
	simulateNode(t, n1.node, "never-probed", 0, false)
	stop := simulateNode(t, n1.node, "earlier", 0, true)
	refused := func(tn *testNode) error {
		var older *OlderNodesError
		if err := tn.node.Ready(); !errors.As(err, &older) || len(older.Nodes) != 1 || older.Nodes[0] != "earlier" {
			return fmt.Errorf("%s ready: %v", tn.name, err)
		}
		if tn.node.Healthy() {
			return fmt.Errorf("%s healthy", tn.name)
		}
		return nil
	}
	for _, tn := range tc.nodes {
		eventually(t, 20*time.Second, tn.name+" refuses writes beside an earlier version", func() error { return refused(tn) })
	}
	if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "during", true)); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("a write beside a node of an earlier version: %v", err)
	}
	if _, err := n1.reg.Create(ctxT(t, 10*time.Second), "default"); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("a create beside a node of an earlier version: %v", err)
	}
	// It stops: once its last probe is old, it no longer counts.
	stop()
	for _, tn := range tc.nodes {
		eventually(t, 2*olderAlive+10*time.Second, tn.name+" accepts writes once the earlier node is gone", func() error {
			if !tn.node.Healthy() {
				return fmt.Errorf("%s: %v", tn.name, tn.node.Ready())
			}
			return nil
		})
	}
	writeEventually(t, l, "after-stop")
	// It starts again with an earlier version, then upgraded.
	simulateNode(t, n1.node, "earlier", 0, true)
	eventually(t, 20*time.Second, "n2 refuses writes again", func() error { return refused(tc.nodes[1]) })
	simulateNode(t, n1.node, "earlier", logFormat, true)
	for _, tn := range tc.nodes {
		eventually(t, 20*time.Second, tn.name+" accepts writes once every node is upgraded", func() error {
			if !tn.node.Healthy() {
				return fmt.Errorf("%s: %v", tn.name, tn.node.Ready())
			}
			return nil
		})
	}
	writeEventually(t, l, "after-upgrade")
	if n := notes(t, l); n["during"] != nil || n["after-stop"] != true || n["after-upgrade"] != true {
		t.Fatalf("notes %v", n)
	}
}

// writeEventually writes key=true through l, trying again while the node refuses it (a
// quorum probe may fail for a moment on a loaded machine).
func writeEventually(t *testing.T, l *registry.Lease, key string) {
	t.Helper()
	eventually(t, 30*time.Second, "the write of "+key+" accepted", func() error {
		_, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, key, true))
		return err
	})
}
