package ws_test

import (
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Contract-conformance tests of the namespace layer: each one pins a rule of the contract
// that an earlier version of the layer broke.

// TestS9_4_PeerAckTimeoutWhileWaitingForItsWindow: a peer in needs-resync waits for its
// in-flight window before it starts the round (§9.4); when the window ends by an ACK
// timeout instead of acknowledgements (§18: given up, not resent), the round must start
// then — the given-up acknowledgements never reach the namespace again, so waiting for them
// would leave the namespace in needs-resync for good.
func TestS9_4_PeerAckTimeoutWhileWaitingForItsWindow(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, id, snap := f.create()
	f.target(ns)
	w := f.connect()
	hubDoc := newYDoc(t, 300)
	f.live(w, ns, id, snap, hubDoc)
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
