package ws_test

import (
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/protocol"
)

// TestS8_S9_S10_HubBootstrapRoundLive drives one namespace through the hub's happy path
// frame by frame: OPEN without a replica → OPEN_OK(bootstrap) + BOOTSTRAP_SNAPSHOT carrying
// the identity; BOOTSTRAP_ACK; the peer's Step1 → the hub's Step2 (related to that Step1)
// and its own Step1 of the same round; SYNC_APPLIED both ways → live; then UPDATEs both
// ways, each acknowledged with its own sequence (§7–§10).
func TestS8_S9_S10_HubBootstrapRoundLive(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	ns, id := f.create()
	hubApp := newYDoc(t, 100)
	must(t, writeLocal(t, f.reg, ns, hubApp.set("before", 1.0)))

	w := f.dial(peerID)
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	ok, _ := expect[*protocol.OpenOK](w)
	if ok.Mode != protocol.ModeBootstrap || ok.ReplicationID != id.ReplicationID || ok.ReplicationEpoch != id.Epoch {
		t.Fatalf("OPEN_OK %+v, want bootstrap with %v", ok, id)
	}
	snap, snapSeq := expect[*protocol.BootstrapSnapshot](w)
	if snap.ReplicationID != id.ReplicationID || snap.ReplicationEpoch != id.Epoch {
		t.Fatalf("snapshot binding %s/%d", snap.ReplicationID, snap.ReplicationEpoch)
	}
	doc := newYDoc(t, 200)
	doc.apply(snap.Snapshot)
	if got := doc.app()["before"]; got != 1.0 {
		t.Fatalf("snapshot app = %v", doc.app())
	}
	// Nothing moves before the peer's round: the hub never starts one (§9.1).
	w.send(&protocol.BootstrapAck{NamespaceID: ns, AckedSequence: snapSeq})
	w.quiet()
	// A write on the peer while it bootstraps travels in its Step2.
	peerWrite := doc.set("fromPeer", "a")
	_ = peerWrite
	f.round(w, ns, doc, 1)
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive)
	if got := appOf(t, f.reg, ns); got["fromPeer"] != "a" {
		t.Fatalf("hub app after the round = %v", got)
	}

	// Live: a hub write goes out as an UPDATE; the ACK names its sequence.
	must(t, writeLocal(t, f.reg, ns, hubApp.set("live", 2.0)))
	up, upSeq := expect[*protocol.Update](w)
	doc.apply(up.Update)
	if doc.app()["live"] != 2.0 {
		t.Fatalf("peer app = %v", doc.app())
	}
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: upSeq})
	// A peer UPDATE is applied and acknowledged with its own sequence.
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("peerLive", true)})
	ack, _ := expect[*protocol.UpdateAck](w)
	if ack.AckedSequence != seq {
		t.Fatalf("UPDATE_ACK acks %d, want %d", ack.AckedSequence, seq)
	}
	if got := appOf(t, f.reg, ns); got["peerLive"] != true {
		t.Fatalf("hub app = %v", got)
	}
	// A duplicate (already included) update is acknowledged too (§10.2).
	seq = w.send(&protocol.Update{NamespaceID: ns, Update: doc.diff(nil)})
	ack, _ = expect[*protocol.UpdateAck](w)
	if ack.AckedSequence != seq {
		t.Fatalf("duplicate UPDATE_ACK acks %d, want %d", ack.AckedSequence, seq)
	}
	w.quiet()

	// Events: one of each per frame, with the sequences of the wire.
	eventually(t, "update-acked", func() bool { return len(eventsOf[observer.UpdateAcked](f.rec, observer.SideHub)) == 1 })
	if ev := eventsOf[observer.UpdateAcked](f.rec, observer.SideHub)[0]; ev.Sequence != upSeq || ev.NamespaceID != ns.String() {
		t.Fatalf("update-acked %+v", ev)
	}
	if n := len(eventsOf[observer.UpdateApplied](f.rec, observer.SideHub)); n != 2 {
		t.Fatalf("%d update-applied events, want 2", n)
	}
	if n := len(eventsOf[observer.BootstrapSnapshotSent](f.rec, observer.SideHub)); n != 1 {
		t.Fatalf("%d bootstrap-snapshot-sent", n)
	}
	sent := eventsOf[observer.SyncStep2Sent](f.rec, observer.SideHub)
	applied := eventsOf[observer.SyncDiffApplied](f.rec, observer.SideHub)
	if len(sent) != 1 || sent[0].SyncRoundID != 1 || len(applied) != 1 || applied[0].SyncRoundID != 1 {
		t.Fatalf("sync events %+v %+v", sent, applied)
	}
	eff, present := applied[0].Effect.Get()
	if !present || !eff.Changed() || eff.ApplyEffect() != observer.EffectChanged {
		t.Fatalf("sync-diff-applied effect %+v (present %v): the peer's diff carried a write", eff, present)
	}
}

// TestS10_2_HubWindowPausesOnlyThatNamespace: at most maxInFlightUpdates UPDATEs of a
// namespace are unacknowledged at once; a full window holds that namespace's updates back
// (merging the waiting ones, §10.1) while another namespace on the same connection keeps
// sending; each ACK lets one more frame go (§10.2, §17).
func TestS10_2_HubWindowPausesOnlyThatNamespace(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	nsA, _ := f.create()
	nsB, _ := f.create()
	w := f.dial(peerID)
	docA, docB := newYDoc(t, 200), newYDoc(t, 201)
	f.live(w, nsA, docA)
	f.live(w, nsB, docB)

	hubA := newYDoc(t, 100)
	n := cfg.MaxInFlightUpdates + 3
	for i := range n {
		must(t, writeLocal(t, f.reg, nsA, hubA.set("k", float64(i))))
	}
	// A peer UPDATE is applied in a slot after those writes: its ACK comes after the
	// fan-out of every one of them was pulled into the queue.
	seq := w.send(&protocol.Update{NamespaceID: nsA, Update: docA.set("peer", 1.0)})
	var sent []uint32
	for {
		fr := w.recv()
		if ack, ok := fr.Message.(*protocol.UpdateAck); ok && ack.AckedSequence == seq {
			break
		}
		up, ok := fr.Message.(*protocol.Update)
		if !ok || up.NamespaceID != nsA {
			t.Fatalf("unexpected %s %s", fr.Type(), describe(fr))
		}
		docA.apply(up.Update)
		sent = append(sent, fr.Sequence)
	}
	for _, fr := range w.barrier() {
		if _, ok := fr.Message.(*protocol.Update); !ok {
			t.Fatalf("unexpected %s", fr.Type())
		}
		sent = append(sent, fr.Sequence)
	}
	if len(sent) != cfg.MaxInFlightUpdates {
		t.Fatalf("%d UPDATEs unacknowledged, window %d", len(sent), cfg.MaxInFlightUpdates)
	}
	// The other namespace is not held back.
	must(t, writeLocal(t, f.reg, nsB, newYDoc(t, 101).set("b", 1.0)))
	upB, _ := expect[*protocol.Update](w)
	if upB.NamespaceID != nsB {
		t.Fatalf("UPDATE for %s, want %s", upB.NamespaceID, nsB)
	}
	// One ACK, one more frame: the three waiting writes, merged into one UPDATE.
	w.send(&protocol.UpdateAck{NamespaceID: nsA, AckedSequence: sent[0]})
	merged, mseq := expect[*protocol.Update](w)
	docA.apply(merged.Update)
	if docA.app()["k"] != float64(n-1) {
		t.Fatalf("peer app %v after the merged update", docA.app())
	}
	w.quiet()
	for _, s := range append(sent[1:], mseq) {
		w.send(&protocol.UpdateAck{NamespaceID: nsA, AckedSequence: s})
	}
	w.quiet()
}
