package registry

import (
	"bytes"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// On a store with a change feed, every write is in the feed with the document's state
// vector after it: the creation, each local write, and the snapshot that saves changes the
// store had refused.
func TestWritesNoteTheirStateVectorInTheFeed(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{CommitDelay: -1,
		ChangeFeed: &persistence.ChangeFeedOptions{StateVector: FeedStateVector}})
	feed := e.store.(persistence.ChangeFeed)
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	l, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	defer l.Release()
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
