package ws_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// ackCounter is a namespace layer that only counts the UPDATE_ACKs it is handed.
type ackCounter struct {
	s    seam.Session
	acks atomic.Int64
}

func (a *ackCounter) HandleFrame(f protocol.Frame) {
	if f.Type() == protocol.TypeUpdateAck {
		a.acks.Add(1)
	}
}
func (a *ackCounter) HandleRejected(*protocol.Error)                 {}
func (a *ackCounter) HandleDrain(seam.Drain)                         {}
func (a *ackCounter) HandleShed(protocol.NamespaceID, seam.ShedInfo) {}
func (a *ackCounter) HandleRevoked(auth.PeerRevocation)              {}
func (a *ackCounter) HandleClosed(seam.CloseInfo)                    {}

// allocBudgetPerUpdate is the most heap allocations one delivered update may cost on the
// hub's connection: the update handed to a namespace's Outbox, framed, written, and its
// UPDATE_ACK read, decoded, checked and handed to the namespace layer, and the update's Sent
// callback called. The count is 7: the frame's bytes, the UPDATE message and the decoded
// UPDATE_ACK — and four of the fake transport's own (a copy and a wake-up channel per
// message it carries). Queuing the item (held by value in the namespace's queue), posting
// to the owner and handing frames to the writer allocate nothing in the steady state.
const allocBudgetPerUpdate = 7

// TestAllocsPerDeliveredUpdate is a benchmark-style check (allocations, never time): the
// allocations the hub's connection makes per delivered update stay within
// allocBudgetPerUpdate.
func TestAllocsPerDeliveredUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation budget: not in -short")
	}
	cfg := protocol.DefaultConfig()
	h := &ackCounter{}
	sessions := make(chan seam.Session, 1)
	table, _ := auth.NewPeerTable(nil)
	hub, err := ws.NewHub(ws.HubOptions{Config: cfg, InstanceID: hubID, Auth: table,
		Namespaces: func(s seam.Session) seam.Handler { h.s = s; sessions <- s; return h }})
	must(t, err)
	defer hub.Shutdown(context.Background())
	peer, srv := wstest.Pair(4)
	must(t, hub.Accept(srv, auth.PeerIdentity{PeerInstanceID: peerID}))
	codec := protocol.NewCodec(cfg.Limits(), 0)
	out := protocol.NewOutbound(codec)
	hs, _, err := out.AppendFrame(nil, &protocol.Hello{PeerInstanceID: peerID, ExpectedHubInstanceID: hubID, ProtocolVersions: []uint64{1}})
	must(t, err)
	must(t, peer.Send(hs))
	ack, err := peer.Recv(context.Background())
	must(t, err)
	if ack[5] != byte(protocol.TypeHelloAck) {
		t.Fatalf("frame type %d, want HELLO_ACK", ack[5])
	}
	s := <-sessions

	const runs = 500
	// The peer's UPDATE_ACKs, encoded before the measurement: the hub's UPDATEs carry
	// sequences 2, 3, … (HELLO_ACK was 1).
	acks := make([][]byte, runs+2)
	for i := range acks {
		acks[i], _, err = out.AppendFrame(nil, &protocol.UpdateAck{NamespaceID: ns1, AckedSequence: uint32(i + 2)})
		must(t, err)
	}
	update := []byte{0, 0} // an empty Yjs update: the connection does not look inside
	var box seam.Outbox
	s.Post(func() { box = s.Outbox(ns1, nil) })
	// Each update has a Sent callback, as the namespace layer's live updates do: calling it
	// back costs nothing.
	var sent atomic.Int64
	sentFn := func(seam.SentInfo) { sent.Add(1) }
	enqueue := func() {
		_ = box.Enqueue(seam.DataItem{Kind: protocol.KindLiveUpdate, Bytes: update, Sent: sentFn})
	}
	next := 0
	deliver := func() {
		s.Post(enqueue)
		if _, err := peer.Recv(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := peer.Send(acks[next]); err != nil {
			t.Fatal(err)
		}
		next++
		for h.acks.Load() < int64(next) {
			// The owner hands the ACK over on its own goroutine.
			runtime.Gosched()
		}
	}
	deliver() // warm up: the queue, the ring and the writer exist
	allocs := testing.AllocsPerRun(runs, deliver)
	if got := sent.Load(); got != runs+2 { // the warm-up's and AllocsPerRun's own first run
		t.Fatalf("Sent called back %d times for %d updates", got, runs+2)
	}
	t.Logf("%.1f allocations per delivered update (budget %d)", allocs, allocBudgetPerUpdate)
	if allocs > allocBudgetPerUpdate {
		t.Fatalf("%.1f allocations per delivered update, over the budget of %d", allocs, allocBudgetPerUpdate)
	}
}
