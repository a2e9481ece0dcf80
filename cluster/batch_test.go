package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomicore/nomicore/registry"
)

// kill stops node i the way a crash does, as far as one process allows: its NATS server
// goes first, with the records its publisher has in flight, then its registry and node
// (whatever they still wait for fails). An in-process server hands its leaderships over
// as it stops, so the others elect no one; the failover benchmark kills processes.
func (tc *testCluster) kill(i int) {
	tn := tc.nodes[i]
	tn.node.srv.Shutdown()
	tn.node.srv.WaitForShutdown()
	tc.stop(i)
}

// batchedRecords reads how many records node n published and in how many messages.
func batchedRecords(t *testing.T, n *Node) (records, messages uint64) {
	t.Helper()
	r := prometheus.NewRegistry()
	if err := r.Register(n.metrics.publishBatch); err != nil {
		t.Fatal(err)
	}
	mfs, err := r.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathering the batch histogram: %v", err)
	}
	h := mfs[0].GetMetric()[0].GetHistogram()
	return uint64(h.GetSampleSum()), h.GetSampleCount()
}

// pipelinedWriter keeps window updates in flight through a session, each setting a key of
// its own, until it submitted limit of them or stop is closed; it records the keys
// acknowledged and, once every update it submitted settled, closes done.
type pipelinedWriter struct {
	name  string
	ns    int        // which namespace of the test
	mu    sync.Mutex // guards acked
	acked []string
	done  chan struct{}
}

func writePipelined(t *testing.T, s *registry.Session, name string, ns, window, limit int, stop <-chan struct{}) *pipelinedWriter {
	w := &pipelinedWriter{name: name, ns: ns, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		slots := make(chan struct{}, window)
		var settled sync.WaitGroup
		defer settled.Wait()
		for i := 0; i < limit; i++ {
			select {
			case <-stop:
				return
			case slots <- struct{}{}:
			}
			key := fmt.Sprintf("%s-%d", name, i)
			settled.Add(1)
			err := s.ApplyAsync(mapUpdate(t, nil, key, float64(i)), func(_ registry.ApplyResult, err error) {
				defer settled.Done()
				if err == nil {
					w.mu.Lock()
					w.acked = append(w.acked, key)
					w.mu.Unlock()
				}
				<-slots
			})
			if err != nil {
				settled.Done()
				<-slots
				time.Sleep(10 * time.Millisecond) // refused at once (the node is going): try again
			}
		}
	}()
	return w
}

// TestCluster_KillDuringBatchesLosesNothingAcknowledged: sessions on two nodes keep 32
// updates each in flight on namespaces spread over the log streams, so the publishers
// send batches and pipeline them; a node is killed in the middle — the node taking half
// of the writes, or the one leading the first namespace's log stream. Every update that
// was acknowledged is on every surviving node, which all hold the same document, and on
// the killed node once it is back.
func TestCluster_KillDuringBatchesLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	for _, victim := range []string{"a writing node", "the log leader"} {
		t.Run(victim, func(t *testing.T) {
			t.Parallel()
			tc := newTestCluster(t, 3, func(c *Config) { c.LogStreams = 3 })
			var nss []string
			for range 3 {
				nss = append(nss, tc.nodes[0].create(t))
			}
			kill := 0
			if victim == "the log leader" {
				stream, err := tc.nodes[0].node.LogStreamName(ctxT(t, 10*time.Second), nss[0])
				if err != nil {
					t.Fatal(err)
				}
				eventually(t, 20*time.Second, "a leader of "+stream, func() error {
					for i, tn := range tc.nodes {
						led, err := tn.node.Leading(ctxT(t, 5*time.Second))
						if err == nil && slices.Contains(led, stream) {
							kill = i
							return nil
						}
					}
					return errors.New("none yet")
				})
			}
			stop := make(chan struct{})
			var writers []*pipelinedWriter
			for _, w := range []int{0, 1} { // sessions on n1 and n2
				for j, ns := range nss {
					l := tc.nodes[w].open(t, ns)
					s, _, err := l.OpenSession(ctxT(t, 10*time.Second), registry.SessionOptions{Peer: "peer", MaxInFlight: 64})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(s.Close)
					writers = append(writers, writePipelined(t, s, fmt.Sprintf("n%d-ns%d", w+1, j), j, 32, 400, stop))
				}
			}
			// The kill comes once the writers are under way (some acknowledged), and the
			// surviving writers go on through it.
			eventually(t, 20*time.Second, "writes acknowledged", func() error {
				for _, w := range writers {
					w.mu.Lock()
					n := len(w.acked)
					w.mu.Unlock()
					if n < 50 {
						return fmt.Errorf("%s: %d acknowledged", w.name, n)
					}
				}
				return nil
			})
			tc.kill(kill)
			defer close(stop)
			for _, w := range writers {
				select {
				case <-w.done:
				case <-time.After(2 * time.Minute):
					t.Fatalf("%s: writes not settled after two minutes", w.name)
				}
			}
			acked := make([][]string, len(nss)) // by namespace
			total := 0
			for _, w := range writers {
				acked[w.ns] = append(acked[w.ns], w.acked...)
				total += len(w.acked)
			}
			if total < 900 {
				t.Fatalf("only %d updates acknowledged", total)
			}
			var survivors []*testNode
			for i, tn := range tc.nodes {
				if i != kill {
					survivors = append(survivors, tn)
				}
			}
			records, messages := uint64(0), uint64(0)
			for _, tn := range survivors {
				r, m := batchedRecords(t, tn.node)
				records, messages = records+r, messages+m
			}
			if messages == 0 || records < 2*messages {
				t.Fatalf("the survivors published %d records in %d messages: no batches to test", records, messages)
			}
			docs := func(tns []*testNode) error {
				var first map[string]any
				for _, tn := range tns {
					for j, ns := range nss {
						l, err := tn.reg.Open(ctxT(t, 20*time.Second), "default", ns)
						if err != nil {
							return fmt.Errorf("%s: open: %v", tn.name, err)
						}
						n := notes(t, l)
						l.Release()
						for _, k := range acked[j] {
							if _, ok := n[k]; !ok {
								return fmt.Errorf("%s lacks the acknowledged %s", tn.name, k)
							}
						}
						if j == 0 {
							if first == nil {
								first = n
							} else if len(n) != len(first) {
								return fmt.Errorf("%s holds %d keys of the first namespace, another node %d", tn.name, len(n), len(first))
							}
						}
					}
				}
				return nil
			}
			eventually(t, 30*time.Second, "every acknowledged update on the survivors", func() error { return docs(survivors) })
			back := tc.start(kill)
			tc.waitHealthy(30*time.Second, back)
			eventually(t, 30*time.Second, "the killed node ready", back.node.Ready)
			eventually(t, 30*time.Second, "every acknowledged update on the killed node", func() error { return docs([]*testNode{back}) })
		})
	}
}

// TestCluster_BatchRecordsDecidedOneByOne: the records of a batch are decided one by one,
// each on the state the ones before it left, alike on every node: in one message, an
// update admitted under an epoch a bump has retired is refused, the others applied — and
// a node loading the namespace afterwards decides the same.
func TestCluster_BatchRecordsDecidedOneByOne(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	ns := tc.nodes[0].create(t)
	leases := make([]*registry.Lease, 3)
	for i, tn := range tc.nodes {
		leases[i] = tn.open(t, ns)
	}
	if _, err := leases[0].BumpEpoch(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i, l := range leases {
		eventually(t, 10*time.Second, tc.nodes[i].name+" at epoch 2", func() error {
			if e := l.Identity().Epoch; e != 2 {
				return fmt.Errorf("epoch %d", e)
			}
			return nil
		})
	}
	_, subject := tc.nodes[1].logOf(t, "default", ns)
	batch := encodeBatch([]registry.Record{
		{Kind: registry.RecordUpdate, Epoch: 2, Token: 1, Update: mapUpdate(t, nil, "first", true)},
		{Kind: registry.RecordUpdate, Epoch: 1, Token: 2, Update: mapUpdate(t, nil, "stale", true)},
		{Kind: registry.RecordUpdate, Epoch: 0, Token: 3, Update: mapUpdate(t, nil, "local", true)},
	}, "test-batch")
	if _, err := tc.nodes[1].node.js.Publish(ctxT(t, 10*time.Second), subject, batch); err != nil {
		t.Fatal(err)
	}
	check := func(name string, l *registry.Lease) error {
		n := notes(t, l)
		if n["first"] != true || n["local"] != true {
			return fmt.Errorf("%s: notes %v", name, n)
		}
		if _, ok := n["stale"]; ok {
			return fmt.Errorf("%s applied the update of a retired epoch: %v", name, n)
		}
		return nil
	}
	for i, l := range leases {
		eventually(t, 10*time.Second, tc.nodes[i].name+" decides the batch", func() error { return check(tc.nodes[i].name, l) })
	}
	tc.stop(2)
	tn := tc.start(2)
	tc.waitHealthy(30*time.Second, tn)
	eventually(t, 30*time.Second, "n3 ready", tn.node.Ready)
	if err := check("n3 reloaded", tn.open(t, ns)); err != nil {
		t.Fatal(err)
	}
}

// TestCluster_NoAckWithoutTheStreamsQuorum: with two nodes of three gone, the updates a
// session keeps in flight on namespaces of every log stream are never acknowledged — they
// fail once the publish deadline passes — and none is applied meanwhile (a node applies
// only what comes back from the log), though the node still counts itself as having
// quorum (its probe failures below the threshold), so nothing refuses them before the
// publisher. Once the others are back, writes are acknowledged again.
func TestCluster_NoAckWithoutTheStreamsQuorum(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) {
		c.ProbeFailures = 1 << 20
		c.PublishTimeout = 2 * time.Second
		c.LogStreams = 3
	})
	n1 := tc.nodes[0]
	streams := map[string]string{} // namespace → its log stream, one of each
	for i := 0; len(streams) < 3; i++ {
		if i == 100 {
			t.Fatalf("a hundred namespaces, on %d log streams", len(streams))
		}
		ns := n1.create(t)
		s, err := n1.node.LogStreamName(ctxT(t, 5*time.Second), ns)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(slices.Collect(maps.Values(streams)), s) {
			streams[ns] = s
		}
	}
	type flight struct {
		ns  string
		l   *registry.Lease
		s   *registry.Session
		res chan error
	}
	var fs []*flight
	for ns := range streams {
		l := n1.open(t, ns)
		s, _, err := l.OpenSession(ctxT(t, 10*time.Second), registry.SessionOptions{Peer: "peer", MaxInFlight: 64})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		fs = append(fs, &flight{ns: ns, l: l, s: s, res: make(chan error, 32)})
	}
	tc.stop(1)
	tc.stop(2)
	for _, f := range fs {
		for i := range 32 {
			if err := f.s.ApplyAsync(mapUpdate(t, nil, fmt.Sprintf("lost-%d", i), true), func(_ registry.ApplyResult, err error) { f.res <- err }); err != nil {
				f.res <- err
			}
		}
	}
	for _, f := range fs {
		for range 32 {
			select {
			case err := <-f.res:
				if err == nil {
					t.Fatalf("an update of %s (log stream %s) was acknowledged without the stream's quorum", f.ns, streams[f.ns])
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s: an update neither acknowledged nor refused after a minute", f.ns)
			}
		}
		if n := notes(t, f.l); len(n) != 0 {
			t.Fatalf("%s applied updates the log never acknowledged: %v", f.ns, n)
		}
	}
	tc.start(1)
	tc.start(2)
	tc.waitHealthy(30*time.Second, tc.nodes...)
	for _, f := range fs {
		eventually(t, 30*time.Second, "writes to "+f.ns+" acknowledged again", func() error {
			_, err := f.l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "after", true))
			return err
		})
	}
}

// TestCluster_PipelinedBatchesKeepOrder: a session keeps 32 updates in flight, so its node
// batches them and has two messages on their way at once; the log holds its records in
// the order the node admitted them (the registry's tokens rise through every message and
// batch), and the session's acknowledgements come in the order it submitted, each with
// the log position it was applied at.
func TestCluster_PipelinedBatchesKeepOrder(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	const total = 600
	ns := tc.nodes[0].create(t)
	n2 := tc.nodes[1]
	l := n2.open(t, ns)
	s, _, err := l.OpenSession(ctxT(t, 10*time.Second), registry.SessionOptions{Peer: "peer", MaxInFlight: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var mu sync.Mutex // guards acked and positions
	var acked []int
	var positions []uint64 // the log position of each acknowledged update
	slots := make(chan struct{}, 32)
	all := make(chan struct{})
	for i := range total {
		slots <- struct{}{}
		key := fmt.Sprintf("k%d", i)
		err := s.ApplyAsync(mapUpdate(t, nil, key, float64(i)), func(r registry.ApplyResult, err error) {
			if err != nil {
				t.Errorf("update %d: %v", i, err)
			}
			mu.Lock()
			acked = append(acked, i)
			positions = append(positions, r.Seq)
			if len(acked) == total {
				close(all)
			}
			mu.Unlock()
			<-slots
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		t.Fatal("not every update acknowledged after a minute")
	}
	mu.Lock()
	for i, k := range acked {
		if k != i {
			t.Fatalf("acknowledgement %d is of update %d", i, k)
		}
		if positions[i] == 0 || i > 0 && positions[i] < positions[i-1] {
			t.Fatalf("acknowledgement %d at log position %d, after %d", i, positions[i], positions[max(i-1, 0)])
		}
	}
	mu.Unlock()
	if n := notes(t, l); len(n) != total {
		t.Fatalf("%d keys applied", len(n))
	}
	// The log, read back from the stream.
	stream, subject := n2.logOf(t, "default", ns)
	var tokens []uint64
	messages := 0
	for seq := uint64(1); len(tokens) < total; {
		var m *jetstream.RawStreamMsg
		eventually(t, 10*time.Second, fmt.Sprintf("the namespace's log from position %d, after %d records", seq, len(tokens)), func() (err error) {
			m, err = stream.GetMsg(ctxT(t, 5*time.Second), seq, jetstream.WithGetMsgSubject(subject))
			return err
		})
		seq = m.Sequence + 1
		recs, origin, err := decodeBatch(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if origin != n2.node.incarnation {
			t.Fatalf("a record of origin %q", origin)
		}
		messages++
		for _, r := range recs {
			tokens = append(tokens, r.Token)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("record %d of the log has token %d after %d", i, tokens[i], tokens[i-1])
		}
	}
	if messages >= total/2 {
		t.Fatalf("%d records in %d messages: hardly batched", total, messages)
	}
}
