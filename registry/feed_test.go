package registry

import (
	"bytes"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// feedNamespace makes a hub on a store with a change feed (and opts), creates a namespace
// and opens it; the lease is released when the test ends.
func feedNamespace(t *testing.T, opts persistence.Options) (persistence.ChangeFeed, Created, *Lease) {
	t.Helper()
	opts.ChangeFeed = &persistence.ChangeFeedOptions{StateVector: FeedStateVector}
	e := newEnv(t, RoleHub, Config{}, opts)
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	l, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	t.Cleanup(l.Release)
	return e.store.(persistence.ChangeFeed), c, l
}

// On a store with a change feed, every write is in the feed with the document's state
// vector after it: the creation, each local write, and the snapshot that saves changes the
// store had refused.
func TestWritesNoteTheirStateVectorInTheFeed(t *testing.T) {
	feed, c, l := feedNamespace(t, persistence.Options{CommitDelay: -1})
	svAtCreation, err := l.StateVector(ctxT(t))
	must(t, err)
	for i := range 3 {
		doc := yjs.NewDoc()
		must(t, doc.GetMap("m").Set("k", float64(i)))
		u, err := yjs.EncodeStateAsUpdate(doc, nil)
		must(t, err)
		res, err := l.WriteLocal(ctxT(t), u)
		must(t, err)
		must(t, l.WaitFlushed(ctxT(t), res.Seq))
	}
	sv, err := l.StateVector(ctxT(t))
	must(t, err)
	changes, _, err := feed.Changes(ctxT(t), 0, 100)
	must(t, err)
	if len(changes) < 2 {
		t.Fatalf("%d records: %+v", len(changes), changes)
	}
	first, last := changes[0], changes[len(changes)-1]
	if first.Kind != persistence.ChangeCreated || first.NamespaceID != c.NamespaceID || !bytes.Equal(first.StateVector, svAtCreation) {
		t.Fatalf("first record %+v, want the creation with state vector %x", first, svAtCreation)
	}
	if last.Kind != persistence.ChangeUpdated || !bytes.Equal(last.StateVector, sv) {
		t.Fatalf("last record %+v, want an update with the state vector %x", last, sv)
	}
}

// The runtime gives the change feed its state vector once for a run of writes rather than
// after each one; the record of every group commit must still carry the state vector after
// the last write it holds — not an earlier one. A burst of writes is queued at once (so the
// runtime runs them back to back, owing the note), and the state vectors after each write
// are computed independently on a replica of the document.
func TestFeedRecordsCarryTheStateVectorAfterTheirLastWrite(t *testing.T) {
	feed, _, l := feedNamespace(t, persistence.Options{})
	replica := yjs.NewDoc()
	must(t, yjs.ApplyUpdate(replica, mustState(t, l, nil), nil))
	_, b, err := feed.Changes(ctxT(t), 0, 100)
	must(t, err)
	writer := yjs.NewDoc()
	const n = 200
	after := map[string]int{} // a state vector → the number of writes it follows
	updates := make([][]byte, n)
	for i := range n {
		sv := writer.EncodeStateVector()
		must(t, writer.GetMap("m").Set("k", float64(i)))
		u, err := yjs.EncodeStateAsUpdate(writer, sv)
		must(t, err)
		updates[i] = u
		must(t, yjs.ApplyUpdate(replica, u, nil))
		after[string(replica.EncodeStateVector())] = i + 1
	}
	results := make(chan ApplyResult, n)
	for _, u := range updates {
		must(t, l.WriteLocalAsync(u, func(r ApplyResult, err error) {
			if err != nil {
				t.Errorf("write: %v", err)
			}
			results <- r
		}))
	}
	var last uint64
	for range n {
		last = max(last, (<-results).Seq)
	}
	must(t, l.WaitFlushed(ctxT(t), last))
	changes, _, err := feed.Changes(ctxT(t), b.Head, 1000)
	must(t, err)
	if len(changes) == 0 {
		t.Fatal("no record of the writes")
	}
	prev := 0
	for _, ch := range changes {
		k, ok := after[string(ch.StateVector)]
		if ch.Kind != persistence.ChangeUpdated || !ok || k <= prev {
			t.Fatalf("record %+v: not the state vector after a later write than the record before's (%d of %d)", ch, prev, n)
		}
		prev = k
	}
	if prev != n {
		t.Fatalf("the last record has the state vector after write %d of %d", prev, n)
	}
}
