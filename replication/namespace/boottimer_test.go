package namespace_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
)

// The bootstrap timer (bootstrapTimeoutMs, docs/protocol.md#timeouts) while a chunked snapshot
// (docs/protocol.md#bootstrap-steps) moves: it does not end a bootstrap whose snapshot keeps
// moving, however long the transfer takes; a snapshot that stops moving, or never starts,
// still ends it. The single-frame cases are TestS8_HubBootstrapTimeout and
// TestS18_PeerTimeoutsRebuildTheConnection.

// slowSnapshotConfig is chunkConfig with room for snapshots of up to 48 chunks, and no ping
// for an hour: these tests move the fake clock by minutes faster than a ping's answer,
// which comes back on another goroutine, would be taken.
func slowSnapshotConfig(t testing.TB) protocol.Config {
	c := chunkConfig(t)
	c.MaxChunkedBootstrapBytes = 48 << 10
	c.PingInterval = time.Hour
	must(t, c.Validate())
	return c
}

// TestS8_1_HubBootstrapOutlastsItsTimerWhileTheSnapshotLeaves: the peer reads a chunked
// snapshot slowly, so its chunks leave the hub over more than twice bootstrapTimeoutMs; the
// bootstrap is not timed out, and completes with the peer's BOOTSTRAP_ACK.
func TestS8_1_HubBootstrapOutlastsItsTimerWhileTheSnapshotLeaves(t *testing.T) {
	cfg := slowSnapshotConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	ns, id := f.create()
	big := strings.Repeat("s", 40000)
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", big)))
	w, _ := f.dialEnds(peerID, 1) // the hub's writer blocks: chunks leave as the peer reads
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	expect[*protocol.OpenOK](w)
	bind := protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch}
	step := cfg.BootstrapTimeout / 3
	var elapsed time.Duration
	var tr protocol.Transfer
	for !tr.Complete {
		fr := w.recv()
		c, ok := fr.Message.(*protocol.UpdateChunk)
		if !ok || c.Kind != protocol.KindSnapshot {
			t.Fatalf("got %s during the snapshot", fr.Type())
		}
		var err error
		tr, err = w.assembler().Add(c, fr.Sequence, bind)
		must(t, err)
		// Time passes while the hub still has chunks to hand to its writer.
		if f.rec.Count(observer.TypeChunkedSnapshotSent) == 0 {
			f.clk.Advance(step)
			elapsed += step
		}
	}
	if elapsed <= 2*cfg.BootstrapTimeout {
		t.Fatalf("the snapshot left within %v: the test needs more than twice bootstrapTimeoutMs", elapsed)
	}
	doc := newYDoc(t, 200)
	doc.apply(tr.Data)
	if doc.app()["big"] != big {
		t.Fatal("the snapshot lacks the document")
	}
	w.send(&protocol.BootstrapAck{NamespaceID: ns, AckedSequence: tr.AckSequence})
	f.round(w, ns, doc, 1)
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive)
	if fs := eventsOf[observer.NamespaceFailed](f.rec, observer.SideHub); len(fs) != 0 {
		t.Fatalf("namespace-failed %+v", fs)
	}
}

// TestS8_1_HubTimesOutASnapshotThatNeverStarts: with room for one transfer at a time on
// the connection, one namespace's snapshot is leaving (slowly: the peer does not read) while
// the other's waits. At bootstrapTimeoutMs the waiting one times out as a single-frame
// snapshot does (bootstrap-timeout, no wire frame); the leaving one does not, and completes.
func TestS8_1_HubTimesOutASnapshotThatNeverStarts(t *testing.T) {
	cfg := slowSnapshotConfig(t)
	cfg.MaxConcurrentAssembliesPerConnection = 1
	must(t, cfg.Validate())
	f := newNSHub(t, cfg, persistence.Options{})
	leaving, lid := f.create()
	waiting, _ := f.create()
	big := strings.Repeat("s", 40000)
	must(t, writeLocal(t, f.reg, leaving, newYDoc(t, 100).set("big", big)))
	must(t, writeLocal(t, f.reg, waiting, newYDoc(t, 101).set("big", big)))
	w, _ := f.dialEnds(peerID, 1)
	w.send(&protocol.OpenNamespace{NamespaceID: leaving})
	expect[*protocol.OpenOK](w)
	frames := []protocol.Frame{w.recv()} // the first chunk: the transfer is under way
	w.send(&protocol.OpenNamespace{NamespaceID: waiting})
	testkit.Eventually(t, wait, "the second bootstrap", func() bool {
		return slices.Contains(channelPath(f.rec, observer.SideHub, waiting), observer.ChannelBootstrapping)
	})
	frames = append(frames, w.barrier()...) // both timers are armed
	gotOpen := false
	for _, fr := range frames {
		switch m := fr.Message.(type) {
		case *protocol.OpenOK:
			gotOpen = gotOpen || m.NamespaceID == waiting
		case *protocol.UpdateChunk:
			if m.NamespaceID != leaving {
				t.Fatalf("a chunk of %s while the other transfer is in progress", m.NamespaceID)
			}
		default:
			t.Fatalf("unexpected %s", fr.Type())
		}
	}
	if !gotOpen {
		t.Fatalf("no OPEN_OK for the second namespace in %s", types(frames))
	}
	if f.rec.Count(observer.TypeChunkedSnapshotSent) != 0 {
		t.Fatal("the first snapshot left whole: the test needs it in progress")
	}

	f.clk.Advance(cfg.BootstrapTimeout)
	ev := waitFailed(t, f.rec, observer.SideHub, waiting, observer.FailedBootstrapTimeout)
	if ms, ok := ev.TimeoutMs.Get(); !ok || ms != uint64(cfg.BootstrapTimeout/time.Millisecond) {
		t.Fatalf("timeoutMs %v", ev.TimeoutMs)
	}
	if errs := nsErrors(f.rec, observer.SideHub, waiting); len(errs) != 0 {
		t.Fatalf("a timeout sent a namespace ERROR: %v", errs)
	}

	// The snapshot in progress goes on and completes.
	bind := protocol.Binding{ReplicationID: lid.ReplicationID, ReplicationEpoch: lid.Epoch}
	var tr protocol.Transfer
	for _, fr := range frames {
		if c, ok := fr.Message.(*protocol.UpdateChunk); ok {
			var err error
			tr, err = w.assembler().Add(c, fr.Sequence, bind)
			must(t, err)
		}
	}
	if !tr.Complete {
		var others []protocol.Frame
		tr, others = w.recvTransfer(protocol.KindSnapshot, bind)
		if len(others) > 0 {
			t.Fatalf("unexpected %s", types(others))
		}
	}
	doc := newYDoc(t, 200)
	doc.apply(tr.Data)
	w.send(&protocol.BootstrapAck{NamespaceID: leaving, AckedSequence: tr.AckSequence})
	f.round(w, leaving, doc, 1)
	waitPath(t, f.rec, observer.SideHub, leaving, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive)
	if doc.app()["big"] != big {
		t.Fatal("the snapshot lacks the document")
	}
}

// TestS8_1_HubTimesOutAChunkedSnapshotNotAcknowledged: once the last chunk has left, the
// peer has bootstrapTimeoutMs to acknowledge the snapshot.
func TestS8_1_HubTimesOutAChunkedSnapshotNotAcknowledged(t *testing.T) {
	cfg := chunkConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	ns, id := f.create()
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", big5k)))
	w := f.dial(peerID)
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	expect[*protocol.OpenOK](w)
	w.recvTransfer(protocol.KindSnapshot, protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	w.quiet() // the last chunk's timer is armed
	f.clk.Advance(cfg.BootstrapTimeout - time.Millisecond)
	w.quiet()
	if p := channelPath(f.rec, observer.SideHub, ns); p[len(p)-1] != observer.ChannelBootstrapping {
		t.Fatalf("channel path %v before bootstrapTimeoutMs", p)
	}
	f.clk.Advance(time.Millisecond)
	ev := waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedBootstrapTimeout)
	if ms, ok := ev.TimeoutMs.Get(); !ok || ms != uint64(cfg.BootstrapTimeout/time.Millisecond) {
		t.Fatalf("timeoutMs %v", ev.TimeoutMs)
	}
	w.quiet()
}

// sendChunk sends the next chunk of sp to the peer and waits until the peer received it
// (its progress shows received bytes); the last chunk is not waited for.
func sendChunk(t *testing.T, f *nsPeer, w *wire, ns protocol.NamespaceID, sp *protocol.Splitter, total int) uint32 {
	t.Helper()
	c, ok := sp.Next()
	if !ok {
		t.Fatal("no chunk left")
	}
	seq := w.send(c)
	if sp.Remaining() == 0 {
		return seq
	}
	want := namespace.TransferProgress{Kind: protocol.KindSnapshot, BytesReceived: int(c.ChunkIndex+1) * f.cfg.MaxUpdateBytes, TotalBytes: total}
	testkit.Eventually(t, wait, "the chunk received", func() bool {
		st, _ := f.tc.Target(ns.String())
		return st.Progress != nil && *st.Progress == want
	})
	return seq
}

// TestS8_1_PeerBootstrapOutlastsItsTimerWhileTheSnapshotArrives: the snapshot's chunks
// arrive one every two thirds of assemblyTimeoutMs, over more than twice
// bootstrapTimeoutMs; the peer imports it and acknowledges it on its first connection.
func TestS8_1_PeerBootstrapOutlastsItsTimerWhileTheSnapshotArrives(t *testing.T) {
	cfg := slowSnapshotConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, _ := f.create()
	big := strings.Repeat("s", 12000)
	snap := f.bigSnapshot(ns, big)
	f.target(ns)
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	sp := w.splitter(protocol.KindSnapshot, ns, snap, protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	step := cfg.AssemblyTimeout * 2 / 3
	if d := time.Duration(sp.ChunkCount()-1) * step; d <= 2*cfg.BootstrapTimeout {
		t.Fatalf("the snapshot arrives within %v: the test needs more than twice bootstrapTimeoutMs", d)
	}
	last := sendChunk(t, f, w, ns, sp, len(snap))
	for sp.Remaining() > 0 {
		f.clk.Advance(step)
		last = sendChunk(t, f, w, ns, sp, len(snap))
	}
	if ack, _ := expect[*protocol.BootstrapAck](w); ack.AckedSequence != last {
		t.Fatalf("BOOTSTRAP_ACK %d, want the last chunk %d", ack.AckedSequence, last)
	}
	hubDoc := newYDoc(t, 300)
	hubDoc.apply(snap)
	f.hubRound(w, ns, hubDoc)
	f.waitState(ns, observer.ChannelLive)
	if f.peerApp(ns)["big"] != big {
		t.Fatal("not imported")
	}
	if fs := eventsOf[observer.NamespaceFailed](f.rec, observer.SidePeer); len(fs) != 0 {
		t.Fatalf("namespace-failed %+v", fs)
	}
	if f.conns != 1 {
		t.Fatalf("%d connections", f.conns)
	}
}

// TestS8_1_PeerBootstrapTimesOutWhenTheSnapshotStops: with an assemblyTimeoutMs longer than
// bootstrapTimeoutMs, a snapshot whose chunks stop arriving is ended by the bootstrap timer,
// the first time it fires with no chunk received since it was armed (bootstrap-timeout with
// bootstrapTimeoutMs). With T = bootstrapTimeoutMs, chunks at 0, T/3, 2T/3 and just after T:
// the timer fires at T (chunks came: armed again), at 2T (the chunk after T came: armed
// again), and at 3T (nothing came) it ends the bootstrap.
func TestS8_1_PeerBootstrapTimesOutWhenTheSnapshotStops(t *testing.T) {
	cfg := slowSnapshotConfig(t)
	cfg.AssemblyTimeout = 4 * cfg.BootstrapTimeout
	must(t, cfg.Validate())
	f := newNSPeer(t, cfg)
	ns, id, _ := f.create()
	snap := f.bigSnapshot(ns, strings.Repeat("s", 12000))
	f.target(ns)
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	sp := w.splitter(protocol.KindSnapshot, ns, snap, protocol.Binding{ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	T := cfg.BootstrapTimeout
	// rearmed moves the clock by d, over the bootstrap timer's deadline, and waits until the
	// timer is armed again: it runs on the connection's goroutine after Advance returns.
	rearmed := func(d time.Duration) {
		t.Helper()
		n := f.clk.Pending()
		f.clk.Advance(d)
		if !f.clk.WaitForTimers(n, wait) {
			t.Fatalf("the bootstrap timer was not armed again (%s)", f.state(ns))
		}
	}
	sendChunk(t, f, w, ns, sp, len(snap))
	for range 2 {
		f.clk.Advance(T / 3)
		sendChunk(t, f, w, ns, sp, len(snap))
	}
	rearmed(T / 3)
	sendChunk(t, f, w, ns, sp, len(snap))
	rearmed(T)
	f.clk.Advance(T - time.Millisecond)
	w.quiet()
	if s := f.state(ns); s != observer.ChannelBootstrapping {
		t.Fatalf("state %s before the timer", s)
	}
	f.clk.Advance(time.Millisecond)
	if code, ec := w.expectClose(); code != protocol.CloseGoingAway || ec != "" {
		t.Fatalf("close %d %q, want 1001 without ERROR", code, ec)
	}
	ev := waitFailed(t, f.rec, observer.SidePeer, ns, observer.FailedBootstrapTimeout)
	if ms, _ := ev.TimeoutMs.Get(); ms != uint64(T/time.Millisecond) {
		t.Fatalf("timeoutMs %v, want bootstrapTimeoutMs", ev.TimeoutMs)
	}
	if len(nsErrors(f.rec, observer.SidePeer, ns)) != 0 {
		t.Fatal("a timeout sent a namespace ERROR")
	}
}
