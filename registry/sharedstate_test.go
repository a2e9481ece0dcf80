package registry

import (
	"bytes"
	"runtime"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/persistence"
)

// TestSharedFullState: the encoding of the whole document is handed out again while someone
// holds it and the document has not changed — the snapshots of sessions opening for a
// bootstrap at once share one buffer — and encoded afresh after any change or once nobody
// holds it.
func TestSharedFullState(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	cl := newClient(100)
	_, err := l.WriteLocal(ctxT(t), cl.insertText(t, "text", 0, "a document"))
	must(t, err)

	_, s1, err := l.OpenSession(ctxT(t), SessionOptions{Peer: "p1", Snapshot: true})
	must(t, err)
	_, s2, err := l.OpenSession(ctxT(t), SessionOptions{Peer: "p2", Snapshot: true})
	must(t, err)
	whole, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	if &s1.Snapshot[0] != &s2.Snapshot[0] || &whole[0] != &s1.Snapshot[0] {
		t.Fatal("the unchanged document was encoded again")
	}
	diff, err := l.EncodeState(ctxT(t), []byte{1, 100, 1})
	must(t, err)
	if &diff[0] == &whole[0] {
		t.Fatal("a diff shared the whole state's buffer")
	}

	_, err = l.WriteLocal(ctxT(t), cl.insertText(t, "text", 0, "more "))
	must(t, err)
	after, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	if &after[0] == &whole[0] || len(after) <= len(whole) {
		t.Fatal("a changed document gave the old encoding")
	}
	doc := newClient(200)
	doc.sync(t, after)
	if got := doc.doc.GetText("text").String(); got != "more a document" {
		t.Fatalf("encoded %q", got)
	}

	// Nobody holds it any more: a later read may encode again, with the same content.
	runtime.KeepAlive(s1)
	runtime.KeepAlive(s2)
	after, whole, s1.Snapshot, s2.Snapshot = nil, nil, nil, nil
	runtime.GC()
	again, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	doc2 := newClient(300)
	doc2.sync(t, again)
	if got := doc2.doc.GetText("text").String(); got != "more a document" {
		t.Fatalf("encoded again %q", got)
	}
}

// TestSharedFullStateWithPending: structs pending for missing dependencies are part of the
// encoding but come without a transaction: a document holding some is encoded afresh.
func TestSharedFullStateWithPending(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	s, _, err := l.OpenSession(ctxT(t), SessionOptions{Peer: "p1"})
	must(t, err)
	cl := newClient(100)
	cl.insertText(t, "text", 0, "a")         // never sent: what follows depends on it
	u2 := cl.insertText(t, "text", 1, "b")   // pending on the hub
	u3 := cl.insertText(t, "text", 2, "cde") // pending too
	_, err = s.Apply(ctxT(t), u2)
	must(t, err)
	a, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	_, err = s.Apply(ctxT(t), u3)
	must(t, err)
	b, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	if len(b) <= len(a) {
		t.Fatalf("the encoding did not take the second pending update: %d then %d bytes", len(a), len(b))
	}
}

// TestSharedStateForJoiners: editors joining at once ask with the encoded empty state vector
// (a fresh Y.Doc's) or with equal state vectors; at one state of the document they all get
// one encoding, counted once, as long as one of them still holds it — and a change, or
// nobody holding it, makes the next answer a fresh encoding.
func TestSharedStateForJoiners(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	cl := newClient(100)
	_, err := l.WriteLocal(ctxT(t), cl.insertText(t, "text", 0, "a document"))
	must(t, err)
	before := e.reg.StateEncodings()

	const joiners = 32
	replies := make([][]byte, joiners)
	var wg sync.WaitGroup
	for i := range joiners {
		wg.Go(func() {
			b, err := l.EncodeState(ctxT(t), []byte{0}) // Y.encodeStateVector(new Y.Doc())
			if err != nil {
				t.Error(err)
			}
			replies[i] = b
		})
		if i%8 == 0 {
			runtime.GC() // the replies held keep the shared one alive
		}
	}
	wg.Wait()
	got := e.reg.StateEncodings()
	if enc, sh := got.Encoded-before.Encoded, got.Shared-before.Shared; enc != 1 || sh != joiners-1 {
		t.Fatalf("%d joiners at one state: %d encodings, %d shared; want 1 and %d", joiners, enc, sh, joiners-1)
	}
	for i, b := range replies {
		if &b[0] != &replies[0][0] {
			t.Fatalf("joiner %d got a copy of its own", i)
		}
	}
	whole, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	if !bytes.Equal(whole, replies[0]) {
		t.Fatal("the answer to the empty state vector is not the whole document")
	}

	// Equal state vectors share one diff too.
	sv := []byte{1, 100, 2}
	d1, err := l.EncodeState(ctxT(t), sv)
	must(t, err)
	d2, err := l.EncodeState(ctxT(t), append([]byte(nil), sv...))
	must(t, err)
	if &d1[0] != &d2[0] {
		t.Fatal("two equal state vectors got two encodings")
	}

	// A change: the next joiner gets the changed document, encoded afresh.
	mid := e.reg.StateEncodings()
	_, err = l.WriteLocal(ctxT(t), cl.insertText(t, "text", 0, "more "))
	must(t, err)
	after, err := l.EncodeState(ctxT(t), []byte{0})
	must(t, err)
	d3, err := l.EncodeState(ctxT(t), sv)
	must(t, err)
	if n := e.reg.StateEncodings().Encoded - mid.Encoded; n != 2 || &after[0] == &replies[0][0] || &d3[0] == &d1[0] {
		t.Fatalf("after a change: %d encodings, want 2 (the whole document and the diff)", n)
	}
	doc := newClient(200)
	doc.sync(t, after)
	if s := doc.doc.GetText("text").String(); s != "more a document" {
		t.Fatalf("a joiner after the change got %q", s)
	}

	// Nobody holds the answers any more: the cache keeps nothing alive.
	runtime.KeepAlive(replies)
	replies, whole, after, d1, d2, d3 = nil, nil, nil, nil, nil, nil
	runtime.GC()
	n := e.reg.StateEncodings().Encoded
	_, err = l.EncodeState(ctxT(t), []byte{0})
	must(t, err)
	if e.reg.StateEncodings().Encoded != n+1 {
		t.Fatal("an answer nobody held was kept")
	}
}
