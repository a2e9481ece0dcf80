package namespace_test

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// Chunked transfers (docs/protocol.md#bootstrap-steps, docs/protocol.md#sync_step2,
// docs/protocol.md#chunked-transfers) through the namespace layer, frame by frame: the hub's
// and the peer's sending and receiving of snapshots, sync diffs and live updates too large for
// one frame, the contract's codes for bad chunks, the assembly timeout, and the partial
// assemblies a close, a fence, a revocation or a lost connection discards.

// chunkConfig is the v2 generation with the small limits: chunks of 1 KiB, live updates of
// up to 8 KiB, snapshots and diffs of up to 16 KiB (as the binaries, larger than a live
// update), a window of 4.
func chunkConfig(t testing.TB) protocol.Config {
	c := wstest.SmallConfig(t)
	c.MaxInFlightUpdates = 4
	c.MaxChunkedBootstrapBytes, c.MaxChunkedSyncDiffBytes = 16<<10, 16<<10
	must(t, c.Validate())
	return c
}

var big5k = strings.Repeat("b", 5000)

// assembler is the wire's assembler of the transfers it receives (its clock never moves).
func (w *wire) assembler() *protocol.Assembler {
	if w.asm == nil {
		w.asm = protocol.NewAssembler(&w.cfg, clock.NewFake(epoch))
	}
	return w.asm
}

// recvTransfer receives frames until a chunked transfer of kind k is complete (its first
// chunk must carry bind) and returns it, with the other frames received meanwhile.
func (w *wire) recvTransfer(k protocol.ChunkKind, bind protocol.Binding) (protocol.Transfer, []protocol.Frame) {
	w.t.Helper()
	var others []protocol.Frame
	for {
		f := w.recv()
		c, ok := f.Message.(*protocol.UpdateChunk)
		if !ok {
			others = append(others, f)
			continue
		}
		if c.Kind != k {
			w.t.Fatalf("a %v chunk, want %v", c.Kind, k)
		}
		tr, err := w.assembler().Add(c, f.Sequence, bind)
		if err != nil {
			w.t.Fatalf("chunk %d of transfer %d: %v", c.ChunkIndex, c.TransferID, err)
		}
		if tr.Complete {
			return tr, others
		}
	}
}

// splitter prepares data as this side's next transfer of kind k on ns.
func (w *wire) splitter(k protocol.ChunkKind, ns protocol.NamespaceID, data []byte, bind protocol.Binding) *protocol.Splitter {
	w.t.Helper()
	tid, err := w.tids.Next(ns)
	must(w.t, err)
	sp, err := protocol.NewSplitter(&w.cfg, k, ns, tid, data, bind)
	must(w.t, err)
	return sp
}

// sendRest sends the remaining chunks of sp and returns the last one's sequence.
func (w *wire) sendRest(sp *protocol.Splitter) uint32 {
	w.t.Helper()
	var last uint32
	for c, ok := sp.Next(); ok; c, ok = sp.Next() {
		last = w.send(c)
	}
	return last
}

// sendFirst sends the first chunk of sp.
func (w *wire) sendFirst(sp *protocol.Splitter) {
	w.t.Helper()
	c, _ := sp.Next()
	w.send(c)
}

// hubAnswer receives the hub's answer to the peer's Step1 of round id: its diff (one frame,
// or a chunked transfer) and its own Step1, in either order (the diff may wait in the data
// lane while the Step1 goes ahead).
func hubAnswer(w *wire, id uint32) (diff []byte, diffSeq uint32, chunked bool, hub1 *protocol.SyncStep1, h1seq uint32) {
	w.t.Helper()
	for diff == nil || hub1 == nil {
		f := w.recv()
		switch m := f.Message.(type) {
		case *protocol.SyncStep2:
			diff, diffSeq = m.Update, f.Sequence
		case *protocol.SyncStep1:
			hub1, h1seq = m, f.Sequence
		case *protocol.UpdateChunk:
			tr, err := w.assembler().Add(m, f.Sequence, protocol.Binding{SyncRoundID: id})
			must(w.t, err)
			if tr.Complete {
				diff, diffSeq, chunked = tr.Data, tr.AckSequence, true
			}
		default:
			w.t.Fatalf("unexpected %s during the round", f.Type())
		}
	}
	return diff, diffSeq, chunked, hub1, h1seq
}

// TestS8_1_HubSendsAChunkedSnapshot: a snapshot over maxBootstrapBytes leaves as UPDATE_CHUNK
// frames of kind snapshot, the first carrying the OPEN_OK identity; BOOTSTRAP_ACK names the
// last chunk; chunked-snapshot-sent and -acked replace bootstrap-snapshot-sent
// (docs/protocol.md#bootstrap-steps, docs/protocol.md#events).
func TestS8_1_HubSendsAChunkedSnapshot(t *testing.T) {
	f := newNSHub(t, chunkConfig(t), persistence.Options{})
	ns, id := f.create()
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", big5k)))
	w := f.dial(peerID)
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	if ok, _ := expect[*protocol.OpenOK](w); ok.Mode != protocol.ModeBootstrap {
		t.Fatalf("OPEN_OK %+v", ok)
	}
	tr, others := w.recvTransfer(protocol.KindSnapshot, protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	if len(others) > 0 || tr.ChunkCount < 5 {
		t.Fatalf("%d chunks, other frames %s", tr.ChunkCount, types(others))
	}
	doc := newYDoc(t, 200)
	doc.apply(tr.Data)
	if doc.app()["big"] != big5k {
		t.Fatal("the snapshot lacks the document")
	}
	w.send(&protocol.BootstrapAck{NamespaceID: ns, AckedSequence: tr.AckSequence})
	f.round(w, ns, doc, 1)
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive)
	sent := eventsOf[observer.ChunkedSnapshotSent](f.rec, observer.SideHub)
	acked := eventsOf[observer.ChunkedSnapshotAcked](f.rec, observer.SideHub)
	if len(sent) != 1 || sent[0].TotalBytes != uint32(len(tr.Data)) || sent[0].ChunkCount != tr.ChunkCount || sent[0].TransferID != tr.TransferID {
		t.Fatalf("chunked-snapshot-sent %+v", sent)
	}
	if len(acked) != 1 || acked[0].Bytes != len(tr.Data) {
		t.Fatalf("chunked-snapshot-acked %+v", acked)
	}
	if n := f.rec.Count(observer.TypeBootstrapSnapshotSent); n != 0 {
		t.Fatalf("%d bootstrap-snapshot-sent for a chunked snapshot", n)
	}
}

// TestS9_2_HubChunkedDiffsBothWays: the hub's diff over maxSyncDiffBytes leaves as a chunked
// transfer bound to the round; the peer's arrives the same way and is applied once, then
// SYNC_APPLIED names its last chunk; chunked-sync-* replace the single-frame events.
func TestS9_2_HubChunkedDiffsBothWays(t *testing.T) {
	f := newNSHub(t, chunkConfig(t), persistence.Options{})
	ns, _ := f.create()
	w := f.dial(peerID)
	doc := newYDoc(t, 200)
	f.bootstrap(w, ns, doc)
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("hub", big5k)))
	doc.set("peer", strings.Repeat("p", 4000))
	w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: doc.sv()})
	diff, diffSeq, chunked, hub1, _ := hubAnswer(w, 1)
	if !chunked {
		t.Fatal("the hub's diff came in one frame")
	}
	doc.apply(diff)
	w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: 1, AckedSequence: diffSeq})
	last := w.sendRest(w.splitter(protocol.KindSyncDiff, ns, doc.diff(hub1.StateVector), protocol.Binding{SyncRoundID: 1}))
	if a, _ := expect[*protocol.SyncApplied](w); a.AckedSequence != last || a.SyncRoundID != 1 {
		t.Fatalf("SYNC_APPLIED %+v, want the last chunk %d", a, last)
	}
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive)
	if doc.app()["hub"] != big5k || appOf(t, f.reg, ns)["peer"] != strings.Repeat("p", 4000) {
		t.Fatal("the diffs did not apply")
	}
	applied := eventsOf[observer.ChunkedSyncApplied](f.rec, observer.SideHub)
	if len(applied) != 1 || applied[0].SyncRoundID != 1 || applied[0].ChunkCount < 4 {
		t.Fatalf("chunked-sync-applied %+v", applied)
	}
	if s, a := eventsOf[observer.ChunkedSyncSent](f.rec, observer.SideHub), eventsOf[observer.ChunkedSyncAcked](f.rec, observer.SideHub); len(s) != 1 || s[0].SyncRoundID != 1 || len(a) != 1 || a[0].Bytes != len(diff) {
		t.Fatalf("chunked-sync-sent %+v, -acked %+v", s, a)
	}
	if n, m := f.rec.Count(observer.TypeSyncStep2Sent), f.rec.Count(observer.TypeSyncDiffApplied); n+m != 0 {
		t.Fatalf("%d sync-step2-sent, %d sync-diff-applied for chunked diffs", n, m)
	}
	if n := f.nsl.Assemblies(); n != 0 {
		t.Fatalf("%d assemblies left", n)
	}
}

// TestS10_3_HubChunkedLiveUpdates: a live update over maxUpdateBytes goes chunked both ways,
// takes one window slot, and is acknowledged once, by its last chunk.
func TestS10_3_HubChunkedLiveUpdates(t *testing.T) {
	f := newNSHub(t, chunkConfig(t), persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("hub", big5k)))
	tr, _ := w.recvTransfer(protocol.KindLiveUpdate, protocol.Binding{})
	doc.apply(tr.Data)
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: tr.AckSequence})
	u := doc.set("peer", big5k)
	sp := w.splitter(protocol.KindLiveUpdate, ns, u, protocol.Binding{})
	last := w.sendRest(sp)
	if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != last {
		t.Fatalf("UPDATE_ACK %d, want the last chunk %d", ack.AckedSequence, last)
	}
	if appOf(t, f.reg, ns)["peer"] != big5k || doc.app()["hub"] != big5k {
		t.Fatal("not applied")
	}
	testkit.Eventually(t, wait, "chunked-update-acked", func() bool { return f.rec.Count(observer.TypeChunkedUpdateAcked) == 1 })
	if ap := eventsOf[observer.ChunkedUpdateApplied](f.rec, observer.SideHub); len(ap) != 1 || ap[0].ChunkCount != sp.ChunkCount() || ap[0].Bytes != len(u) {
		t.Fatalf("chunked-update-applied %+v", ap)
	}
	for _, typ := range []observer.Type{observer.TypeUpdateSent, observer.TypeUpdateApplied, observer.TypeUpdateAcked} {
		if n := f.rec.Count(typ); n != 0 {
			t.Fatalf("%d %s for chunked updates", n, typ)
		}
	}
}

// TestS10_3_HubRefusesBadChunks: every first-chunk and follow-up rule of
// docs/protocol.md#chunked-transfers with the contract's code per kind; the namespace fails
// and the connection goes on. Declared sizes over the caps are refused before anything is
// allocated for them.
func TestS10_3_HubRefusesBadChunks(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	one := []byte{1}
	for _, tc := range []struct {
		name string
		code protocol.ErrorCode
		// send sends the offending frames on a live namespace ns.
		send func(ns protocol.NamespaceID, doc *ydoc)
	}{
		{"totalBytes over the cap", protocol.CodeUpdateTransferTooLarge, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkCount: 64, TotalBytes: 1<<32 - 1, Bytes: one})
		}},
		{"chunkCount over the cap", protocol.CodeUpdateTransferTooLarge, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkCount: uint32(cfg.MaxChunksPerUpdate) + 1, TotalBytes: 100, Bytes: one})
		}},
		{"geometry", protocol.CodeUpdateTransferViolation, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkCount: 2, TotalBytes: 4000, Bytes: one})
		}},
		{"wrong index", protocol.CodeUpdateTransferViolation, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkCount: 3, TotalBytes: 2500, Bytes: make([]byte, 1024)})
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkIndex: 2, ChunkCount: 3, TotalBytes: 2500, Bytes: one})
		}},
		{"wrong count", protocol.CodeUpdateTransferViolation, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkCount: 3, TotalBytes: 2500, Bytes: make([]byte, 1024)})
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkIndex: 1, ChunkCount: 4, TotalBytes: 2500, Bytes: one})
		}},
		{"unknown transferId", protocol.CodeUpdateTransferViolation, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 7, ChunkIndex: 1, ChunkCount: 3, TotalBytes: 2500, Bytes: one})
		}},
		{"transferId not increasing", protocol.CodeUpdateTransferViolation, func(ns protocol.NamespaceID, doc *ydoc) {
			w.sendRest(w.splitter(protocol.KindLiveUpdate, ns, doc.set("a", big5k), protocol.Binding{}))
			expect[*protocol.UpdateAck](w)
			w.send(&protocol.UpdateChunk{NamespaceID: ns, TransferID: 1, ChunkCount: 3, TotalBytes: 2500, Bytes: make([]byte, 1024)})
		}},
		{"snapshot to the hub", protocol.CodeNamespaceStateViolation, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{Kind: protocol.KindSnapshot, NamespaceID: ns, TransferID: 1, ChunkCount: 1, TotalBytes: 1,
				ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1, Bytes: one})
		}},
		{"diff outside a round", protocol.CodeSyncStateViolation, func(ns protocol.NamespaceID, _ *ydoc) {
			w.send(&protocol.UpdateChunk{Kind: protocol.KindSyncDiff, NamespaceID: ns, TransferID: 1, ChunkCount: 1, TotalBytes: 1, SyncRoundID: 1, Bytes: one})
		}},
		{"diff over the cap", protocol.CodeSyncTransferTooLarge, func(ns protocol.NamespaceID, doc *ydoc) {
			w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 2, StateVector: doc.sv()})
			hubAnswer(w, 2)
			w.send(&protocol.UpdateChunk{Kind: protocol.KindSyncDiff, NamespaceID: ns, TransferID: 1, ChunkCount: 17, TotalBytes: 17000, SyncRoundID: 2, Bytes: one})
		}},
		{"diff of another round", protocol.CodeSyncStateViolation, func(ns protocol.NamespaceID, doc *ydoc) {
			w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 2, StateVector: doc.sv()})
			hubAnswer(w, 2)
			w.send(&protocol.UpdateChunk{Kind: protocol.KindSyncDiff, NamespaceID: ns, TransferID: 1, ChunkCount: 1, TotalBytes: 1, SyncRoundID: 3, Bytes: one})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, doc := f.liveNS(w, 200)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			tc.send(ns, doc)
			w.expectError(ns, tc.code)
			runtime.ReadMemStats(&ms)
			if grew := ms.TotalAlloc - before; grew > 64<<20 {
				t.Errorf("%d bytes allocated for a refused transfer", grew)
			}
			waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedProtocolViolation)
			w.quiet()
			if n := f.nsl.Assemblies(); n != 0 {
				t.Fatalf("%d assemblies left", n)
			}
		})
	}
	if n := f.rec.Count(observer.TypeChunkedUpdateAborted) + f.rec.Count(observer.TypeChunkedSyncAborted); n != 0 {
		t.Fatalf("%d aborted events for failed namespaces", n)
	}
}

// TestS17_AssembliesPerConnection: a first chunk beyond maxConcurrentAssembliesPerConnection
// fails its namespace with the kind's VIOLATION; the connection and the other transfers go
// on.
func TestS17_AssembliesPerConnection(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	var sps []*protocol.Splitter
	var nss []protocol.NamespaceID
	for i := range cfg.MaxConcurrentAssembliesPerConnection + 1 {
		ns, doc := f.liveNS(w, uint32(200+i))
		sps = append(sps, w.splitter(protocol.KindLiveUpdate, ns, doc.set("x", big5k), protocol.Binding{}))
		nss = append(nss, ns)
	}
	for _, sp := range sps {
		w.sendFirst(sp)
	}
	extra := nss[len(nss)-1]
	w.expectError(extra, protocol.CodeUpdateTransferViolation)
	if n := f.nsl.Assemblies(); n != int64(cfg.MaxConcurrentAssembliesPerConnection) {
		t.Fatalf("%d assemblies", n)
	}
	for i, sp := range sps[:len(sps)-1] {
		last := w.sendRest(sp)
		if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != last || ack.NamespaceID != nss[i] {
			t.Fatalf("ack %+v", ack)
		}
	}
	testkit.Eventually(t, wait, "no assembly left", func() bool { return f.nsl.Assemblies() == 0 })
}

// TestS18_HubAssemblyTimeout: a live update's assembly that stalls for assemblyTimeoutMs is
// discarded (chunked-update-aborted{timeout}) and declared with
// RESYNC_REQUIRED{UPDATE_TRANSFER_EXPIRED}, non-terminal: the rest of its chunks are dropped
// and the next round repairs. A stalled diff gives up its round with SYNC_TRANSFER_EXPIRED
// and the peer's next round completes (docs/protocol.md#timeouts).
func TestS18_HubAssemblyTimeout(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)

	t.Run("live update", func(t *testing.T) {
		ns, doc := f.liveNS(w, 200)
		sp := w.splitter(protocol.KindLiveUpdate, ns, doc.set("x", big5k), protocol.Binding{})
		w.sendFirst(sp)
		testkit.Eventually(t, wait, "assembly", func() bool { return f.nsl.Assemblies() == 1 })
		f.clk.Advance(cfg.AssemblyTimeout)
		if r, _ := expect[*protocol.ResyncRequired](w); r.ReasonCode != protocol.ResyncUpdateTransferExpired || r.NamespaceID != ns {
			t.Fatalf("RESYNC_REQUIRED %+v", r)
		}
		ab := eventsOf[observer.ChunkedUpdateAborted](f.rec, observer.SideHub)
		if len(ab) != 1 || ab[0].Reason != observer.AbortTimeout || ab[0].ReceivedChunks != 1 || ab[0].ReceivedBytes != cfg.MaxUpdateBytes {
			t.Fatalf("chunked-update-aborted %+v", ab)
		}
		if n := f.nsl.Assemblies(); n != 0 {
			t.Fatalf("%d assemblies", n)
		}
		w.sendRest(sp) // sent before the peer learnt: dropped
		w.quiet()
		f.round(w, ns, doc, 2)
		waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
			observer.ChannelReconciling, observer.ChannelLive, observer.ChannelNeedsResync, observer.ChannelReconciling,
			observer.ChannelLive)
		if appOf(t, f.reg, ns)["x"] != big5k {
			t.Fatal("the round did not repair")
		}
	})
	t.Run("sync diff", func(t *testing.T) {
		ns, _ := f.create()
		doc := newYDoc(t, 201)
		f.bootstrap(w, ns, doc)
		doc.set("x", big5k)
		w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 3, StateVector: doc.sv()})
		diff, diffSeq, _, hub1, _ := hubAnswer(w, 3)
		doc.apply(diff)
		w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: 3, AckedSequence: diffSeq})
		sp := w.splitter(protocol.KindSyncDiff, ns, doc.diff(hub1.StateVector), protocol.Binding{SyncRoundID: 3})
		w.sendFirst(sp)
		testkit.Eventually(t, wait, "assembly", func() bool { return f.nsl.Assemblies() == 1 })
		f.clk.Advance(cfg.AssemblyTimeout)
		if r, _ := expect[*protocol.ResyncRequired](w); r.ReasonCode != protocol.ResyncSyncTransferExpired {
			t.Fatalf("RESYNC_REQUIRED %+v", r)
		}
		if ab := eventsOf[observer.ChunkedSyncAborted](f.rec, observer.SideHub); len(ab) != 1 || ab[0].Reason != observer.AbortTimeout {
			t.Fatalf("chunked-sync-aborted %+v", ab)
		}
		w.sendRest(sp) // sent before the peer learnt: dropped
		w.quiet()
		f.round(w, ns, doc, 4)
		waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
			observer.ChannelReconciling, observer.ChannelNeedsResync, observer.ChannelReconciling, observer.ChannelLive)
		if appOf(t, f.reg, ns)["x"] != big5k {
			t.Fatal("the next round did not repair")
		}
	})
}

// TestS10_3_HubTeardownDiscardsAssemblies: a close, an epoch bump, a revocation and a lost
// connection each end a partial assembly cleanly: reported with their reason (a revocation
// fails the namespace, which namespace-failed reports instead), and none is left.
func TestS10_3_HubTeardownDiscardsAssemblies(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w, hubEnd := f.dialEnds(peerID, 256)
	partial := func(client uint32) protocol.NamespaceID {
		ns, doc := f.liveNS(w, client)
		w.sendFirst(w.splitter(protocol.KindLiveUpdate, ns, doc.set("x", big5k), protocol.Binding{}))
		testkit.Eventually(t, wait, "assembly", func() bool { return f.nsl.Assemblies() == 1 })
		return ns
	}
	// aborts returns the chunked-update-aborted events once there are n: they follow the
	// frame that ended the namespace on the hub's goroutine.
	aborts := func(n int) []observer.ChunkedUpdateAborted {
		testkit.Eventually(t, wait, "chunked-update-aborted", func() bool {
			return len(eventsOf[observer.ChunkedUpdateAborted](f.rec, observer.SideHub)) >= n
		})
		return eventsOf[observer.ChunkedUpdateAborted](f.rec, observer.SideHub)
	}

	ns := partial(200)
	w.send(&protocol.CloseNamespace{NamespaceID: ns, ReasonCode: "remove"})
	expect[*protocol.CloseOK](w)
	if ab := aborts(1); len(ab) != 1 || ab[0].Reason != observer.AbortChannelTeardown || ab[0].NamespaceID != ns.String() {
		t.Fatalf("after CLOSE: %+v", ab)
	}

	ns = partial(201)
	_, err := f.lease(ns).BumpEpoch(ctxT(t))
	must(t, err)
	expect[*protocol.IdentityChanged](w)
	if ab := aborts(2); len(ab) != 2 || ab[1].Reason != observer.AbortEpochFence {
		t.Fatalf("after the epoch bump: %+v", ab)
	}

	ns = partial(202)
	f.table.Revoke(auth.PeerRevocation{PeerInstanceID: peerID, Namespaces: []protocol.NamespaceID{ns}})
	w.expectError(ns, protocol.CodeNamespaceUnauthorized)
	waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedApplyRefused)
	if ab := aborts(2); len(ab) != 2 {
		t.Fatalf("a revocation reported an abort: %+v", ab)
	}
	if n := f.nsl.Assemblies(); n != 0 {
		t.Fatalf("%d assemblies after the revocation", n)
	}

	ns = partial(203)
	hubEnd.Drop()
	testkit.Eventually(t, wait, "the connection's assembly discarded", func() bool { return f.nsl.Assemblies() == 0 })
	if ab := aborts(3); len(ab) != 3 || ab[2].Reason != observer.AbortConnectionTeardown || ab[2].NamespaceID != ns.String() {
		t.Fatalf("after the connection dropped: %+v", ab)
	}
}

// TestS8_1_HubCloseStopsTheSnapshot: a CLOSE_NAMESPACE during a chunked snapshot stops it:
// the chunks not yet handed to the writer are never sent.
func TestS8_1_HubCloseStopsTheSnapshot(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	ns, _ := f.create()
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", strings.Repeat("s", 7500))))
	w, _ := f.dialEnds(peerID, 1) // the hub's writer blocks: the pump pauses at the high watermark
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	expect[*protocol.OpenOK](w)
	first := w.recv().Message.(*protocol.UpdateChunk)
	w.send(&protocol.CloseNamespace{NamespaceID: ns, ReasonCode: "remove"})
	// Read on only once the hub took the close: reading lets the paused pump go on.
	testkit.Eventually(t, wait, "closing", func() bool {
		return slices.Contains(channelPath(f.rec, observer.SideHub, ns), observer.ChannelClosing)
	})
	got := 1
	for {
		f := w.recv()
		if _, ok := f.Message.(*protocol.CloseOK); ok {
			break
		}
		if _, ok := f.Message.(*protocol.UpdateChunk); !ok {
			t.Fatalf("unexpected %s", f.Type())
		}
		got++
	}
	w.quiet()
	if got >= int(first.ChunkCount) {
		t.Fatalf("all %d chunks were sent after the close", got)
	}
	if n := f.rec.Count(observer.TypeChunkedSnapshotSent); n != 0 {
		t.Fatalf("%d chunked-snapshot-sent for a stopped transfer", n)
	}
}

// TestS9_4_ResyncWaitsForTheRoundsEnd: a loss found during a round (here the unsent queue's
// overflow while a chunked diff is under way) is declared when the round ends, not during
// it: RESYNC_REQUIRED makes the remote discard every partial assembly of the namespace.
func TestS9_4_ResyncWaitsForTheRoundsEnd(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	doc.set("x", big5k)
	w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 2, StateVector: doc.sv()})
	diff, diffSeq, _, hub1, _ := hubAnswer(w, 2)
	doc.apply(diff)
	sp := w.splitter(protocol.KindSyncDiff, ns, doc.diff(hub1.StateVector), protocol.Binding{SyncRoundID: 2})
	w.sendFirst(sp)
	local := newYDoc(t, 100)
	for i := 0; i*600 <= cfg.MaxQueuedUpdateBytes; i++ {
		must(t, writeLocal(t, f.reg, ns, local.set(strings.Repeat("k", i+1), strings.Repeat("v", 600))))
	}
	testkit.Eventually(t, wait, "resync-required", func() bool { return len(eventsOf[observer.ResyncRequired](f.rec, observer.SideHub)) == 1 })
	w.quiet() // no RESYNC_REQUIRED yet
	w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: 2, AckedSequence: diffSeq})
	last := w.sendRest(sp)
	if a, _ := expect[*protocol.SyncApplied](w); a.AckedSequence != last {
		t.Fatalf("SYNC_APPLIED %+v", a)
	}
	if r, _ := expect[*protocol.ResyncRequired](w); r.ReasonCode != protocol.ResyncSendQueueOverflow {
		t.Fatalf("RESYNC_REQUIRED %+v", r)
	}
	f.round(w, ns, doc, 3)
	if got := doc.app(); got["k"] != strings.Repeat("v", 600) {
		t.Fatal("the next round did not repair")
	}
}

// TestS8_1_PeerImportsAChunkedSnapshot: the peer assembles a chunked snapshot, shows its
// progress on the target while it arrives, imports it once complete and acknowledges the
// last chunk; chunked-snapshot-applied replaces bootstrap-imported.
func TestS8_1_PeerImportsAChunkedSnapshot(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, _ := f.create()
	snap := f.bigSnapshot(ns, big5k)
	f.target(ns)
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	sp := w.splitter(protocol.KindSnapshot, ns, snap, protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	w.sendFirst(sp)
	testkit.Eventually(t, wait, "progress", func() bool {
		st, _ := f.tc.Target(ns.String())
		return st.Progress != nil && *st.Progress == namespace.TransferProgress{Kind: protocol.KindSnapshot, BytesReceived: cfg.MaxUpdateBytes, TotalBytes: len(snap)}
	})
	if n := f.tc.Assemblies(); n != 1 {
		t.Fatalf("%d assemblies", n)
	}
	last := w.sendRest(sp)
	if ack, _ := expect[*protocol.BootstrapAck](w); ack.AckedSequence != last {
		t.Fatalf("BOOTSTRAP_ACK %d, want the last chunk %d", ack.AckedSequence, last)
	}
	if st, _ := f.tc.Target(ns.String()); st.Progress != nil {
		t.Fatalf("progress after the import %+v", st.Progress)
	}
	hubDoc := newYDoc(t, 300)
	hubDoc.apply(snap)
	f.hubRound(w, ns, hubDoc)
	f.waitState(ns, observer.ChannelLive)
	if f.peerApp(ns)["big"] != big5k {
		t.Fatal("not imported")
	}
	ap := eventsOf[observer.ChunkedSnapshotApplied](f.rec, observer.SidePeer)
	if len(ap) != 1 || ap[0].Bytes != len(snap) || ap[0].ChunkCount != sp.ChunkCount() {
		t.Fatalf("chunked-snapshot-applied %+v", ap)
	}
	if n := f.rec.Count(observer.TypeBootstrapImported); n != 0 {
		t.Fatalf("%d bootstrap-imported", n)
	}
}

// TestS8_1_PeerSnapshotStall: a chunked snapshot that stalls for assemblyTimeoutMs fails the
// bootstrap like its timer (bootstrap-timeout, with the assembly timeout, no frame) and the
// peer rebuilds the connection, on which the bootstrap completes.
func TestS8_1_PeerSnapshotStall(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, _ := f.create()
	snap := f.bigSnapshot(ns, big5k)
	f.target(ns)
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	bind := protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch}
	w.sendFirst(w.splitter(protocol.KindSnapshot, ns, snap, bind))
	testkit.Eventually(t, wait, "assembly", func() bool { return f.tc.Assemblies() == 1 })
	f.clk.Advance(cfg.AssemblyTimeout)
	nf := waitFailed(t, f.rec, observer.SidePeer, ns, observer.FailedBootstrapTimeout)
	if ms, _ := nf.TimeoutMs.Get(); ms != uint64(cfg.AssemblyTimeout.Milliseconds()) {
		t.Fatalf("namespace-failed %+v", nf)
	}
	if ab := eventsOf[observer.ChunkedSnapshotAborted](f.rec, observer.SidePeer); len(ab) != 1 || ab[0].Reason != observer.AbortTimeout {
		t.Fatalf("chunked-snapshot-aborted %+v", ab)
	}
	w = f.reconnect()
	if !slices.Contains(f.backoffReasons(), observer.BackoffNamespaceRecovery) {
		t.Fatalf("backoff %v", f.backoffReasons())
	}
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	last := w.sendRest(w.splitter(protocol.KindSnapshot, ns, snap, bind))
	if ack, _ := expect[*protocol.BootstrapAck](w); ack.AckedSequence != last {
		t.Fatalf("BOOTSTRAP_ACK %d", ack.AckedSequence)
	}
	if n := f.tc.Assemblies(); n != 0 {
		t.Fatalf("%d assemblies", n)
	}
}

// TestS8_1_PeerSnapshotChunkChecks: a first snapshot chunk must carry the OPEN_OK identity
// (REPLICATION_ID_MISMATCH, conflicted) and stay within maxChunkedBootstrapBytes
// (SNAPSHOT_TRANSFER_TOO_LARGE).
func TestS8_1_PeerSnapshotChunkChecks(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, _ := f.create()
	ns2, id2, _ := f.create()
	f.target(ns)
	f.target(ns2)
	w := f.connect()
	for range 2 {
		o, _ := expect[*protocol.OpenNamespace](w)
		i := id
		if o.NamespaceID == ns2 {
			i = id2
		}
		w.send(&protocol.OpenOK{NamespaceID: o.NamespaceID, Mode: protocol.ModeBootstrap, ReplicationID: i.ReplicationID, ReplicationEpoch: i.Epoch})
	}
	f.waitState(ns2, observer.ChannelBootstrapping)
	w.send(&protocol.UpdateChunk{Kind: protocol.KindSnapshot, NamespaceID: ns, TransferID: 1, ChunkCount: 1, TotalBytes: 1,
		ReplicationID: "ffffffffffffffffffffffffffffffff", ReplicationEpoch: id.Epoch, Bytes: []byte{0}})
	w.expectError(ns, protocol.CodeReplicationIDMismatch)
	f.waitState(ns, observer.ChannelConflicted)
	w.send(&protocol.UpdateChunk{Kind: protocol.KindSnapshot, NamespaceID: ns2, TransferID: 1, ChunkCount: 17, TotalBytes: 17000,
		ReplicationID: id2.ReplicationID, ReplicationEpoch: id2.Epoch, Bytes: []byte{0}})
	w.expectError(ns2, protocol.CodeSnapshotTransferTooLarge)
	f.waitState(ns2, observer.ChannelFailed)
}

// TestS9_2_PeerChunkedDiffsBothWays: after a reconnection, the diff the peer lacks arrives
// chunked and shows as progress while it does; the peer's own large diff leaves chunked,
// bound to its round.
func TestS9_2_PeerChunkedDiffsBothWays(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, w, hubDoc := f.liveTarget()
	w.end.(*wstest.End).Drop()
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 400).set("peer", big5k))) // offline
	hubDoc.set("hub", big5k)                                              // meanwhile
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	s1, s1seq := expect[*protocol.SyncStep1](w)
	sp := w.splitter(protocol.KindSyncDiff, ns, hubDoc.diff(s1.StateVector), protocol.Binding{SyncRoundID: s1.SyncRoundID})
	w.sendFirst(sp)
	testkit.Eventually(t, wait, "progress", func() bool {
		st, _ := f.tc.Target(ns.String())
		return st.Progress != nil && st.Progress.Kind == protocol.KindSyncDiff && st.Progress.BytesReceived == cfg.MaxUpdateBytes
	})
	last := w.sendRest(sp)
	h1seq := w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: s1.SyncRoundID, StateVector: hubDoc.sv()})
	_ = s1seq
	var gotApplied, gotDiff bool
	for !gotApplied || !gotDiff {
		fr := w.recv()
		switch m := fr.Message.(type) {
		case *protocol.SyncApplied:
			if m.AckedSequence != last {
				t.Fatalf("SYNC_APPLIED %d, want the last chunk %d", m.AckedSequence, last)
			}
			gotApplied = true
		case *protocol.UpdateChunk:
			tr, err := w.assembler().Add(m, fr.Sequence, protocol.Binding{SyncRoundID: s1.SyncRoundID})
			must(t, err)
			if tr.Complete {
				hubDoc.apply(tr.Data)
				w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: s1.SyncRoundID, AckedSequence: tr.AckSequence})
				gotDiff = true
			}
		default:
			t.Fatalf("unexpected %s (Step1 at %d)", fr.Type(), h1seq)
		}
	}
	f.waitState(ns, observer.ChannelLive)
	if hubDoc.app()["peer"] != big5k || f.peerApp(ns)["hub"] != big5k {
		t.Fatal("not reconciled")
	}
	for _, typ := range []observer.Type{observer.TypeChunkedSyncSent, observer.TypeChunkedSyncApplied, observer.TypeChunkedSyncAcked} {
		if n := f.rec.Count(typ); n != 1 {
			t.Fatalf("%d %s", n, typ)
		}
	}
}

// bigSnapshot writes app[big] = v into ns in the hub source registry and returns the new
// snapshot.
func (f *nsPeer) bigSnapshot(ns protocol.NamespaceID, v string) []byte {
	f.t.Helper()
	must(f.t, writeLocal(f.t, f.hubs.reg, ns, newYDoc(f.t, 100).set("big", v)))
	l, err := f.hubs.reg.Open(ctxT(f.t), owner, ns.String())
	must(f.t, err)
	defer l.Release()
	snap, err := l.EncodeState(ctxT(f.t), nil)
	must(f.t, err)
	return snap
}
