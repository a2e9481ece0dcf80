package ws_test

import (
	"context"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// The operator's view of a hub connection: since when it is ready, the round trip of its
// last ping, its load, and per namespace the live updates sent, acknowledged and in
// flight — the last asked of the owner goroutine, the rest published by it.
func TestIntrospection(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	p.end.SetAutoPong(false)
	h := f.handshake(p)

	cs := f.hub.Connections()
	if len(cs) != 1 || cs[0].State != observer.ConnReady || !cs[0].ReadyAt.Equal(epoch) || cs[0].PingRTT != 0 ||
		cs[0].PeerInstanceID != peerID || cs[0].ConnectionID == "" {
		t.Fatalf("after the handshake: %+v", cs)
	}

	// A ping answered 30 ms later (on the connection's clock).
	payload := pingOnce(t, f, p, 1)
	f.clk.Advance(30 * time.Millisecond)
	p.end.Pong(payload)
	testkit.Eventually(t, wait, "the round trip", func() bool { return f.hub.Connections()[0].PingRTT == 30*time.Millisecond })

	// Two live updates of ns1 sent by the hub, one acknowledged.
	var seqs []uint32
	h.do(t, func(s seam.Session) {
		out := s.Outbox(ns1, func() bool { return true })
		for _, b := range [][]byte{{1, 2, 3}, {4, 5}} {
			must(t, out.Enqueue(seam.DataItem{Bytes: b, Sent: func(si seam.SentInfo) {}}))
		}
	})
	for range 2 {
		fr := p.recv()
		if fr.Type() != protocol.TypeUpdate {
			t.Fatalf("got %v, want UPDATE", fr.Type())
		}
		seqs = append(seqs, fr.Sequence)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// Asked of an idle connection (its owner goroutine gone), the question starts one.
	testkit.Eventually(t, wait, "the owner idle", func() bool { return ws.OwnersIdle(f.hub) })
	flows := f.hub.NamespaceFlows(ctx, ns1.String())
	if len(flows) != 1 || flows[0].UpdatesSent != 2 || flows[0].UpdatesAcked != 0 || flows[0].InFlight != 2 || flows[0].PeerInstanceID != peerID {
		t.Fatalf("two sent: %+v", flows)
	}
	testkit.Eventually(t, wait, "the published load", func() bool { return f.hub.Connections()[0].InFlight == 2 })
	p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: seqs[0]})
	testkit.Eventually(t, wait, "the ACK delivered", func() bool { return len(h.framesOf(protocol.TypeUpdateAck)) == 1 })
	testkit.Eventually(t, wait, "the owner idle", func() bool { return ws.OwnersIdle(f.hub) })
	flows = f.hub.NamespaceFlows(ctx, ns1.String())
	if len(flows) != 1 || flows[0].UpdatesSent != 2 || flows[0].UpdatesAcked != 1 || flows[0].InFlight != 1 {
		t.Fatalf("one acknowledged: %+v", flows)
	}
	if c := f.hub.Connections()[0]; c.InFlight != 1 || c.QueuedBytes != 0 {
		t.Fatalf("published load %+v", c)
	}
	// A namespace the connection does not carry, and a malformed id: nothing.
	if flows := f.hub.NamespaceFlows(ctx, ns2.String()); len(flows) != 0 {
		t.Fatalf("flows of ns2: %+v", flows)
	}
	if flows := f.hub.NamespaceFlows(ctx, "ns-nope"); flows != nil {
		t.Fatalf("flows of a malformed id: %+v", flows)
	}
	// A context that has ended: no wait.
	done, stop := context.WithCancel(context.Background())
	stop()
	f.hub.NamespaceFlows(done, ns1.String())
}
