package namespace_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// TestS16_PeerBootstrapRoundLivePeriodic drives a target through
// docs/protocol.md#namespace-states frame by frame against a hand-played hub: targeted →
// opening (OPEN without a replica) → bootstrapping (the snapshot imported under the target's
// owner, BOOTSTRAP_ACK with the snapshot's sequence) → reconciling (a new round to close the
// snapshot race, docs/protocol.md#bootstrap_ack) → live. Local writes made while not live
// wait, merged, and leave after the round; UPDATEs from the hub are applied and acknowledged;
// the periodic round starts only reconcileIntervalMs after the round ended
// (docs/protocol.md#resync).
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
	// The writes queued during the round leave now, merged into one UPDATE
	// (docs/protocol.md#sending-and-relaying), unless the diff already carried them.
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

	// docs/protocol.md#resync: no round before reconcileIntervalMs; then one, with a new id.
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

// TestS16_PeerReconnectReconciles: a dropped socket projects the target as disconnected
// (the session stops, the lease is released, the target stays); the next connection opens
// it declaring the local replica's identity, the hub answers reconcile, and a round runs —
// writes made while disconnected travel in the peer's Step2 (docs/protocol.md#open_namespace,
// docs/protocol.md#namespace-states).
func TestS16_PeerReconnectReconciles(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, w, hubDoc := f.liveTarget()

	w.end.(*wstest.End).Drop()
	f.waitState(ns, observer.ChannelDisconnected)
	testkit.Eventually(t, wait, "the replica unloaded", func() bool { return f.reg.Loaded() == 0 })
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 400).set("offline", 1.0)))
	w = f.reconnect()
	open, _ := expect[*protocol.OpenNamespace](w)
	if !open.HasLocalReplica || open.ReplicationID != id.ReplicationID || open.ReplicationEpoch != id.Epoch {
		t.Fatalf("OPEN %+v, want the replica's identity %v", open, id)
	}
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	if rid := f.hubRound(w, ns, hubDoc); rid != 1 {
		t.Fatalf("round id %d on a new connection", rid)
	}
	f.waitState(ns, observer.ChannelLive)
	if hubDoc.app()["offline"] != 1.0 {
		t.Fatalf("hub app %v", hubDoc.app())
	}
	waitPath(t, f.rec, observer.SidePeer, ns, observer.ChannelTargeted, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelDisconnected, observer.ChannelOpening,
		observer.ChannelReconciling, observer.ChannelLive)
}

// TestS19_PeerTargetNotRequested: frames for a namespace the peer did not request are
// answered with TARGET_NOT_REQUESTED and create nothing (docs/protocol.md#authorization);
// ERRORs for it are ignored.
func TestS19_PeerTargetNotRequested(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, snap := f.create()
	w := f.connect() // no target
	for _, m := range []protocol.Message{
		&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch},
		&protocol.BootstrapSnapshot{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch, Snapshot: snap},
		&protocol.Update{NamespaceID: ns, Update: snap},
		&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: []byte{0}},
		&protocol.CloseNamespace{NamespaceID: ns, ReasonCode: "x"},
		&protocol.IdentityChanged{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: 2},
	} {
		seq := w.send(m)
		if e := w.expectError(ns, protocol.CodeTargetNotRequested); e.RelatedSequence != seq {
			t.Fatalf("%T: related %d, want %d", m, e.RelatedSequence, seq)
		}
	}
	em, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeInternalError, ns, "x")
	w.send(em)
	w.quiet()
	if _, ok, err := f.reg.LocalReplica(ctxT(t), owner, ns.String()); ok || err != nil {
		t.Fatalf("a replica appeared: %v %v", ok, err)
	}
	if len(f.tc.Targets()) != 0 {
		t.Fatal("a target appeared")
	}
}

// TestS18_PeerTimeoutsRebuildTheConnection: the open, bootstrap and reconcile timers fail
// the namespace (namespace-failed with the timer cause and timeoutMs, no wire frame) and,
// the target being still wanted, rebuild the whole connection (closed with 1001, backoff
// reason namespace-recovery); the next connection opens the target again
// (docs/protocol.md#namespace-states, docs/protocol.md#timeouts).
func TestS18_PeerTimeoutsRebuildTheConnection(t *testing.T) {
	cfg := nsConfig(t)
	for _, tc := range []struct {
		name    string
		cause   observer.FailedCause
		timeout time.Duration
		play    func(f *nsPeer, w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte)
	}{
		{"open", observer.FailedOpenTimeout, cfg.OpenTimeout, func(f *nsPeer, w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) {
			expect[*protocol.OpenNamespace](w)
		}},
		{"bootstrap", observer.FailedBootstrapTimeout, cfg.BootstrapTimeout, func(f *nsPeer, w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) {
			expect[*protocol.OpenNamespace](w)
			w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
		}},
		{"reconcile", observer.FailedReconcileTimeout, cfg.ReconcileTimeout, func(f *nsPeer, w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) {
			f.bootstrapOn(w, ns, id, snap)
			expect[*protocol.SyncStep1](w)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newNSPeer(t, cfg)
			ns, id, snap := f.create()
			f.target(ns)
			w := f.connect()
			tc.play(f, w, ns, id, snap)
			w.quiet()
			f.clk.Advance(tc.timeout - time.Millisecond)
			w.quiet()
			f.clk.Advance(time.Millisecond)
			if code, ec := w.expectClose(); code != protocol.CloseGoingAway || ec != "" {
				t.Fatalf("close %d %q, want 1001 without ERROR", code, ec)
			}
			ev := waitFailed(t, f.rec, observer.SidePeer, ns, tc.cause)
			if ms, _ := ev.TimeoutMs.Get(); ms != uint64(tc.timeout/time.Millisecond) {
				t.Fatalf("timeoutMs %v", ev.TimeoutMs)
			}
			if len(nsErrors(f.rec, observer.SidePeer, ns)) != 0 {
				t.Fatal("a timeout sent a namespace ERROR")
			}
			testkit.Eventually(t, wait, "namespace-recovery backoff", func() bool {
				return slices.Contains(f.backoffReasons(), observer.BackoffNamespaceRecovery)
			})
			w = f.reconnect()
			if open, _ := expect[*protocol.OpenNamespace](w); open.NamespaceID != ns {
				t.Fatalf("OPEN for %s", open.NamespaceID)
			}
		})
	}
}

// TestS11_PeerIdentityChangedConflictsUntilReset: IDENTITY_CHANGED ends the target
// conflicted (docs/protocol.md#identity-fencing): nothing more is sent for it, the next
// connection does not open it, the other target is unaffected; Reset archives the replica and
// bootstraps the new epoch.
func TestS11_PeerIdentityChangedConflictsUntilReset(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, w, _ := f.liveTarget()
	other, oid, otherDoc := f.addLiveTarget(w, 301)
	w.send(&protocol.IdentityChanged{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: 2})
	f.waitState(ns, observer.ChannelConflicted)
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 400).set("after", 1.0)))
	w.quiet()
	if got := nsErrors(f.rec, observer.SidePeer, ns); len(got) != 1 || got[0] != "IDENTITY_CHANGED/received" {
		t.Fatalf("namespace-error %v", got)
	}
	ics := eventsOf[observer.IdentityConflicted](f.rec, observer.SidePeer)
	if len(ics) != 1 || ics[0].Via != observer.ViaIdentityChangedFrame {
		t.Fatalf("identity-conflicted %+v", ics)
	}

	// A new connection opens only the other target.
	w = f.reconnectOpeningOnly(w, other, oid, otherDoc)
	if f.state(ns) != observer.ChannelConflicted {
		t.Fatalf("state %s", f.state(ns))
	}

	// Reset: the replica is archived and the target bootstraps again — on this connection,
	// where the namespace had no lifecycle yet.
	must(t, f.tc.Reset(ctxT(t), ns.String()))
	if _, ok, _ := f.reg.LocalReplica(ctxT(t), owner, ns.String()); ok {
		t.Fatal("the replica is still there after the reset")
	}
	newID := registry.Identity{ReplicationID: id.ReplicationID, Epoch: 2}
	bumpedSnap := f.bump(ns)
	f.live(w, ns, newID, bumpedSnap, newYDoc(t, 302))
	if st, _ := f.tc.Target(ns.String()); st.Identity != newID {
		t.Fatalf("identity after the reset %v", st.Identity)
	}
}

// TestS7_S8_PeerOpenAndBootstrapChecks: an OPEN_OK whose mode contradicts the declaration
// is NAMESPACE_STATE_VIOLATION; a snapshot bound to another identity is
// REPLICATION_ID_MISMATCH (conflicted); a snapshot that cannot be imported is
// BOOTSTRAP_FAILED (docs/protocol.md#open_ok, docs/protocol.md#bootstrap-steps).
func TestS7_S8_PeerOpenAndBootstrapChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		play  func(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) uint32
		code  protocol.ErrorCode
		state observer.ChannelState
	}{
		{"mode contradicts the declaration", func(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) uint32 {
			return w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
		}, protocol.CodeNamespaceStateViolation, observer.ChannelFailed},
		{"snapshot of another lineage", func(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) uint32 {
			w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
			return w.send(&protocol.BootstrapSnapshot{NamespaceID: ns, ReplicationID: "ffffffffffffffffffffffffffffffff", ReplicationEpoch: id.Epoch, Snapshot: snap})
		}, protocol.CodeReplicationIDMismatch, observer.ChannelConflicted},
		{"snapshot whose meta differs from OPEN_OK", func(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) uint32 {
			w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: 3})
			return w.send(&protocol.BootstrapSnapshot{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: 3, Snapshot: snap})
		}, protocol.CodeReplicationEpochMismatch, observer.ChannelConflicted},
		{"snapshot that does not import", func(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) uint32 {
			w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
			return w.send(&protocol.BootstrapSnapshot{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch, Snapshot: []byte{0, 0}})
		}, protocol.CodeBootstrapFailed, observer.ChannelFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newNSPeer(t, nsConfig(t))
			ns, id, snap := f.create()
			f.target(ns)
			w := f.connect()
			expect[*protocol.OpenNamespace](w)
			seq := tc.play(w, ns, id, snap)
			if e := w.expectError(ns, tc.code); e.RelatedSequence != seq {
				t.Fatalf("related %d, want %d", e.RelatedSequence, seq)
			}
			f.waitState(ns, tc.state)
			w.quiet()
			if _, ok, _ := f.reg.LocalReplica(ctxT(t), owner, ns.String()); ok {
				t.Fatal("a refused bootstrap left a replica")
			}
		})
	}
}

// TestS9_3_PeerSyncViolations: the hub does not start rounds and sends one Step1 per round;
// its Step2 and SYNC_APPLIED must match the round and the frames they answer
// (docs/protocol.md#round-rules).
func TestS9_3_PeerSyncViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(w *wire, ns protocol.NamespaceID, r roundSeqs) protocol.Message
		live bool // in live, with no round
	}{
		{"Step1 without a round", func(w *wire, ns protocol.NamespaceID, r roundSeqs) protocol.Message {
			return &protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 9, StateVector: []byte{0}}
		}, true},
		{"second hub Step1", func(w *wire, ns protocol.NamespaceID, r roundSeqs) protocol.Message {
			return &protocol.SyncStep1{NamespaceID: ns, SyncRoundID: r.id, StateVector: []byte{0}}
		}, false},
		{"Step2 of another round", func(w *wire, ns protocol.NamespaceID, r roundSeqs) protocol.Message {
			return &protocol.SyncStep2{NamespaceID: ns, SyncRoundID: r.id + 1, RelatedStep1Sequence: r.peerStep1, Update: []byte{0, 0}}
		}, false},
		{"Step2 related to another frame", func(w *wire, ns protocol.NamespaceID, r roundSeqs) protocol.Message {
			return &protocol.SyncStep2{NamespaceID: ns, SyncRoundID: r.id, RelatedStep1Sequence: r.peerStep1 + 1, Update: []byte{0, 0}}
		}, false},
		{"SYNC_APPLIED of another round", func(w *wire, ns protocol.NamespaceID, r roundSeqs) protocol.Message {
			return &protocol.SyncApplied{NamespaceID: ns, SyncRoundID: r.id + 5, AckedSequence: r.peerStep2}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := nsConfig(t)
			f := newNSPeer(t, cfg)
			ns, id, snap := f.create()
			f.target(ns)
			w := f.connect()
			hubDoc := newYDoc(t, 300)
			var r roundSeqs
			if tc.live {
				f.live(w, ns, id, snap, hubDoc)
			} else {
				f.bootstrapOn(w, ns, id, snap)
				hubDoc.apply(snap)
				r = startPeerRound(t, w, ns, hubDoc)
			}
			seq := w.send(tc.bad(w, ns, r))
			if e := w.expectError(ns, protocol.CodeSyncStateViolation); e.RelatedSequence != seq {
				t.Fatalf("related %d, want %d", e.RelatedSequence, seq)
			}
			waitFailed(t, f.rec, observer.SidePeer, ns, observer.FailedProtocolViolation)
			w.quiet()
		})
	}
}

// roundSeqs are the sequences of a round the peer started.
type roundSeqs struct {
	id                   uint32
	peerStep1, peerStep2 uint32
}

// startPeerRound answers the peer's Step1 with the hub's Step2 and Step1 and takes the
// peer's SYNC_APPLIED and Step2, without confirming the latter.
func startPeerRound(t *testing.T, w *wire, ns protocol.NamespaceID, hubDoc *ydoc) roundSeqs {
	t.Helper()
	s1, s1seq := expect[*protocol.SyncStep1](w)
	r := roundSeqs{id: s1.SyncRoundID, peerStep1: s1seq}
	w.send(&protocol.SyncStep2{NamespaceID: ns, SyncRoundID: r.id, RelatedStep1Sequence: s1seq, Update: hubDoc.diff(s1.StateVector)})
	w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: r.id, StateVector: hubDoc.sv()})
	for range 2 {
		fr := w.recv()
		if _, ok := fr.Message.(*protocol.SyncStep2); ok {
			r.peerStep2 = fr.Sequence
		}
	}
	return r
}

// TestS9_4_PeerResyncWaitsForWindowAndCoalesces: after RESYNC_REQUIRED the peer sends no
// new UPDATE and starts its round only when its window is empty (docs/protocol.md#resync);
// resync requests during a round coalesce into exactly one following round; then the namespace
// is live.
func TestS9_4_PeerResyncWaitsForWindowAndCoalesces(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	app := newYDoc(t, 400)
	must(t, writeLocal(t, f.reg, ns, app.set("a", 1.0)))
	up, seq := expect[*protocol.Update](w)
	hubDoc.apply(up.Update)

	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	f.waitState(ns, observer.ChannelNeedsResync)
	must(t, writeLocal(t, f.reg, ns, app.set("b", 2.0)))
	w.quiet() // neither the write nor a Step1: one UPDATE is unacknowledged
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
	r := startPeerRound(t, w, ns, hubDoc)
	// Two more requests during the round: one round follows.
	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: "other-reason"})
	w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: r.id, AckedSequence: r.peerStep2})
	if next := f.hubRound(w, ns, hubDoc); next != r.id+1 {
		t.Fatalf("round %d after round %d", next, r.id)
	}
	f.waitState(ns, observer.ChannelLive)
	w.quiet() // no third round
	if app := hubDoc.app(); app["b"] != 2.0 {
		t.Fatalf("hub app %v: the write dropped during the resync was not repaired", app)
	}
	waitPath(t, f.rec, observer.SidePeer, ns, observer.ChannelTargeted, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelNeedsResync, observer.ChannelReconciling,
		observer.ChannelNeedsResync, observer.ChannelReconciling, observer.ChannelLive)
}

// TestS16_PeerRemoveTargetAndAddBack: removing a target closes its namespace
// (CLOSE_NAMESPACE, CLOSE_OK), releases the replica, and RemoveTarget returns once done;
// adding it back on the same connection rebuilds the connection (one lifecycle per
// namespace per connection) and the namespace reconciles on the new one
// (docs/protocol.md#namespace-states).
func TestS16_PeerRemoveTargetAndAddBack(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, _, w, _ := f.liveTarget()

	removed := make(chan error, 1)
	go func() { removed <- f.tc.RemoveTarget(ctxT(t), ns.String()) }()
	c, cseq := expect[*protocol.CloseNamespace](w)
	if c.ReasonCode != "remove" {
		t.Fatalf("reason %q", c.ReasonCode)
	}
	select {
	case err := <-removed:
		t.Fatalf("RemoveTarget returned before the close completed: %v", err)
	default:
	}
	if _, ok := f.tc.Target(ns.String()); ok {
		t.Fatal("the removed target is still listed")
	}
	w.send(&protocol.CloseOK{NamespaceID: ns, AckedSequence: cseq})
	must(t, <-removed)
	testkit.Eventually(t, wait, "the replica unloaded", func() bool { return f.reg.Loaded() == 0 })
	waitPath(t, f.rec, observer.SidePeer, ns, observer.ChannelTargeted, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelClosing, observer.ChannelClosed)

	f.target(ns)
	if code, _ := w.expectClose(); code != protocol.CloseGoingAway {
		t.Fatalf("close %d", code)
	}
	w = f.reconnect()
	open, _ := expect[*protocol.OpenNamespace](w)
	if !open.HasLocalReplica {
		t.Fatal("the replica was lost by the removal")
	}
	if err := f.tc.RemoveTarget(ctxT(t), wstest.NamespaceID(0x404).String()); !errors.Is(err, namespace.ErrUnknownTarget) {
		t.Fatalf("removing an unknown target: %v", err)
	}
}

// TestS17_PeerUnsentQueueOverflow: local writes pile up in the bounded unsent queue while
// the window is full; past maxQueuedUpdateBytes they are dropped, RESYNC_REQUIRED
// {send-queue-overflow} is declared, and once the window is empty the peer's round carries
// everything (docs/protocol.md#backpressure).
func TestS17_PeerUnsentQueueOverflow(t *testing.T) {
	cfg := overflowConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	overflowUnsent(w, cfg, f.reg, ns, newYDoc(t, 400), hubDoc)
	f.hubRound(w, ns, hubDoc)
	if got, want := hubDoc.app(), f.peerApp(ns); !sameApp(got, want) {
		t.Fatalf("hub has %d keys, peer %d", len(got), len(want))
	}
	checkOverflowResync(t, f.rec, observer.SidePeer)
}

// TestS20_PeerDegradedAppliesHubUpdatesInMemory: while the peer's store cannot commit, hub
// updates are still applied (to memory) and acknowledged, reported as
// degraded-bypass-applied instead of update-applied (docs/protocol.md#degraded-persistence,
// docs/protocol.md#degraded-bypass); local writes are refused.
func TestS20_PeerDegradedAppliesHubUpdatesInMemory(t *testing.T) {
	var faults persistencetest.Faults
	f := newNSPeerWith(t, nsConfig(t), persistence.Options{CommitHook: faults.Hook, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	ns, _, w, hubDoc := f.liveTarget()
	faults.Fail(true)
	defer faults.Fail(false)
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: hubDoc.set("first", 1.0)})
	if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != seq {
		t.Fatalf("first ack %d, want %d", ack.AckedSequence, seq)
	}
	testkit.Eventually(t, wait, "the store failing", func() bool { return !f.store.Healthy() })
	seq = w.send(&protocol.Update{NamespaceID: ns, Update: hubDoc.set("during", 2.0)})
	if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != seq {
		t.Fatalf("ack %d", ack.AckedSequence)
	}
	if f.peerApp(ns)["during"] != 2.0 {
		t.Fatal("the hub update was not applied")
	}
	bypass := eventsOf[observer.DegradedBypassApplied](f.rec, observer.SidePeer)
	if len(bypass) != 1 || bypass[0].Sequence != seq {
		t.Fatalf("degraded-bypass-applied %+v", bypass)
	}
	for _, e := range eventsOf[observer.UpdateApplied](f.rec, observer.SidePeer) {
		if e.Sequence == seq {
			t.Fatal("update-applied for a degraded apply")
		}
	}
	if err := writeLocal(t, f.reg, ns, newYDoc(t, 400).set("local", 1.0)); !errors.Is(err, registry.ErrDegraded) {
		t.Fatalf("local write while degraded: %v", err)
	}
}

// TestS6_3_PeerGoAwayDrain: a GOAWAY stops new work: the peer closes its open namespaces
// (CLOSE_NAMESPACE), ends the drain when they are closed (1000), and reconnects after the
// retry hint, reopening them (docs/protocol.md#draining,
// docs/protocol.md#peer-connection-states).
func TestS6_3_PeerGoAwayDrain(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, _, w, _ := f.liveTarget()
	w.send(&protocol.GoAway{ReasonCode: protocol.GoAwayServerRestarting, DrainTimeoutMs: 60000, RetryAfterMs: 1000, HasRetryAfter: true})
	c, cseq := expect[*protocol.CloseNamespace](w)
	if c.ReasonCode != "drain" {
		t.Fatalf("reason %q", c.ReasonCode)
	}
	w.send(&protocol.CloseOK{NamespaceID: ns, AckedSequence: cseq})
	if code, _ := w.expectClose(); code != protocol.CloseNormal {
		t.Fatalf("close %d", code)
	}
	f.waitState(ns, observer.ChannelDisconnected)
	w = f.reconnect()
	if open, _ := expect[*protocol.OpenNamespace](w); !open.HasLocalReplica {
		t.Fatal("OPEN without the replica")
	}
}

// TestS18_PeerAckTimeout: an UPDATE unacknowledged for ackTimeoutMs is not resent: the peer
// declares ACK_TIMEOUT and, its window given up, starts a round at once
// (docs/protocol.md#backpressure, docs/protocol.md#timeouts).
func TestS18_PeerAckTimeout(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 400).set("a", 1.0)))
	_, seq := expect[*protocol.Update](w) // lost
	w.quiet()                             // the peer has recorded it as sent
	f.clk.Advance(cfg.AckTimeout)
	if e := w.expectError(ns, protocol.CodeAckTimeout); e.RelatedSequence != seq || e.Fatal {
		t.Fatalf("ACK_TIMEOUT %+v", e)
	}
	f.hubRound(w, ns, hubDoc)
	if hubDoc.app()["a"] != 1.0 {
		t.Fatalf("hub app %v", hubDoc.app())
	}
	f.waitState(ns, observer.ChannelLive)
}

// TestS9_4_PeriodicTimerNeverOverlapsARound: the periodic timer is armed only when a round
// ends live and is cleared when a round starts, so a round in progress (here one a resync
// started) never gets a second Step1; the next periodic round comes reconcileIntervalMs
// after that round ended (docs/protocol.md#resync).
func TestS9_4_PeriodicTimerNeverOverlapsARound(t *testing.T) {
	cfg := nsConfig(t)
	cfg.ReconcileInterval, cfg.ReconcileTimeout = 10*time.Second, time.Minute
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	f.clk.Advance(5 * time.Second)
	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	r := startPeerRound(t, w, ns, hubDoc)
	f.clk.Advance(10 * time.Second) // past the first interval: the round is in progress
	w.quiet()
	w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: r.id, AckedSequence: r.peerStep2})
	f.waitState(ns, observer.ChannelLive)
	w.quiet()
	f.clk.Advance(10*time.Second - time.Millisecond)
	w.quiet()
	f.clk.Advance(time.Millisecond)
	if next := f.hubRound(w, ns, hubDoc); next != r.id+1 {
		t.Fatalf("periodic round %d", next)
	}
}

// TestGUIDE6_PeerPacesItsOpens: a peer with more targets than maxConcurrentOpens keeps at
// most that many opening or bootstrapping (the hub admits no more OPENs, holds only
// maxEarlyFrames frames beyond, and its snapshots in flight must fit its control reserve);
// each target that ends its open or bootstrap lets the next one open, in order.
func TestGUIDE6_PeerPacesItsOpens(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	var nss []protocol.NamespaceID
	ids := map[protocol.NamespaceID]registry.Identity{}
	snaps := map[protocol.NamespaceID][]byte{}
	for range cfg.MaxConcurrentOpens + 3 {
		ns, id, snap := f.create()
		nss = append(nss, ns)
		ids[ns], snaps[ns] = id, snap
	}
	slices.SortFunc(nss, func(a, b protocol.NamespaceID) int { return strings.Compare(a.String(), b.String()) })
	for _, ns := range nss {
		f.target(ns)
	}
	w := f.connect()
	var opened []protocol.NamespaceID
	for range cfg.MaxConcurrentOpens {
		open, _ := expect[*protocol.OpenNamespace](w)
		opened = append(opened, open.NamespaceID)
	}
	w.quiet()
	// An answer (here an error) frees a slot: exactly one more OPEN.
	m, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeNamespaceNotFound, opened[0], "x")
	w.send(m)
	open, _ := expect[*protocol.OpenNamespace](w)
	opened = append(opened, open.NamespaceID)
	w.quiet()
	// OPEN_OK alone does not free a slot: the bootstrap holds it until BOOTSTRAP_ACK.
	for _, ns := range opened[1:3] {
		w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: ids[ns].ReplicationID, ReplicationEpoch: ids[ns].Epoch})
	}
	w.quiet()
	for _, ns := range opened[1:3] {
		w.send(&protocol.BootstrapSnapshot{NamespaceID: ns, ReplicationID: ids[ns].ReplicationID, ReplicationEpoch: ids[ns].Epoch, Snapshot: snaps[ns]})
	}
	for n := 0; n < 2; {
		fr := w.recv()
		if open, ok := fr.Message.(*protocol.OpenNamespace); ok {
			opened = append(opened, open.NamespaceID)
			n++
		}
	}
	// Targets start opening in order; those opening together send their OPENs in the
	// order their local opens complete.
	n := cfg.MaxConcurrentOpens
	for _, batch := range [][2]int{{0, n}, {n, n + 1}, {n + 1, n + 3}} {
		got := slices.Clone(opened[batch[0]:batch[1]])
		slices.SortFunc(got, func(a, b protocol.NamespaceID) int { return strings.Compare(a.String(), b.String()) })
		if !slices.Equal(got, nss[batch[0]:batch[1]]) {
			t.Fatalf("opened %v, want the targets in order %v", opened, nss)
		}
	}
}

// TestS12_PeerCloseTimeout: a close the hub never answers ends after closeTimeoutMs
// (closed, docs/protocol.md#timeouts), and the removal completes.
func TestS12_PeerCloseTimeout(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, _ := f.liveTarget()
	removed := make(chan error, 1)
	go func() { removed <- f.tc.RemoveTarget(ctxT(t), ns.String()) }()
	expect[*protocol.CloseNamespace](w)
	w.quiet()
	f.clk.Advance(cfg.CloseTimeout)
	must(t, <-removed)
	waitPath(t, f.rec, observer.SidePeer, ns, observer.ChannelTargeted, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelClosing, observer.ChannelClosed)
}

// TestGUIDE5_PeerInboundOverCap: an UPDATE from the hub over maxUpdateBytes (within
// maxFrameBytes) fails the namespace with UPDATE_TOO_LARGE; the connection goes on.
func TestGUIDE5_PeerInboundOverCap(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	u := hubDoc.set("big", strings.Repeat("u", cfg.MaxUpdateBytes))
	must(t, w.end.(*wstest.End).Send(rawUpdateFrame(t, w, ns, u)))
	w.expectError(ns, protocol.CodeUpdateTooLarge)
	waitFailed(t, f.rec, observer.SidePeer, ns, observer.FailedProtocolViolation)
	w.quiet()
}
