package namespace_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Contract-conformance tests of the namespace layer: each one pins a rule of the contract
// that an earlier version of the layer broke.

// TestS9_4_PeerAckTimeoutWhileWaitingForItsWindow: a peer in needs-resync waits for its
// in-flight window before it starts the round (docs/protocol.md#resync); when the window ends
// by an ACK timeout instead of acknowledgements (docs/protocol.md#timeouts: given up, not
// resent), the round must start then — the given-up acknowledgements never reach the namespace
// again, so waiting for them would leave the namespace in needs-resync for good.
func TestS9_4_PeerAckTimeoutWhileWaitingForItsWindow(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	must(t, writeLocal(t, f.reg, ns, newYDoc(t, 400).set("a", 1.0)))
	_, seq := expect[*protocol.Update](w) // never acknowledged

	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	f.waitState(ns, observer.ChannelNeedsResync)
	w.quiet() // the window is not empty: no round yet

	f.clk.Advance(cfg.AckTimeout)
	if e := w.expectError(ns, protocol.CodeAckTimeout); e.RelatedSequence != seq {
		t.Fatalf("ACK_TIMEOUT %+v, want related %d", e, seq)
	}
	f.hubRound(w, ns, hubDoc)
	f.waitState(ns, observer.ChannelLive)
	if hubDoc.app()["a"] != 1.0 {
		t.Fatalf("hub app %v: the round did not repair the unacknowledged update", hubDoc.app())
	}
}

// TestS23_1_PeerDegradedStep2IsOneBypassEvent: every successful apply is reported by exactly
// one event, and a degraded one — from any source, a Step2 diff included — by
// degraded-bypass-applied (docs/protocol.md#events "apply 成功路径互斥规则",
// docs/protocol.md#degraded-bypass), never also by sync-diff-applied.
func TestS23_1_PeerDegradedStep2IsOneBypassEvent(t *testing.T) {
	var faults persistencetest.Faults
	f := newNSPeerWith(t, nsConfig(t), persistence.Options{CommitHook: faults.Hook, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	ns, _, w, hubDoc := f.liveTarget()
	faults.Fail(true)
	defer faults.Fail(false)
	w.send(&protocol.Update{NamespaceID: ns, Update: hubDoc.set("first", 1.0)})
	expect[*protocol.UpdateAck](w)
	testkit.Eventually(t, wait, "the store failing", func() bool { return !f.store.Healthy() })

	// A round whose hub diff carries a change the peer lacks.
	hubDoc.set("in-diff", 2.0)
	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	s1, s1seq := expect[*protocol.SyncStep1](w)
	step2 := w.send(&protocol.SyncStep2{NamespaceID: ns, SyncRoundID: s1.SyncRoundID, RelatedStep1Sequence: s1seq, Update: hubDoc.diff(s1.StateVector)})
	h1 := w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: s1.SyncRoundID, StateVector: hubDoc.sv()})
	for range 2 {
		fr := w.recv()
		switch m := fr.Message.(type) {
		case *protocol.SyncApplied:
			if m.AckedSequence != step2 {
				t.Fatalf("SYNC_APPLIED acks %d, want %d", m.AckedSequence, step2)
			}
		case *protocol.SyncStep2:
			if m.RelatedStep1Sequence != h1 {
				t.Fatalf("peer Step2 related %d, want %d", m.RelatedStep1Sequence, h1)
			}
			w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: s1.SyncRoundID, AckedSequence: fr.Sequence})
		default:
			t.Fatalf("unexpected %s", fr.Type())
		}
	}
	f.waitState(ns, observer.ChannelLive)
	if f.peerApp(ns)["in-diff"] != 2.0 {
		t.Fatal("the hub diff was not applied")
	}
	var bypass []uint32
	testkit.Eventually(t, wait, "degraded-bypass-applied for the Step2", func() bool {
		bypass = nil
		for _, e := range eventsOf[observer.DegradedBypassApplied](f.rec, observer.SidePeer) {
			if e.Sequence == step2 {
				bypass = append(bypass, e.Sequence)
			}
		}
		return len(bypass) > 0
	})
	w.quiet()
	if len(bypass) != 1 {
		t.Fatalf("%d degraded-bypass-applied events for the Step2", len(bypass))
	}
	for _, e := range eventsOf[observer.SyncDiffApplied](f.rec, observer.SidePeer) {
		if e.Sequence == step2 {
			t.Fatal("sync-diff-applied for a degraded Step2 apply as well")
		}
	}
}

// gateClock is a registry stage clock that, once armed, holds the next apply slot at its
// start until released: a test can then act while an apply is admitted but not settled.
// The first reading after arming is the admission's (on the caller's goroutine); the
// second is the slot's start, in the sequencer.
type gateClock struct {
	readings atomic.Int32 // readings left before the hold; 0: not armed
	held     chan struct{}
	release  chan struct{}
}

func newGateClock() *gateClock {
	return &gateClock{held: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateClock) arm() { g.readings.Store(2) }

func (g *gateClock) Now() time.Time {
	if g.readings.Load() > 0 && g.readings.Add(-1) == 0 {
		g.held <- struct{}{}
		<-g.release
	}
	return time.Now()
}

// TestS12_S23_1_ApplySettledAfterOwnCloseIsReported: an UPDATE admitted before this side
// sent CLOSE_NAMESPACE settles after it: it is not acknowledged
// (docs/protocol.md#closing-a-namespace: the close does not wait for acknowledgements), but
// the successful apply is still reported by exactly one update-applied
// (docs/protocol.md#events), like a Step2 in the same position.
func TestS12_S23_1_ApplySettledAfterOwnCloseIsReported(t *testing.T) {
	gate := newGateClock()
	f := newNSPeerOpts(t, nsConfig(t), nsPeerOptions{stageClock: gate})
	ns, _, w, hubDoc := f.liveTarget()

	gate.arm()
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: hubDoc.set("late", 1.0)})
	<-gate.held // admitted, held in its slot
	removed := make(chan error, 1)
	go func() { removed <- f.tc.RemoveTarget(ctxT(t), ns.String()) }()
	closeNS, closeSeq := expect[*protocol.CloseNamespace](w)
	if closeNS.NamespaceID != ns {
		t.Fatalf("CLOSE_NAMESPACE %+v", closeNS)
	}
	close(gate.release)
	testkit.Eventually(t, wait, "update-applied of the held apply", func() bool {
		for _, e := range eventsOf[observer.UpdateApplied](f.rec, observer.SidePeer) {
			if e.NamespaceID == ns.String() && e.Sequence == seq {
				return true
			}
		}
		return false
	})
	for _, fr := range w.barrier() {
		if _, ok := fr.Message.(*protocol.UpdateAck); ok {
			t.Fatalf("an UPDATE_ACK after this side's CLOSE_NAMESPACE: %s", describe(fr))
		}
	}
	w.send(&protocol.CloseOK{NamespaceID: ns, AckedSequence: closeSeq})
	must(t, <-removed)
	n := 0
	for _, e := range eventsOf[observer.UpdateApplied](f.rec, observer.SidePeer) {
		if e.NamespaceID == ns.String() && e.Sequence == seq {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d update-applied for the held apply, want 1", n)
	}
}
