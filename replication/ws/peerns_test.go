package ws_test

import (
	"testing"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// TestS16_PeerBootstrapRoundLivePeriodic drives a target through §16 frame by frame against
// a hand-played hub: targeted → opening (OPEN without a replica) → bootstrapping (the
// snapshot imported under the target's owner, BOOTSTRAP_ACK with the snapshot's sequence)
// → reconciling (a new round to close the snapshot race, §8.2) → live. Local writes made
// while not live wait, merged, and leave after the round; UPDATEs from the hub are applied
// and acknowledged; the periodic round starts only reconcileIntervalMs after the round
// ended (§9.4).
func TestS16_PeerBootstrapRoundLivePeriodic(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, snap := f.create()
	f.target(ns)
	w := f.connect()
	f.bootstrapOn(w, ns, id, snap)
	hubDoc := newYDoc(t, 300)
	hubDoc.apply(snap)

	// The round after the bootstrap. Local writes made now wait for it.
	peerApp := newYDoc(t, 400)
	s1, s1seq := expect[*protocol.SyncStep1](w)
	if s1.SyncRoundID != 1 {
		t.Fatalf("first round id %d", s1.SyncRoundID)
	}
	must(t, writeLocal(t, f.reg, ns, peerApp.set("a", 1.0)))
	must(t, writeLocal(t, f.reg, ns, peerApp.set("b", 2.0)))
	s2seq := w.send(&protocol.SyncStep2{NamespaceID: ns, SyncRoundID: 1, RelatedStep1Sequence: s1seq, Update: hubDoc.diff(s1.StateVector)})
	h1seq := w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: hubDoc.sv()})
	var step2 *protocol.SyncStep2
	var step2Seq uint32
	for _, fr := range []protocol.Frame{w.recv(), w.recv()} {
		switch m := fr.Message.(type) {
		case *protocol.SyncApplied:
			if m.AckedSequence != s2seq || m.SyncRoundID != 1 {
				t.Fatalf("SYNC_APPLIED %+v", m)
			}
		case *protocol.SyncStep2:
			if m.RelatedStep1Sequence != h1seq || m.SyncRoundID != 1 {
				t.Fatalf("peer Step2 %+v", m)
			}
			step2, step2Seq = m, fr.Sequence
		default:
			t.Fatalf("unexpected %s", fr.Type())
		}
	}
	if step2 == nil {
		t.Fatal("no peer Step2")
	}
	hubDoc.apply(step2.Update)
	if f.state(ns) != observer.ChannelReconciling {
		t.Fatalf("state %s before the hub confirmed the peer's Step2", f.state(ns))
	}
	w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: 1, AckedSequence: step2Seq})
	f.waitState(ns, observer.ChannelLive)
	// The writes queued during the round leave now, merged into one UPDATE (§10.1), unless
	// the diff already carried them.
	for _, fr := range w.barrier() {
		up, ok := fr.Message.(*protocol.Update)
		if !ok {
			t.Fatalf("unexpected %s", fr.Type())
		}
		hubDoc.apply(up.Update)
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: fr.Sequence})
	}
	if app := hubDoc.app(); app["a"] != 1.0 || app["b"] != 2.0 {
		t.Fatalf("hub app = %v", app)
	}

	// The hub's UPDATE is applied and acknowledged.
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: hubDoc.set("fromHub", "x")})
	ack, _ := expect[*protocol.UpdateAck](w)
	if ack.AckedSequence != seq {
		t.Fatalf("UPDATE_ACK acks %d, want %d", ack.AckedSequence, seq)
	}
	if f.peerApp(ns)["fromHub"] != "x" {
		t.Fatalf("peer app = %v", f.peerApp(ns))
	}

	// §9.4: no round before reconcileIntervalMs; then one, with a new id.
	f.clk.Advance(cfg.ReconcileInterval - time.Millisecond)
	w.quiet()
	f.clk.Advance(time.Millisecond)
	if id := f.hubRound(w, ns, hubDoc); id != 2 {
		t.Fatalf("periodic round id %d", id)
	}
	f.waitState(ns, observer.ChannelLive)
	waitPath(t, f.rec, observer.SidePeer, ns, observer.ChannelTargeted, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelReconciling, observer.ChannelLive)
	if n := len(eventsOf[observer.BootstrapImported](f.rec, observer.SidePeer)); n != 1 {
		t.Fatalf("%d bootstrap-imported", n)
	}
}
