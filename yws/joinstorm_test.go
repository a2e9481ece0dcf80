package yws

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
	"github.com/nomicore/nomicore/yws/hocuspocus"
)

// stormDoc is a multi-author JS yjs history loaded into a namespace.
type stormDoc struct {
	initial []byte                     // the namespace's state before the history
	stream  [][]byte                   // the history's updates
	roots   map[string]oracle.RootType // its roots
	lease   *registry.Lease            // keeps the namespace loaded
}

// stormHistory loads a multi-author JS yjs history of several MiB (a smaller one under the
// race detector or -short) into e's namespace.
func stormHistory(t *testing.T, e *env) *stormDoc {
	t.Helper()
	cfg := oracle.LargeConfig{Seed: 1, MiB: 4, Authors: 4, Updates: 24, RefGC: true}
	if raceEnabled || testing.Short() {
		cfg = oracle.LargeConfig{Seed: 3, MiB: 0.75, Authors: 3, Updates: 12, RefGC: true}
	}
	h := oracle.Large(t, cfg)
	if h == nil {
		return nil
	}
	ctx := context.Background()
	l, err := e.reg.Open(ctx, "default", e.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release)
	initial, err := l.EncodeState(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &stormDoc{initial: bytes.Clone(initial), stream: h.Stream(t, "a"), roots: h.Roots, lease: l}
	for _, u := range d.stream {
		if _, err := l.WriteLocal(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("history %+v: %.2f MiB encoded, %d updates", cfg, float64(h.Figures.StateBytes)/(1<<20), len(d.stream))
	return d
}

// jsApply is what JS yjs has after the namespace's state, the history and more updates.
func (d *stormDoc) jsApply(t *testing.T, js *oracle.Client, more [][]byte, svs ...[]byte) oracle.ApplyResult {
	t.Helper()
	updates := append(append([][]byte{d.initial}, d.stream...), more...)
	r, err := js.Apply(oracle.ApplyRequest{Updates: updates, Roots: d.roots, StateVectors: svs})
	if err != nil {
		t.Fatal(err)
	}
	if r.Pending {
		t.Fatal("JS has pending structs after the history")
	}
	return r
}

// joinOnce opens a WebSocket as a fresh provider does — its SyncStep1 carries the encoded
// empty state vector — and returns the payload of the node's SyncStep2.
func joinOnce(t *testing.T, e *env) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.url(e.ns, "writer"), nil)
	if err != nil {
		return nil, err
	}
	defer ws.CloseNow()
	ws.SetReadLimit(64 << 20)
	if err := ws.Write(ctx, websocket.MessageBinary, AppendSync(nil, SyncStep1, []byte{0})); err != nil {
		return nil, err
	}
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return nil, err
		}
		m, err := decodeServerMessage(b)
		if err != nil {
			return nil, err
		}
		if m.Type == TypeSync && m.Sync == SyncStep2 {
			ws.Close(websocket.StatusNormalClosure, "")
			return m.Payload, nil
		}
	}
}

// joinAtOneState has joiners join d's namespace at once, each with join, which returns the
// SHA-256 of the document it got, and checks that every one got JS yjs's
// encodeStateAsUpdate of the document, answered from one encoding that a reader holds
// meanwhile (as a reply still on its way to a slow editor does): no new encoding, every
// answer shared. It returns the encoding's size and the bytes the process allocated while
// they joined.
func joinAtOneState(t *testing.T, js *oracle.Client, e *env, d *stormDoc, joiners int, join func() ([32]byte, error)) (int, uint64) {
	t.Helper()
	want := d.jsApply(t, js, nil, []byte{0})
	held, err := d.lease.EncodeState(context.Background(), []byte{0})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(held, want.Diffs[0]) {
		t.Fatalf("the node's state: %d bytes, JS's encodeStateAsUpdate: %d bytes, not equal", len(held), len(want.Diffs[0]))
	}
	before := e.reg.StateEncodings()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc
	sums := make([][32]byte, joiners)
	var wg sync.WaitGroup
	for i := range joiners {
		wg.Go(func() {
			s, err := join()
			if err != nil {
				t.Errorf("joiner %d: %v", i, err)
			}
			sums[i] = s
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&ms)
	allocated = ms.TotalAlloc - allocated
	if t.Failed() {
		t.FailNow()
	}
	wantSum := sha256.Sum256(want.Diffs[0])
	for i, s := range sums {
		if s != wantSum {
			t.Errorf("joiner %d got other bytes than JS yjs's encodeStateAsUpdate", i)
		}
	}
	after := e.reg.StateEncodings()
	if enc, sh := after.Encoded-before.Encoded, after.Shared-before.Shared; enc != 0 || sh != uint64(joiners) {
		t.Errorf("%d joiners at one state: %d encodings, %d answers shared; want 0 and %d", joiners, enc, sh, joiners)
	}
	runtime.KeepAlive(held)
	return len(held), allocated
}

// TestJoinStormSharesOneReply: editors joining a large document at one state all get the
// same bytes, which are JS yjs's encodeStateAsUpdate of the document, encoded once for all
// of them while anyone holds the encoding — not once per editor.
func TestJoinStormSharesOneReply(t *testing.T) {
	js := oracle.Start(t)
	e := newEnv(t, nil)
	d := stormHistory(t, e)
	if d == nil {
		return
	}
	joinAtOneState(t, js, e, d, 24, func() ([32]byte, error) {
		p, err := joinOnce(t, e)
		runtime.GC()
		return sha256.Sum256(p), err
	})
}

// TestJoinStormWithWrites: editors join a large document while another editor writes: every
// joiner ends with the document JS yjs has after the history and every write, byte for byte,
// and so does the node.
func TestJoinStormWithWrites(t *testing.T) {
	js := oracle.Start(t)
	e := newEnv(t, nil)
	d := stormHistory(t, e)
	if d == nil {
		return
	}
	writer := e.dial("writer")
	writer.sync()
	joiners := 12
	if raceEnabled {
		joiners = 6
	}
	var writes [][]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 40; i++ {
			writes = append(writes, writer.insert(0, fmt.Sprintf("w%d ", i)))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	clients := make([]*client, joiners)
	var wg sync.WaitGroup
	for i := range joiners {
		wg.Go(func() {
			c, err := e.tryDial(e.ns, "writer")
			if err != nil {
				t.Errorf("joiner %d: %v", i, err)
				return
			}
			c.write(AppendSync(nil, SyncStep1, []byte{0}))
			clients[i] = c
		})
	}
	wg.Wait()
	<-done
	if t.Failed() {
		return
	}
	want := d.jsApply(t, js, writes)
	wantBody := writer.text()
	for i, c := range clients {
		c.waitFor(fmt.Sprintf("joiner %d has every write", i), func() bool { return c.text() == wantBody })
		c.mu.Lock()
		got, err := yjs.EncodeStateAsUpdate(c.doc, nil)
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		sameAsJS(t, js, fmt.Sprintf("joiner %d", i), got, d.roots, want)
	}
	node, err := d.lease.EncodeState(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameAsJS(t, js, "the node", node, d.roots, want)
}

// sameAsJS checks that state (an encoded document) is the document JS yjs has in want: the
// same bytes, or — the same document reached through other merges of its structs encodes
// differently — the same state vector and JSON once JS yjs reads it.
func sameAsJS(t *testing.T, js *oracle.Client, who string, state []byte, roots map[string]oracle.RootType, want oracle.ApplyResult) {
	t.Helper()
	if bytes.Equal(state, want.State) {
		return
	}
	got, err := js.Apply(oracle.ApplyRequest{Updates: [][]byte{state}, Roots: roots})
	if err != nil {
		t.Fatalf("%s: JS yjs cannot read its document: %v", who, err)
	}
	if !bytes.Equal(got.StateVector, want.StateVector) || got.Pending {
		t.Errorf("%s: its document has other structs than JS yjs's (state vector or pending structs differ)", who)
	}
	if ok, diff := oracle.EqualJSON(got.JSON, want.JSON); !ok {
		t.Errorf("%s: its document differs from JS yjs's: %s", who, diff)
	}
}

// joinHocusOnce opens a Hocuspocus socket as a fresh provider does — authentication, then a
// SyncStep1 with the encoded empty state vector — and returns the SHA-256 of the payload of
// the node's SyncStep2, read as a stream: the joiner holds no copy of the document, so that
// what the process allocates meanwhile is the node's doing.
func joinHocusOnce(e *env) ([32]byte, error) {
	var sum [32]byte
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.hocusURL(), nil)
	if err != nil {
		return sum, err
	}
	defer ws.CloseNow()
	ws.SetReadLimit(64 << 20)
	for _, f := range [][]byte{authFrame(e.ns, "writer"), hocuspocus.AppendSync(nil, e.ns, hocuspocus.SyncStep1, []byte{0})} {
		if err := ws.Write(ctx, websocket.MessageBinary, f); err != nil {
			return sum, err
		}
	}
	for {
		_, r, err := ws.Reader(ctx)
		if err != nil {
			return sum, err
		}
		br := bufio.NewReaderSize(r, 4096)
		n, err := binary.ReadUvarint(br) // the address
		if err == nil {
			_, err = br.Discard(int(n))
		}
		var typ, sync, size uint64
		if err == nil {
			typ, err = binary.ReadUvarint(br)
		}
		if err == nil && typ == hocuspocus.TypeSync {
			sync, err = binary.ReadUvarint(br)
		}
		if err == nil && typ == hocuspocus.TypeSync && sync == hocuspocus.SyncStep2 {
			if size, err = binary.ReadUvarint(br); err == nil {
				h := sha256.New()
				if _, err = io.CopyN(h, br, int64(size)); err == nil {
					copy(sum[:], h.Sum(nil))
					ws.Close(websocket.StatusNormalClosure, "")
					return sum, nil
				}
			}
		}
		if err == nil {
			_, err = io.Copy(io.Discard, br)
		}
		if err != nil {
			return sum, err
		}
	}
}

// TestJoinStormHocuspocusSharesOneReply: Hocuspocus providers joining a large document at
// one state all get JS yjs's encodeStateAsUpdate of it, from one encoding held by the node,
// and the node queues that encoding behind each socket's frame head instead of copying it:
// the process allocates far less, while they join, than one copy of the document per joiner.
func TestJoinStormHocuspocusSharesOneReply(t *testing.T) {
	js := oracle.Start(t)
	e := newEnv(t, nil)
	d := stormHistory(t, e)
	if d == nil {
		return
	}
	const joiners = 12
	size, allocated := joinAtOneState(t, js, e, d, joiners, func() ([32]byte, error) { return joinHocusOnce(e) })
	t.Logf("%d providers joined a %d-byte document; the process allocated %d bytes meanwhile", joiners, size, allocated)
	// One copy per joiner would allocate joiners × the document; the heads, sockets and
	// frames of twelve joiners take a small fraction of that (the copy made two per joiner).
	if limit := uint64(joiners * size / 2); allocated > limit {
		t.Errorf("the process allocated %d bytes while %d providers joined a %d-byte document (at most %d without a copy per joiner)",
			allocated, joiners, size, limit)
	}
}
