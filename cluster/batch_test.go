package cluster

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
			tc := newTestCluster(t, 3, nil)
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
