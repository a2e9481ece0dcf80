package namespace_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// TestS8_S9_S10_HubBootstrapRoundLive drives one namespace through the hub's happy path
// frame by frame: OPEN without a replica → OPEN_OK(bootstrap) + BOOTSTRAP_SNAPSHOT carrying
// the identity; BOOTSTRAP_ACK; the peer's Step1 → the hub's Step2 (related to that Step1)
// and its own Step1 of the same round; SYNC_APPLIED both ways → live; then UPDATEs both
// ways, each acknowledged with its own sequence (the sections from
// docs/protocol.md#opening-a-namespace to docs/protocol.md#live-updates).
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
	// Nothing moves before the peer's round: the hub never starts one
	// (docs/protocol.md#sync_step1).
	w.send(&protocol.BootstrapAck{NamespaceID: ns, AckedSequence: snapSeq})
	w.quiet()
	// A write on the peer while it bootstraps travels in its Step2.
	doc.set("fromPeer", "a")
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
	// A duplicate (already included) update is acknowledged too
	// (docs/protocol.md#the-ack-window).
	seq = w.send(&protocol.Update{NamespaceID: ns, Update: doc.diff(nil)})
	ack, _ = expect[*protocol.UpdateAck](w)
	if ack.AckedSequence != seq {
		t.Fatalf("duplicate UPDATE_ACK acks %d, want %d", ack.AckedSequence, seq)
	}
	w.quiet()

	// Events: one of each per frame, with the sequences of the wire.
	testkit.Eventually(t, wait, "update-acked", func() bool { return len(eventsOf[observer.UpdateAcked](f.rec, observer.SideHub)) == 1 })
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
// (merging the waiting ones, docs/protocol.md#sending-and-relaying) while another namespace on
// the same connection keeps sending; each ACK lets one more frame go
// (docs/protocol.md#the-ack-window, docs/protocol.md#backpressure).
func TestS10_2_HubWindowPausesOnlyThatNamespace(t *testing.T) {
	slowAcks(t) // one acknowledgement opens one slot of the window
	cfg := nsConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	nsA, docA := f.liveNS(w, 200)
	nsB, _ := f.liveNS(w, 201)

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

// TestS7_1_HubOpenOutcomes: authorization first, then the registry open for the grant's
// owner, then the identity comparison (docs/protocol.md#open_namespace,
// docs/protocol.md#authorization). Unauthorized OPENs get the same answer whether the
// namespace exists or not.
func TestS7_1_HubOpenOutcomes(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	ns, id := f.create()
	w := f.dial(peerID)

	t.Run("reconcile", func(t *testing.T) {
		w.send(&protocol.OpenNamespace{NamespaceID: ns, HasLocalReplica: true, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
		ok, _ := expect[*protocol.OpenOK](w)
		if ok.Mode != protocol.ModeReconcile || ok.ReplicationID != id.ReplicationID || ok.ReplicationEpoch != id.Epoch {
			t.Fatalf("OPEN_OK %+v", ok)
		}
		w.quiet() // no snapshot; the peer's Step1 comes next
		doc := newYDoc(t, 9)
		peerRound(w, ns, doc, 7)
		waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelReconciling, observer.ChannelLive)
	})
	for _, tc := range []struct {
		name    string
		open    protocol.OpenNamespace
		code    protocol.ErrorCode
		cause   observer.FailedCause
		end     observer.ChannelState
		created bool
	}{
		{"replication id mismatch", protocol.OpenNamespace{HasLocalReplica: true, ReplicationID: "ffffffffffffffffffffffffffffffff", ReplicationEpoch: 1},
			protocol.CodeReplicationIDMismatch, "", observer.ChannelConflicted, true},
		{"epoch mismatch", protocol.OpenNamespace{HasLocalReplica: true, ReplicationID: id.ReplicationID, ReplicationEpoch: 2},
			protocol.CodeReplicationEpochMismatch, "", observer.ChannelConflicted, true},
		{"not found", protocol.OpenNamespace{}, protocol.CodeNamespaceNotFound, observer.FailedOpenFailed, observer.ChannelFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := wstest.NamespaceID(0xdead)
			if tc.created {
				target, _ = f.create()
			}
			m := tc.open
			m.NamespaceID = target
			if m.HasLocalReplica && tc.created && tc.code == protocol.CodeReplicationEpochMismatch {
				l := f.lease(target)
				m.ReplicationID = l.Identity().ReplicationID
			}
			seq := w.send(&m)
			e := w.expectError(target, tc.code)
			if !e.HasRelatedSequence || e.RelatedSequence != seq {
				t.Fatalf("ERROR relates to %d, want the OPEN %d", e.RelatedSequence, seq)
			}
			waitPath(t, f.rec, observer.SideHub, target, observer.ChannelOpening, tc.end)
			if tc.end == observer.ChannelFailed {
				waitFailed(t, f.rec, observer.SideHub, target, tc.cause)
			}
			if tc.end == observer.ChannelConflicted {
				// identity-conflicted follows the state change on the hub's goroutine.
				var via []observer.ConflictVia
				testkit.Eventually(t, wait, "identity-conflicted", func() bool {
					via = nil
					for _, ic := range eventsOf[observer.IdentityConflicted](f.rec, observer.SideHub) {
						if ic.NamespaceID == target.String() {
							via = append(via, ic.Via)
						}
					}
					return len(via) > 0
				})
				if len(via) != 1 || via[0] != observer.ViaOpenMismatch {
					t.Fatalf("identity-conflicted %v", via)
				}
			}
			w.quiet()
		})
	}

	t.Run("another owner's namespace", func(t *testing.T) {
		// The peer learns what it learns of a missing namespace; the hub's operator is told
		// which owner the peer's grant gives and which the namespace has.
		c, err := f.reg.Create(ctxT(t), "alice")
		must(t, err)
		theirs := protocol.MustNamespaceID(c.NamespaceID)
		missing := wstest.NamespaceID(0xfeed)
		var answers []*protocol.ErrorMessage
		for _, target := range []protocol.NamespaceID{theirs, missing} {
			seq := w.send(&protocol.OpenNamespace{NamespaceID: target})
			e := w.expectError(target, protocol.CodeNamespaceNotFound)
			if e.RelatedSequence != seq {
				t.Fatalf("related %d, want %d", e.RelatedSequence, seq)
			}
			answers = append(answers, e)
			waitFailed(t, f.rec, observer.SideHub, target, observer.FailedOpenFailed)
		}
		a, b := *answers[0], *answers[1]
		a.NamespaceID, b.NamespaceID, a.RelatedSequence, b.RelatedSequence = protocol.NamespaceID{}, protocol.NamespaceID{}, 0, 0
		if a != b {
			t.Fatalf("the peer can tell another owner's namespace from a missing one: %+v vs %+v", a, b)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		want := []string{peerID + " " + theirs.String() + " " + owner + " alice"}
		if !slices.Equal(f.mismatches, want) {
			t.Fatalf("owner mismatches told to the hub: %q, want %q", f.mismatches, want)
		}
		w.quiet()
	})

	t.Run("unauthorized reveals nothing", func(t *testing.T) {
		lw := f.dial(limitedPeer)
		missing := wstest.NamespaceID(0xbeef)
		var answers []*protocol.ErrorMessage
		for _, target := range []protocol.NamespaceID{ns, missing} {
			seq := lw.send(&protocol.OpenNamespace{NamespaceID: target})
			e := lw.expectError(target, protocol.CodeNamespaceUnauthorized)
			if e.RelatedSequence != seq {
				t.Fatalf("related %d, want %d", e.RelatedSequence, seq)
			}
			answers = append(answers, e)
			waitFailed(t, f.rec, observer.SideHub, target, observer.FailedOpenFailed)
		}
		a, b := *answers[0], *answers[1]
		a.NamespaceID, b.NamespaceID, a.RelatedSequence, b.RelatedSequence = protocol.NamespaceID{}, protocol.NamespaceID{}, 0, 0
		if a != b {
			t.Fatalf("answers differ: %+v vs %+v", a, b)
		}
		// Its one allowed namespace opens (and does not exist).
		lw.send(&protocol.OpenNamespace{NamespaceID: limitedNS})
		lw.expectError(limitedNS, protocol.CodeNamespaceNotFound)
	})
}

// TestS7_1_DuplicateOpensAndReopen: OPENs while opening share the operation and each gets
// its OPEN_OK; an OPEN while open is answered again; one declaring something else is a
// state violation; after the end an OPEN is NAMESPACE_REOPEN_REQUIRES_RECONNECT
// (docs/protocol.md#open_namespace, docs/protocol.md#terms-and-invariants).
func TestS7_1_DuplicateOpensAndReopen(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	ns, id := f.create()
	w := f.dial(peerID)
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	// Two answers and one snapshot, whether the second OPEN joined the open in progress or
	// found the namespace bootstrapping.
	var oks int
	var snap *protocol.BootstrapSnapshot
	var snapSeq uint32
	for _, fr := range []protocol.Frame{w.recv(), w.recv(), w.recv()} {
		switch m := fr.Message.(type) {
		case *protocol.OpenOK:
			if m.Mode != protocol.ModeBootstrap || m.ReplicationID != id.ReplicationID {
				t.Fatalf("OPEN_OK %+v", m)
			}
			oks++
		case *protocol.BootstrapSnapshot:
			snap, snapSeq = m, fr.Sequence
		default:
			t.Fatalf("unexpected %s", fr.Type())
		}
	}
	if oks != 2 || snap == nil {
		t.Fatalf("%d OPEN_OK, snapshot %v", oks, snap != nil)
	}
	doc := newYDoc(t, 9)
	doc.apply(snap.Snapshot)
	w.quiet() // one snapshot for the shared open
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	if ok, _ := expect[*protocol.OpenOK](w); ok.Mode != protocol.ModeBootstrap {
		t.Fatalf("OPEN_OK %+v", ok)
	}
	w.send(&protocol.BootstrapAck{NamespaceID: ns, AckedSequence: snapSeq})
	f.round(w, ns, doc, 1)

	// A different declaration for the same lifecycle.
	seq := w.send(&protocol.OpenNamespace{NamespaceID: ns, HasLocalReplica: true, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	if e := w.expectError(ns, protocol.CodeNamespaceStateViolation); e.RelatedSequence != seq {
		t.Fatalf("related %d", e.RelatedSequence)
	}
	waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedProtocolViolation)
	// Ended: no reopen on this connection.
	seq = w.send(&protocol.OpenNamespace{NamespaceID: ns})
	if e := w.expectError(ns, protocol.CodeNamespaceReopenRequiresReconnect); e.RelatedSequence != seq {
		t.Fatalf("related %d", e.RelatedSequence)
	}
	// A new connection may open it again.
	w2 := f.dial(peerID)
	doc2 := newYDoc(t, 10)
	f.bootstrap(w2, ns, doc2)
	f.round(w2, ns, doc2, 1)
}

// TestS9_3_HubSyncViolations: every duplicate, out-of-order, wrong-round,
// wrong-related-sequence or wrong-namespace sync frame is SYNC_STATE_VIOLATION
// (docs/protocol.md#round-rules); an UPDATE or BOOTSTRAP_ACK out of place is
// NAMESPACE_STATE_VIOLATION. The ERROR names the offending frame, the namespace fails
// (protocol-violation) and later frames of it are ignored; the connection goes on.
func TestS9_3_HubSyncViolations(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	w := f.dial(peerID)
	type step func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) // before the offending frame
		bad   step
		code  protocol.ErrorCode
	}{
		{"Step1 before BOOTSTRAP_ACK", func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
			w.send(&protocol.OpenNamespace{NamespaceID: ns})
			expect[*protocol.OpenOK](w)
			expect[*protocol.BootstrapSnapshot](w)
		}, func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: []byte{0}}
		}, protocol.CodeSyncStateViolation},
		{"UPDATE while bootstrapping", func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
			w.send(&protocol.OpenNamespace{NamespaceID: ns})
			expect[*protocol.OpenOK](w)
			expect[*protocol.BootstrapSnapshot](w)
		}, func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.Update{NamespaceID: ns, Update: doc.set("x", 1.0)}
		}, protocol.CodeNamespaceStateViolation},
		{"second Step1 in a round", func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
			f.bootstrap(w, ns, doc)
			w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: doc.sv()})
			expect[*protocol.SyncStep2](w)
			expect[*protocol.SyncStep1](w)
		}, func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 2, StateVector: doc.sv()}
		}, protocol.CodeSyncStateViolation},
		{"round id not increasing", func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
			f.bootstrap(w, ns, doc)
			f.round(w, ns, doc, 5)
		}, func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 5, StateVector: doc.sv()}
		}, protocol.CodeSyncStateViolation},
		{"Step2 of another round", roundStarted(w, f), func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncStep2{NamespaceID: ns, SyncRoundID: 2, RelatedStep1Sequence: lastHubStep1, Update: doc.diff(nil)}
		}, protocol.CodeSyncStateViolation},
		{"Step2 related to another Step1", roundStarted(w, f), func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncStep2{NamespaceID: ns, SyncRoundID: 1, RelatedStep1Sequence: lastHubStep1 - 1, Update: doc.diff(nil)}
		}, protocol.CodeSyncStateViolation},
		{"second Step2", func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
			roundStarted(w, f)(t, ns, doc)
			w.send(&protocol.SyncStep2{NamespaceID: ns, SyncRoundID: 1, RelatedStep1Sequence: lastHubStep1, Update: doc.diff(nil)})
			expect[*protocol.SyncApplied](w)
		}, func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncStep2{NamespaceID: ns, SyncRoundID: 1, RelatedStep1Sequence: lastHubStep1, Update: doc.diff(nil)}
		}, protocol.CodeSyncStateViolation},
		{"SYNC_APPLIED of another round", roundStarted(w, f), func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) protocol.Message {
			return &protocol.SyncApplied{NamespaceID: ns, SyncRoundID: 9, AckedSequence: lastHubStep2}
		}, protocol.CodeSyncStateViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, _ := f.create()
			doc := newYDoc(t, 50)
			tc.setup(t, ns, doc)
			seq := w.send(tc.bad(t, ns, doc))
			e := w.expectError(ns, tc.code)
			if !e.HasRelatedSequence || e.RelatedSequence != seq {
				t.Fatalf("ERROR relates to %d, want %d", e.RelatedSequence, seq)
			}
			waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedProtocolViolation)
			// Later frames of the failed namespace are ignored.
			w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("late", 1.0)})
			w.quiet()
		})
	}
	t.Run("sync frame for a namespace not opened", func(t *testing.T) {
		ns := wstest.NamespaceID(0x5eed)
		seq := w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: []byte{0}})
		if e := w.expectError(ns, protocol.CodeSyncStateViolation); e.RelatedSequence != seq {
			t.Fatalf("related %d", e.RelatedSequence)
		}
		seq = w.send(&protocol.Update{NamespaceID: ns, Update: []byte{0, 0}})
		if e := w.expectError(ns, protocol.CodeNamespaceStateViolation); e.RelatedSequence != seq {
			t.Fatalf("related %d", e.RelatedSequence)
		}
	})
}

// Sequences the hub sent in the round roundStarted began (the tests run one at a time).
var lastHubStep1, lastHubStep2 uint32

// roundStarted bootstraps ns and starts round 1: the hub's Step2 and Step1 are received,
// nothing answered yet.
func roundStarted(w *wire, f *nsHub) func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
	return func(t *testing.T, ns protocol.NamespaceID, doc *ydoc) {
		f.bootstrap(w, ns, doc)
		w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: doc.sv()})
		var s2 *protocol.SyncStep2
		s2, lastHubStep2 = expect[*protocol.SyncStep2](w)
		doc.apply(s2.Update)
		_, lastHubStep1 = expect[*protocol.SyncStep1](w)
	}
}

// TestS18_HubAckTimeoutNeedsResyncWithoutResend: an UPDATE unacknowledged for ackTimeoutMs
// is not sent again: the hub declares the loss with the non-fatal ACK_TIMEOUT
// (docs/protocol.md#namespace-errors, retry resync), goes needs-resync and sends nothing more
// until the peer's next round; a late ACK is still accepted; after the round the namespace is
// live again (docs/protocol.md#backpressure, docs/protocol.md#timeouts).
func TestS18_HubAckTimeoutNeedsResyncWithoutResend(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	hub := newYDoc(t, 100)
	must(t, writeLocal(t, f.reg, ns, hub.set("a", 1.0)))
	_, seq := expect[*protocol.Update](w) // lost: never applied by the peer
	w.quiet()                             // the hub has recorded it as sent
	f.clk.Advance(cfg.AckTimeout - time.Millisecond)
	w.quiet()
	f.clk.Advance(time.Millisecond)
	e := w.expectError(ns, protocol.CodeAckTimeout)
	if e.Fatal || !e.Retryable || !e.HasRelatedSequence || e.RelatedSequence != seq {
		t.Fatalf("ACK_TIMEOUT %+v", e)
	}
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelNeedsResync)
	// No resend, and nothing new while waiting for the round.
	must(t, writeLocal(t, f.reg, ns, hub.set("b", 2.0)))
	w.quiet()
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq}) // late: accepted
	w.quiet()
	// The peer's round repairs everything.
	f.round(w, ns, doc, 2)
	if app := doc.app(); app["a"] != 1.0 || app["b"] != 2.0 {
		t.Fatalf("peer app after the round: %v", app)
	}
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelNeedsResync, observer.ChannelReconciling, observer.ChannelLive)
	must(t, writeLocal(t, f.reg, ns, hub.set("c", 3.0)))
	expect[*protocol.Update](w)
	var causes []observer.ResyncCause
	for _, r := range eventsOf[observer.ResyncRequired](f.rec, observer.SideHub) {
		causes = append(causes, r.Cause)
	}
	if len(causes) != 1 || causes[0] != observer.ResyncAckTimeout {
		t.Fatalf("resync-required causes %v", causes)
	}
}

// TestS17_HubQueueOverflowDeclaresResync: while the window is full, waiting updates queue
// (merged); past maxQueuedUpdateBytes the queue is dropped, RESYNC_REQUIRED
// {send-queue-overflow} is declared and nothing more is sent; once the peer's window
// empties its round repairs what was dropped (docs/protocol.md#resync,
// docs/protocol.md#backpressure).
func TestS17_HubQueueOverflowDeclaresResync(t *testing.T) {
	cfg := overflowConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	overflowUnsent(w, cfg, f.reg, ns, newYDoc(t, 100), doc)
	w.quiet() // acknowledgements do not restart the flow: the peer's round does
	f.round(w, ns, doc, 2)
	if got, want := doc.app(), appOf(t, f.reg, ns); !sameApp(got, want) {
		t.Fatalf("after the round the peer has %d keys, the hub %d", len(got), len(want))
	}
	checkOverflowResync(t, f.rec, observer.SideHub)
}

// TestS20_DegradedHubKeepsStateExchange: while the hub's store is degraded, a round with a
// peer that is in step completes — its Step2 brings nothing new and is taken without a write
// (docs/protocol.md#degraded-persistence: reads and state exchange go on) — and the namespace
// stays live; an UPDATE with new content is still refused with PERSISTENCE_DEGRADED.
func TestS20_DegradedHubKeepsStateExchange(t *testing.T) {
	var faults persistencetest.Faults
	f := newNSHub(t, nsConfig(t), persistence.Options{CommitHook: faults.Hook, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("before", 1.0)})
	if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != seq {
		t.Fatalf("UPDATE_ACK %+v", ack)
	}
	faults.Fail(true)
	defer faults.Fail(false)
	other, _ := f.create()
	_ = writeLocal(t, f.reg, other, newYDoc(t, 1).set("pre", 1.0))
	testkit.Eventually(t, wait, "degraded", func() bool { return !f.store.Healthy() })

	f.round(w, ns, doc, 2)
	w.quiet()
	if got := nsErrors(f.rec, observer.SideHub, ns); len(got) != 0 {
		t.Fatalf("namespace errors during a round in step: %v", got)
	}
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelReconciling, observer.ChannelLive)

	seq = w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("during", 1.0)})
	if e := w.expectError(ns, protocol.CodePersistenceDegraded); e.RelatedSequence != seq {
		t.Fatalf("related %d, want %d", e.RelatedSequence, seq)
	}
}

// TestS20_HubRefusesPeerUpdates: a peer UPDATE the hub must not take is answered with its
// namespace ERROR and changes nothing on the hub (docs/protocol.md#sending-and-relaying,
// docs/protocol.md#authorization, docs/protocol.md#protected-apply): a meta write
// (PROTECTED_FIELD_MUTATION), a read-only peer's write (ROLE_VIOLATION), bytes that are not an
// update (APPLY_FAILED), and any write while persistence is degraded (PERSISTENCE_DEGRADED).
func TestS20_HubRefusesPeerUpdates(t *testing.T) {
	var faults persistencetest.Faults
	f := newNSHub(t, nsConfig(t), persistence.Options{CommitHook: faults.Hook, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	for _, tc := range []struct {
		name   string
		peer   string
		update func(doc *ydoc) []byte
		code   protocol.ErrorCode
		cause  observer.FailedCause
	}{
		{"protected meta", peerID, func(doc *ydoc) []byte { return doc.setMeta(registry.MetaEpoch, 7.0) },
			protocol.CodeProtectedFieldMutation, observer.FailedApplyRefused},
		{"protected new meta key", peerID, func(doc *ydoc) []byte { return doc.setMeta("extra", "x") },
			protocol.CodeProtectedFieldMutation, observer.FailedApplyRefused},
		{"read-only peer", readOnlyPeer, func(doc *ydoc) []byte { return doc.set("x", 1.0) },
			protocol.CodeRoleViolation, observer.FailedApplyRefused},
		{"malformed", peerID, func(*ydoc) []byte { return []byte{0xff, 0xff, 0xff} },
			protocol.CodeApplyFailed, observer.FailedApplyRejected},
		{"degraded", peerID, func(doc *ydoc) []byte { return doc.set("x", 1.0) },
			protocol.CodePersistenceDegraded, observer.FailedApplyRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, _ := f.create()
			w := f.dial(tc.peer)
			doc := newYDoc(t, 200)
			f.live(w, ns, doc)
			if tc.code == protocol.CodePersistenceDegraded {
				faults.Fail(true)
				defer faults.Fail(false)
				// A write the store cannot commit (to another namespace) makes it unhealthy.
				other, _ := f.create()
				_ = writeLocal(t, f.reg, other, newYDoc(t, 1).set("pre", 1.0))
				testkit.Eventually(t, wait, "degraded", func() bool { return !f.store.Healthy() })
			}
			before := appOf(t, f.reg, ns)
			seq := w.send(&protocol.Update{NamespaceID: ns, Update: tc.update(doc)})
			e := w.expectError(ns, tc.code)
			if e.RelatedSequence != seq {
				t.Fatalf("related %d, want %d", e.RelatedSequence, seq)
			}
			waitFailed(t, f.rec, observer.SideHub, ns, tc.cause)
			if after := appOf(t, f.reg, ns); !sameApp(before, after) {
				t.Fatalf("the refused update changed the hub: %v → %v", before, after)
			}
			l := f.lease(ns)
			if got := l.Identity(); got.Epoch != 1 {
				t.Fatalf("identity %v", got)
			}
			w.quiet()
		})
	}
}

// TestS11_HubEpochBumpFences: an epoch bump fences the namespace's sessions
// (docs/protocol.md#identity-fencing): the hub sends IDENTITY_CHANGED with the new identity
// and the channel ends conflicted; an acknowledgement the peer sent before it learnt is
// accepted, its later UPDATEs are ignored, and the other namespace on the connection is
// untouched.
func TestS11_HubEpochBumpFences(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	ns, id := f.create()
	w := f.dial(peerID)
	doc := newYDoc(t, 200)
	f.live(w, ns, doc)
	other, otherDoc := f.liveNS(w, 201)
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("a", 1.0)))
	_, upSeq := expect[*protocol.Update](w)

	bumped, err := f.lease(ns).BumpEpoch(ctxT(t))
	must(t, err)
	ic, _ := expect[*protocol.IdentityChanged](w)
	if ic.NamespaceID != ns || ic.ReplicationID != id.ReplicationID || ic.ReplicationEpoch != bumped.Epoch || bumped.Epoch != 2 {
		t.Fatalf("IDENTITY_CHANGED %+v, new identity %v", ic, bumped)
	}
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelConflicted)
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: upSeq}) // in flight: fine
	before := appOf(t, f.reg, ns)
	w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("late", 1.0)})
	w.quiet()
	if after := appOf(t, f.reg, ns); !sameApp(before, after) {
		t.Fatalf("an update of the old epoch was applied: %v", after)
	}
	seq := w.send(&protocol.Update{NamespaceID: other, Update: otherDoc.set("x", 1.0)})
	if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != seq {
		t.Fatalf("ack %d", ack.AckedSequence)
	}
	if got := nsErrors(f.rec, observer.SideHub, ns); len(got) != 1 || got[0] != "IDENTITY_CHANGED/sent" {
		t.Fatalf("namespace-error %v", got)
	}
	ics := eventsOf[observer.IdentityConflicted](f.rec, observer.SideHub)
	if len(ics) != 1 || ics[0].Via != observer.ViaFence {
		t.Fatalf("identity-conflicted %+v", ics)
	}
}

// TestS12_HubCloseAfterAdmittedApplies: CLOSE_NAMESPACE stops admission at once; the apply
// admitted before it completes (and is acknowledged), then CLOSE_OK acknowledges the CLOSE
// (docs/protocol.md#closing-a-namespace); the session is gone and the namespace unloads.
func TestS12_HubCloseAfterAdmittedApplies(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	w := f.dial(peerID)
	ns, doc := f.liveNS(w, 200)
	useq := w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("last", 1.0)})
	cseq := w.send(&protocol.CloseNamespace{NamespaceID: ns, ReasonCode: "remove"})
	ack, _ := expect[*protocol.UpdateAck](w)
	ok, _ := expect[*protocol.CloseOK](w)
	if ack.AckedSequence != useq || ok.AckedSequence != cseq {
		t.Fatalf("UPDATE_ACK %d CLOSE_OK %d, want %d and %d", ack.AckedSequence, ok.AckedSequence, useq, cseq)
	}
	if appOf(t, f.reg, ns)["last"] != 1.0 {
		t.Fatal("the admitted update was lost")
	}
	waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive, observer.ChannelClosing, observer.ChannelClosed)
	testkit.Eventually(t, wait, "no session left", func() bool { return len(f.lease(ns).Sessions()) == 0 })
	// Writes after the close reach no one.
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("after", 1.0)))
	w.quiet()
}

// TestS6_3_HubDrainClosesNamespaces: a GOAWAY drain closes every open namespace with
// CLOSE_NAMESPACE; once they are all closed the drain ends early and the connection closes
// with 1001 (docs/protocol.md#draining, docs/protocol.md#closing-a-namespace).
func TestS6_3_HubDrainClosesNamespaces(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	w := f.dial(peerID)
	a, _ := f.liveNS(w, 200)
	b, _ := f.liveNS(w, 201)
	f.hub.GoAway(protocol.GoAwayServerRestarting, time.Minute, time.Second, true)
	expect[*protocol.GoAway](w)
	closes := map[protocol.NamespaceID]uint32{}
	for range 2 {
		c, seq := expect[*protocol.CloseNamespace](w)
		if c.ReasonCode != "drain" {
			t.Fatalf("reason %q", c.ReasonCode)
		}
		closes[c.NamespaceID] = seq
	}
	w.send(&protocol.CloseOK{NamespaceID: a, AckedSequence: closes[a]})
	w.send(&protocol.CloseOK{NamespaceID: b, AckedSequence: closes[b]})
	if code, _ := w.expectClose(); code != protocol.CloseGoingAway {
		t.Fatalf("close %d", code)
	}
}

// TestS19_HubRevokeEndsNamespace: a revocation from the authenticator ends the namespace
// with NAMESPACE_UNAUTHORIZED and releases it; the connection and its other namespaces go
// on (docs/protocol.md#authorization).
func TestS19_HubRevokeEndsNamespace(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	w := f.dial(peerID)
	ns, _ := f.liveNS(w, 200)
	other, otherDoc := f.liveNS(w, 201)
	f.table.Revoke(auth.PeerRevocation{PeerInstanceID: peerID, Namespaces: []protocol.NamespaceID{ns}})
	w.expectError(ns, protocol.CodeNamespaceUnauthorized)
	waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedApplyRefused)
	seq := w.send(&protocol.Update{NamespaceID: other, Update: otherDoc.set("x", 1.0)})
	if ack, _ := expect[*protocol.UpdateAck](w); ack.AckedSequence != seq {
		t.Fatalf("ack %d", ack.AckedSequence)
	}
}

// TestS8_S9_HubSizeCaps: without CAP_CHUNKED_UPDATE (docs/protocol.md#bootstrap-steps,
// docs/protocol.md#sync_step2, docs/protocol.md#sending-and-relaying,
// docs/protocol.md#frame-checks) a snapshot over maxBootstrapBytes answers the OPEN with
// BOOTSTRAP_TOO_LARGE, a diff over maxSyncDiffBytes fails the namespace with
// SYNC_DIFF_TOO_LARGE, and an inbound UPDATE or Step2 over its cap fails it with
// UPDATE_TOO_LARGE or SYNC_DIFF_TOO_LARGE; the connection goes on.
func TestS8_S9_HubSizeCaps(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	w := f.dial(peerID)
	big := strings.Repeat("z", cfg.MaxBootstrapBytes)

	t.Run("snapshot", func(t *testing.T) {
		ns, _ := f.create()
		must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", big)))
		seq := w.send(&protocol.OpenNamespace{NamespaceID: ns})
		if e := w.expectError(ns, protocol.CodeBootstrapTooLarge); e.RelatedSequence != seq {
			t.Fatalf("related %d", e.RelatedSequence)
		}
		waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedSendFailed)
	})
	t.Run("hub diff", func(t *testing.T) {
		ns, _ := f.create()
		doc := newYDoc(t, 200)
		f.bootstrap(w, ns, doc)
		must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", big)))
		w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: 1, StateVector: doc.sv()})
		w.expectError(ns, protocol.CodeSyncDiffTooLarge)
		waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedSendFailed)
	})
	t.Run("inbound update", func(t *testing.T) {
		ns, _ := f.create()
		doc := newYDoc(t, 200)
		f.live(w, ns, doc)
		// A frame within maxFrameBytes whose update is over maxUpdateBytes.
		u := doc.set("big", strings.Repeat("u", cfg.MaxUpdateBytes))
		b := rawUpdateFrame(t, w, ns, u)
		must(t, w.end.(*wstest.End).Send(b))
		w.expectError(ns, protocol.CodeUpdateTooLarge)
		waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedProtocolViolation)
	})
	w.quiet()
}

// rawUpdateFrame encodes an UPDATE without the encoder's size check (the codec refuses to
// produce what the receiver would refuse), consuming the wire's next sequence.
func rawUpdateFrame(t *testing.T, w *wire, ns protocol.NamespaceID, u []byte) []byte {
	t.Helper()
	// Encode a small UPDATE to take the sequence, then splice the large payload in.
	_, seq, err := w.out.AppendFrame(nil, &protocol.Update{NamespaceID: ns, Update: []byte{0}})
	must(t, err)
	payload := lib0.AppendVarString(nil, ns.String())
	payload = lib0.AppendVarUint8Array(payload, u)
	frame := make([]byte, protocol.HeaderLen, protocol.HeaderLen+len(payload))
	copy(frame, "NMCR")
	frame[4] = protocol.EnvelopeVersion
	frame[5] = byte(protocol.TypeUpdate)
	binary.BigEndian.PutUint32(frame[8:], seq)
	binary.BigEndian.PutUint32(frame[12:], uint32(len(payload)))
	return append(frame, payload...)
}

// TestS8_HubBootstrapTimeout: a snapshot not acknowledged within bootstrapTimeoutMs fails
// the namespace (namespace-failed{bootstrap-timeout, timeoutMs}, no wire frame,
// docs/protocol.md#timeouts).
func TestS8_HubBootstrapTimeout(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSHub(t, cfg, persistence.Options{})
	ns, _ := f.create()
	w := f.dial(peerID)
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	expect[*protocol.OpenOK](w)
	expect[*protocol.BootstrapSnapshot](w)
	w.quiet() // the timer is armed
	f.clk.Advance(cfg.BootstrapTimeout)
	ev := waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedBootstrapTimeout)
	if ms, ok := ev.TimeoutMs.Get(); !ok || ms != uint64(cfg.BootstrapTimeout/time.Millisecond) {
		t.Fatalf("timeoutMs %v", ev.TimeoutMs)
	}
	w.quiet()
}

// TestS13_HubRemoteErrors: a fatal namespace ERROR from the peer ends the channel in the
// code's terminal state (namespace-failed{remote-error}); the non-fatal ACK_TIMEOUT only
// asks for a resync: the hub stops sending and waits for the round
// (docs/protocol.md#namespace-errors, docs/protocol.md#resync); so does RESYNC_REQUIRED.
func TestS13_HubRemoteErrors(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	w := f.dial(peerID)
	t.Run("fatal", func(t *testing.T) {
		ns, _ := f.create()
		doc := newYDoc(t, 200)
		f.live(w, ns, doc)
		m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeApplyFailed, ns, "x")
		must(t, err)
		w.send(m)
		waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedRemoteError)
		if got := nsErrors(f.rec, observer.SideHub, ns); len(got) != 1 || got[0] != "APPLY_FAILED/received" {
			t.Fatalf("namespace-error %v", got)
		}
		must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("x", 1.0)))
		w.quiet()
	})
	for _, tc := range []struct {
		name string
		msg  func(ns protocol.NamespaceID) protocol.Message
	}{
		{"ACK_TIMEOUT", func(ns protocol.NamespaceID) protocol.Message {
			m, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeAckTimeout, ns, "x")
			return m
		}},
		{"RESYNC_REQUIRED", func(ns protocol.NamespaceID) protocol.Message {
			return &protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, _ := f.create()
			doc := newYDoc(t, 200)
			f.live(w, ns, doc)
			w.send(tc.msg(ns))
			waitPath(t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
				observer.ChannelReconciling, observer.ChannelLive, observer.ChannelNeedsResync)
			must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("x", 1.0)))
			w.quiet()
			f.round(w, ns, doc, 2)
			if doc.app()["x"] != 1.0 {
				t.Fatalf("peer app %v", doc.app())
			}
		})
	}
}

// TestS23_1_OverCapLiveUpdate: without chunking a live update over maxUpdateBytes cannot be
// sent (docs/protocol.md#sending-and-relaying, docs/protocol.md#events). With an empty queue
// the send fails: resync-required {send-failed, update-too-large} with the sampled queue,
// RESYNC_REQUIRED, needs-resync — and the round's diff carries the update. With updates queued
// it is dropped alone: update-dropped, no resync, the channel stays live, the queued updates
// still go, and the next reconciliation repairs it.
func TestS23_1_OverCapLiveUpdate(t *testing.T) {
	slowAcks(t) // one acknowledgement opens one slot of the window
	cfg := nsConfig(t)
	cfg.MaxSyncDiffBytes, cfg.MaxBootstrapBytes, cfg.MaxFrameBytes = 16<<10, 16<<10, 17<<10
	cfg.MaxQueuedControlBytes = 64 << 10
	must(t, cfg.Validate())
	big := strings.Repeat("B", cfg.MaxUpdateBytes)

	t.Run("empty queue", func(t *testing.T) {
		f := newNSHub(t, cfg, persistence.Options{})
		w := f.dial(peerID)
		ns, doc := f.liveNS(w, 200)
		must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("big", big)))
		if r, _ := expect[*protocol.ResyncRequired](w); r.ReasonCode != protocol.ResyncSendQueueOverflow {
			t.Fatalf("reason %q", r.ReasonCode)
		}
		rs := eventsOf[observer.ResyncRequired](f.rec, observer.SideHub)
		if len(rs) != 1 || rs[0].Cause != observer.ResyncSendFailed {
			t.Fatalf("resync-required %+v", rs)
		}
		sf, _ := rs[0].SendFailure.Get()
		if sf.Reason != observer.SendUpdateTooLarge || sf.UpdateBytes <= cfg.MaxUpdateBytes || sf.MaxUpdateBytes != cfg.MaxUpdateBytes ||
			sf.QueuedUpdateCount != 0 || sf.ChannelState != observer.ChannelNeedsResync || sf.ConnectionState != observer.ConnReady {
			t.Fatalf("send failure %+v", sf)
		}
		f.round(w, ns, doc, 2)
		if doc.app()["big"] != big {
			t.Fatal("the round did not carry the over-cap update")
		}
	})
	t.Run("queued updates", func(t *testing.T) {
		f := newNSHub(t, cfg, persistence.Options{})
		w := f.dial(peerID)
		ns, doc := f.liveNS(w, 200)
		hub := newYDoc(t, 100)
		var inFlight []uint32
		for i := range cfg.MaxInFlightUpdates {
			must(t, writeLocal(t, f.reg, ns, hub.set(fmt.Sprint("w", i), 1.0)))
			up, seq := expect[*protocol.Update](w)
			doc.apply(up.Update)
			inFlight = append(inFlight, seq)
		}
		must(t, writeLocal(t, f.reg, ns, hub.set("queued", 1.0)))
		must(t, writeLocal(t, f.reg, ns, newYDoc(t, 101).set("big", big)))
		testkit.Eventually(t, wait, "update-dropped", func() bool { return len(eventsOf[observer.UpdateDropped](f.rec, observer.SideHub)) == 1 })
		d := eventsOf[observer.UpdateDropped](f.rec, observer.SideHub)[0]
		if d.Reason != observer.DropUpdateTooLarge || d.QueuedUpdateCount != 1 || d.InFlightCount != cfg.MaxInFlightUpdates || d.ChannelState != observer.ChannelLive {
			t.Fatalf("update-dropped %+v", d)
		}
		w.quiet() // no RESYNC_REQUIRED
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: inFlight[0]})
		up, _ := expect[*protocol.Update](w)
		doc.apply(up.Update)
		if doc.app()["queued"] != 1.0 || doc.app()["big"] != nil {
			t.Fatalf("peer app after the queued update: %v", doc.app())
		}
		if n := len(eventsOf[observer.ResyncRequired](f.rec, observer.SideHub)); n != 0 {
			t.Fatalf("%d resync-required", n)
		}
		f.round(w, ns, doc, 2) // the next reconciliation
		if doc.app()["big"] != big {
			t.Fatal("the reconciliation did not repair the dropped update")
		}
	})
}

// TestS23_4_ObserverNeverChangesTheWire: the same exchange gives the same frames with no
// observer and with an observer that panics on every event
// (docs/protocol.md#delivery-and-clocks: delivery is isolated, observation never changes
// protocol state); the recorder beside the panicking observer still gets every event.
func TestS23_4_ObserverNeverChangesTheWire(t *testing.T) {
	script := func(t *testing.T, obs observer.Observer, rec *observertest.Recorder) []string {
		f := newNSHubObserved(t, nsConfig(t), persistence.Options{}, obs, rec)
		ns, _ := f.create()
		w := f.dial(peerID)
		var got []string
		log := func(fr protocol.Frame) { got = append(got, fmt.Sprintf("%s#%d", fr.Type(), fr.Sequence)) }
		doc := newYDoc(t, 200)
		f.bootstrap(w, ns, doc)
		f.round(w, ns, doc, 1)
		w.quiet()
		must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("a", 1.0)))
		fr := w.recv()
		log(fr)
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: fr.Sequence})
		w.send(&protocol.Update{NamespaceID: ns, Update: doc.set("b", 2.0)})
		log(w.recv())
		w.send(&protocol.Update{NamespaceID: ns, Update: doc.setMeta("x", 1.0)})
		log(w.recv())
		for _, fr := range w.barrier() {
			log(fr)
		}
		return got
	}
	base := script(t, nil, &observertest.Recorder{})
	rec := &observertest.Recorder{}
	panicky := observer.Multi(observer.ObserverFunc(func(observer.Event) { panic("observer failure") }), rec)
	observed := script(t, panicky, rec)
	if !slices.Equal(base, observed) {
		t.Fatalf("frames differ:\n without observer %v\n with a panicking observer %v", base, observed)
	}
	if len(base) != 3 || !strings.HasPrefix(base[2], "ERROR") {
		t.Fatalf("frames %v", base)
	}
	protected := 0
	for _, e := range eventsOf[observer.NamespaceError](rec, observer.SideHub) {
		if e.Code == observer.NsErrProtectedFieldMutation {
			protected++
		}
	}
	if protected != 1 || rec.Count(observer.TypeUpdateApplied) != 1 {
		t.Fatalf("the recorder beside the panicking observer missed events: %d PROTECTED_FIELD_MUTATION, %d update-applied",
			protected, rec.Count(observer.TypeUpdateApplied))
	}
}

// TestS17_HubConnectionShedDeclaresResync: when a peer reads nothing, the connection's
// budget of queued plus unflushed bytes overflows and the largest namespace queue is shed
// (docs/protocol.md#backpressure): that namespace declares RESYNC_REQUIRED
// (resync-required{connection-shed}) and its round, once the peer reads again, repairs what
// was dropped.
func TestS17_HubConnectionShedDeclaresResync(t *testing.T) {
	cfg := nsConfig(t)
	cfg.MaxSyncDiffBytes, cfg.MaxBootstrapBytes, cfg.MaxFrameBytes = 16<<10, 16<<10, 17<<10
	cfg.MaxQueuedControlBytes = 64 << 10
	must(t, cfg.Validate())
	f := newNSHub(t, cfg, persistence.Options{})
	a, _ := f.create()
	b, _ := f.create()
	w, hubEnd := f.dialEnds(peerID, 1)
	docs := map[protocol.NamespaceID]*ydoc{a: newYDoc(t, 200), b: newYDoc(t, 201)}
	f.live(w, a, docs[a])
	f.live(w, b, docs[b])

	hubEnd.BlockWrites() // the peer's socket takes nothing more
	writers := map[protocol.NamespaceID]*ydoc{a: newYDoc(t, 100), b: newYDoc(t, 101)}
	value := strings.Repeat("s", 900)
	shed := func() []observer.ResyncRequired {
		var out []observer.ResyncRequired
		for _, r := range eventsOf[observer.ResyncRequired](f.rec, observer.SideHub) {
			if r.Cause == observer.ResyncConnectionShed {
				out = append(out, r)
			}
		}
		return out
	}
	for i := 0; len(shed()) == 0; i++ {
		if i == 40 {
			t.Fatal("no shed after 40 writes")
		}
		for _, ns := range []protocol.NamespaceID{a, b} {
			must(t, writeLocal(t, f.reg, ns, writers[ns].set(fmt.Sprint("k", i), value)))
		}
		time.Sleep(time.Millisecond) // let the pulls run: the shed needs both queues filled
	}
	hubEnd.UnblockWrites()
	// Everything the hub had to send, UPDATEs acknowledged on the way: a RESYNC_REQUIRED
	// for each shed namespace.
	declared := map[protocol.NamespaceID]bool{}
	for pending := true; pending; {
		pending = false
		for _, fr := range w.barrier() {
			switch m := fr.Message.(type) {
			case *protocol.Update:
				docs[m.NamespaceID].apply(m.Update)
				w.send(&protocol.UpdateAck{NamespaceID: m.NamespaceID, AckedSequence: fr.Sequence})
				pending = true // acknowledgements may free more
			case *protocol.ResyncRequired:
				declared[m.NamespaceID] = true
			default:
				t.Fatalf("unexpected %s", fr.Type())
			}
		}
	}
	victims := map[protocol.NamespaceID]bool{}
	for _, r := range shed() {
		victims[protocol.MustNamespaceID(r.NamespaceID)] = true
	}
	if len(declared) == 0 || !maps.Equal(declared, victims) {
		t.Fatalf("RESYNC_REQUIRED for %v, shed %v", declared, victims)
	}
	for ns := range victims {
		f.round(w, ns, docs[ns], 2)
		if got, want := docs[ns].app(), appOf(t, f.reg, ns); !sameApp(got, want) {
			t.Fatalf("after the round the peer has %d keys of the shed namespace, the hub %d", len(got), len(want))
		}
	}
}

// TestS10_2_UnknownAckClosesTheConnection: an UPDATE_ACK naming no UPDATE the hub sent on
// that namespace, or one of another namespace, is the connection-fatal ACK_STATE_VIOLATION
// (docs/protocol.md#the-ack-window).
func TestS10_2_UnknownAckClosesTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		ack  func(ns, other protocol.NamespaceID, seq uint32) protocol.Message
	}{
		{"unknown sequence", func(ns, _ protocol.NamespaceID, seq uint32) protocol.Message {
			return &protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq + 100}
		}},
		{"other namespace", func(_, other protocol.NamespaceID, seq uint32) protocol.Message {
			return &protocol.UpdateAck{NamespaceID: other, AckedSequence: seq}
		}},
		{"twice", func(ns, _ protocol.NamespaceID, seq uint32) protocol.Message {
			return &protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newNSHub(t, nsConfig(t), persistence.Options{})
			w := f.dial(peerID)
			ns, _ := f.liveNS(w, 200)
			other, _ := f.liveNS(w, 201)
			must(t, writeLocal(t, f.reg, ns, newYDoc(t, 100).set("a", 1.0)))
			_, seq := expect[*protocol.Update](w)
			if tc.name == "twice" {
				w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
			}
			w.send(tc.ack(ns, other, seq))
			if code, ec := w.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeAckStateViolation {
				t.Fatalf("close %d %s", code, ec)
			}
		})
	}
}

// TestS13_2_HubInternalErrorWhenTheRegistryCloses: a namespace whose runtime goes away under
// its session (here the registry shuts down first) fails with INTERNAL_ERROR
// (namespace-failed{session-missing}); the connection goes on.
func TestS13_2_HubInternalErrorWhenTheRegistryCloses(t *testing.T) {
	f := newNSHub(t, nsConfig(t), persistence.Options{})
	w := f.dial(peerID)
	ns, _ := f.liveNS(w, 200)
	must(t, f.reg.Close(ctxT(t)))
	w.expectError(ns, protocol.CodeInternalError)
	waitFailed(t, f.rec, observer.SideHub, ns, observer.FailedSessionMissing)
	w.quiet()
}
