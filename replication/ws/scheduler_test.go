package ws_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws/wstest"
	"github.com/nomicore/nomicore/yjs"
)

func upd(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

// frameNS returns the namespace of a data frame.
func frameNS(f protocol.Frame) protocol.NamespaceID {
	return f.Message.(protocol.NamespaceMessage).Namespace()
}

// TestS17_RoundRobin: one data frame per namespace per turn; control frames go ahead of
// queued data; sequences are consecutive in write order.
func TestS17_RoundRobin(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	var sent []seam.SentInfo
	h.do(t, func(s seam.Session) {
		for i, n := range []int{3, 2, 1} {
			o := s.Outbox(wstest.NamespaceID(i+1), nil)
			for j := range n {
				if err := o.Enqueue(seam.DataItem{Bytes: upd(10, byte(10*i+j)), Sent: func(si seam.SentInfo) { sent = append(sent, si) }}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Sent in the same callback: goes before every queued data frame.
		if _, err := s.Send(&protocol.SyncStep1{NamespaceID: ns3, SyncRoundID: 1, StateVector: []byte{0}}); err != nil {
			t.Fatal(err)
		}
	})
	want := []protocol.NamespaceID{ns3, wstest.NamespaceID(1), wstest.NamespaceID(2), wstest.NamespaceID(3), wstest.NamespaceID(1), wstest.NamespaceID(2), wstest.NamespaceID(1)}
	seq := uint32(1) // HELLO_ACK
	for i, w := range want {
		fr := p.recv()
		seq++
		if fr.Sequence != seq || frameNS(fr) != w {
			t.Fatalf("frame %d: %v seq %d ns %v, want seq %d ns %v", i, fr.Type(), fr.Sequence, frameNS(fr), seq, w)
		}
		if i == 0 && fr.Type() != protocol.TypeSyncStep1 || i > 0 && fr.Type() != protocol.TypeUpdate {
			t.Fatalf("frame %d is %v", i, fr.Type())
		}
	}
	h.do(t, func(seam.Session) {})
	if len(sent) != 6 || sent[0].Sequence != 3 || sent[5].Sequence != 8 {
		t.Fatalf("sent %+v", sent)
	}
	// update-sent carries the stamped sequence (docs/protocol.md#events).
	evs := f.rec.OfType(observer.TypeUpdateSent)
	if len(evs) != 6 || evs[0].Payload.(observer.UpdateSent).Sequence != 3 || evs[0].Payload.(observer.UpdateSent).Bytes != 10 {
		t.Fatalf("update-sent %v", evs)
	}
}

// TestS17_WindowGate: a namespace whose window is full is skipped; others go on. A gate that
// refused is not asked again until Wake (or a change of its queue).
func TestS17_WindowGate(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	open, asked := false, 0
	h.do(t, func(s seam.Session) {
		a := s.Outbox(ns1, func() bool { asked++; return open })
		b := s.Outbox(ns2, nil)
		_ = a.Enqueue(seam.DataItem{Bytes: upd(5, 1)})
		_ = b.Enqueue(seam.DataItem{Bytes: upd(5, 2)})
		_ = b.Enqueue(seam.DataItem{Bytes: upd(5, 3)})
	})
	for range 2 {
		if fr := p.recv(); frameNS(fr) != ns2 {
			t.Fatalf("gated namespace sent: %v", frameNS(fr))
		}
	}
	h.do(t, func(s seam.Session) {
		if n, _ := s.Outbox(ns1, nil).Len(); n != 1 {
			t.Fatalf("gated queue holds %d", n)
		}
		open = true // the window opened, but nobody said so: the gate is not asked again
	})
	h.do(t, func(s seam.Session) {})
	h.do(t, func(s seam.Session) {
		if asked != 1 {
			t.Fatalf("the refusing gate was asked %d times", asked)
		}
		s.Outbox(ns1, nil).Wake() // the window opened (an ACK arrived); the pump runs after this callback
	})
	if fr := p.recv(); frameNS(fr) != ns1 {
		t.Fatalf("got %v", frameNS(fr))
	}
}

// TestS10_3_ChunkedTransfer: an update over maxUpdateBytes leaves as UPDATE_CHUNK frames,
// one per turn, interleaved with another namespace's updates; the receiver's assembler
// rebuilds it; SentInfo carries the last chunk's sequence; ACK correlation works.
func TestS10_3_ChunkedTransfer(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), func(h *testHandler) {})
	p := f.connect(64)
	h := f.handshake(p)
	big := upd(2500, 7)
	for i := range big {
		big[i] = byte(i)
	}
	var info seam.SentInfo
	h.do(t, func(s seam.Session) {
		if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: big, Sent: func(si seam.SentInfo) { info = si }}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			_ = s.Outbox(ns2, nil).Enqueue(seam.DataItem{Bytes: upd(3, byte(i))})
		}
	})
	asm := protocol.NewAssembler(&f.cfg, clock.NewFake(epoch))
	var order []protocol.MessageType
	var done protocol.Transfer
	for range 6 {
		fr := p.recv()
		order = append(order, fr.Type())
		if c, ok := fr.Message.(*protocol.UpdateChunk); ok {
			tr, err := asm.Add(c, fr.Sequence, protocol.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Complete {
				done = tr
			}
		}
	}
	wantOrder := []protocol.MessageType{protocol.TypeUpdateChunk, protocol.TypeUpdate, protocol.TypeUpdateChunk, protocol.TypeUpdate, protocol.TypeUpdateChunk, protocol.TypeUpdate}
	for i := range wantOrder {
		if order[i] != wantOrder[i] {
			t.Fatalf("order %v, want %v", order, wantOrder)
		}
	}
	if !bytes.Equal(done.Data, big) || done.ChunkCount != 3 || done.TransferID != 1 {
		t.Fatalf("assembled %d bytes in %d chunks (transfer %d)", len(done.Data), done.ChunkCount, done.TransferID)
	}
	h.do(t, func(seam.Session) {})
	if !info.Chunked || info.Sequence != done.AckSequence || info.ChunkCount != 3 {
		t.Fatalf("sent info %+v, last chunk %d", info, done.AckSequence)
	}
	if n := f.rec.Count(observer.TypeChunkedUpdateSent); n != 1 {
		t.Fatalf("%d chunked-update-sent", n)
	}
	// The receiver acknowledges the last chunk's sequence; acknowledging a middle chunk
	// would be ACK_STATE_VIOLATION.
	p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: done.AckSequence})
	testkit.Eventually(t, wait, "ack delivered", func() bool { return len(h.framesOf(protocol.TypeUpdateAck)) == 1 })
	p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: done.AckSequence}) // a duplicate
	if code, ec := p.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeAckStateViolation {
		t.Fatalf("close %d %s", code, ec)
	}
}

// TestS17_ItemChecks: items that cannot be framed are refused with the namespace code.
func TestS17_ItemChecks(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.Generation = protocol.GenerationV1
	f := newHubFixture(t, cfg, nil)
	p := f.connect(64)
	h := f.handshake(p)
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns1, nil)
		for _, tc := range []struct {
			item seam.DataItem
			code protocol.ErrorCode
		}{
			{seam.DataItem{Bytes: upd(1025, 1)}, protocol.CodeUpdateTooLarge},
			{seam.DataItem{Kind: protocol.KindSnapshot, Bytes: upd(2000, 1)}, protocol.CodeBootstrapTooLarge},
			{seam.DataItem{Kind: protocol.KindSyncDiff, Bytes: upd(2000, 1)}, protocol.CodeSyncDiffTooLarge},
		} {
			err := o.Enqueue(tc.item)
			pe, ok := err.(*protocol.Error)
			if !ok || pe.Code != tc.code || pe.Scope != protocol.ScopeNamespace {
				t.Errorf("kind %v: %v, want %s", tc.item.Kind, err, tc.code)
			}
		}
		if _, err := s.Send(&protocol.Update{NamespaceID: ns1, Update: []byte{1}}); !errors.Is(err, seam.ErrNotAllowed) {
			t.Errorf("Send(UPDATE) = %v", err)
		}
		if _, err := s.Send(&protocol.OpenNamespace{NamespaceID: ns1}); !errors.Is(err, seam.ErrNotAllowed) {
			t.Errorf("hub Send(OPEN_NAMESPACE) = %v", err)
		}
	})
}

// TestS17_QueueOverflow: over maxQueuedUpdateCount the namespace's unsent queue is dropped.
func TestS17_QueueOverflow(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns1, func() bool { return false })
		for i := range f.cfg.MaxQueuedUpdateCount {
			if err := o.Enqueue(seam.DataItem{Bytes: upd(1, byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Enqueue(seam.DataItem{Bytes: upd(1, 0)}); !errors.Is(err, seam.ErrQueueOverflow) {
			t.Fatalf("overflow: %v", err)
		}
		if n, b := o.Len(); n != 0 || b != 0 {
			t.Fatalf("queue after overflow: %d items, %d bytes", n, b)
		}
	})
}

// TestS17_WatermarksAndShedding: a peer that reads nothing pauses the pump at the high
// watermark (send-paused), overflow of the connection budget sheds the largest queued
// namespace to the low watermark (HandleShed), and reading resumes the pump below the low
// watermark (send-resumed). The hub goroutines never block on the slow peer.
func TestS17_WatermarksAndShedding(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.MaxQueuedBytesPerConnection = 10240
	f := newHubFixture(t, cfg, nil)
	p := f.connect(1)
	h := f.handshake(p)
	// Fill the socket side: 1000-byte updates (1058-byte frames) until the pump pauses at
	// 4096 unflushed bytes: four frames are handed over; the pipe takes one, the writer
	// blocks on the second.
	h.do(t, func(s seam.Session) {
		for i := range 5 {
			if err := s.Outbox(ns3, nil).Enqueue(seam.DataItem{Bytes: upd(1000, byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
	})
	testkit.Eventually(t, wait, "send-paused", func() bool { return f.rec.Count(observer.TypeSendPaused) == 1 })
	const frameLen = 1058
	var st seam.QueueStats
	testkit.Eventually(t, wait, "first frame flushed", func() bool {
		h.do(t, func(s seam.Session) { st = s.Stats() })
		return st.UnflushedData == 3*frameLen
	})
	if !st.Paused || st.QueuedBytes != 1000 {
		t.Fatalf("stats after pause %+v", st)
	}
	// Queue more while paused: the connection budget (10240 bytes of queued + unflushed)
	// overflows on ns2's second item and sheds the largest queues, whole, until the queued
	// side is at most the low watermark: ns1 (5000 bytes), then ns3 (1000).
	h.do(t, func(s seam.Session) {
		a, b := s.Outbox(ns1, nil), s.Outbox(ns2, nil)
		for i := range 5 {
			if err := a.Enqueue(seam.DataItem{Bytes: upd(1000, byte(i))}); err != nil {
				t.Fatalf("ns1 item %d: %v", i, err)
			}
		}
		if err := b.Enqueue(seam.DataItem{Bytes: upd(500, 9)}); err != nil {
			t.Fatal(err)
		}
		if err := b.Enqueue(seam.DataItem{Bytes: upd(1000, 8)}); err != nil {
			t.Fatalf("ns2 after shedding: %v", err)
		}
		if n, _ := a.Len(); n != 0 {
			t.Fatalf("ns1 not shed: %d items", n)
		}
		if q := s.Stats().QueuedBytes; q != 1500 {
			t.Fatalf("queued %d after shedding, want ns2's 1500", q)
		}
		// Strict admission: an item that does not fit even after shedding is refused.
		if err := s.Outbox(wstest.NamespaceID(4), nil).Enqueue(seam.DataItem{Bytes: upd(8000, 1)}); !errors.Is(err, seam.ErrConnectionShed) {
			t.Fatalf("oversized item: %v", err)
		}
	})
	testkit.Eventually(t, wait, "sheds reported", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.sheds) == 3 })
	if h.sheds[0] != ns1 || h.sheds[1] != ns3 || h.sheds[2] != ns2 {
		t.Fatalf("shed %v, want ns1, ns3, ns2", h.sheds)
	}
	// Now read: the four frames handed before the pause arrive, and the pump resumes
	// below the low watermark.
	for range 4 {
		if fr := p.recv(); fr.Type() != protocol.TypeUpdate || frameNS(fr) != ns3 {
			t.Fatalf("got %v for %v", fr.Type(), frameNS(fr))
		}
	}
	testkit.Eventually(t, wait, "send-resumed", func() bool { return f.rec.Count(observer.TypeSendResumed) == 1 })
}

// TestS10_2_AckCorrelation: each acknowledgement must name an unacknowledged frame of the
// matching type and namespace (docs/protocol.md#the-ack-window,
// docs/protocol.md#bootstrap_ack, docs/protocol.md#round-rules,
// docs/protocol.md#closing-a-namespace); anything else is ACK_STATE_VIOLATION. A chunked
// snapshot is acknowledged by its last chunk's sequence.
func TestS10_2_AckCorrelation(t *testing.T) {
	const rid = "0123456789abcdef0123456789abcdef"
	type sent struct{ step2, closeNS, snapshot uint32 }
	setup := func(t *testing.T) (*hubFixture, *rawPeer, *testHandler, sent) {
		f := newHubFixture(t, wstest.SmallConfig(t), nil)
		p := f.connect(64)
		h := f.handshake(p)
		var st sent
		h.do(t, func(s seam.Session) {
			var err error
			if st.step2, err = s.Send(&protocol.SyncStep2{NamespaceID: ns1, SyncRoundID: 1, RelatedStep1Sequence: 1, Update: []byte{0, 0}}); err != nil {
				t.Fatal(err)
			}
			if st.closeNS, err = s.Send(&protocol.CloseNamespace{NamespaceID: ns2, ReasonCode: "remove"}); err != nil {
				t.Fatal(err)
			}
			err = s.Outbox(ns3, nil).Enqueue(seam.DataItem{Kind: protocol.KindSnapshot, Bytes: upd(1500, 3),
				Binding: protocol.Binding{ReplicationID: rid, ReplicationEpoch: 1}, Sent: func(si seam.SentInfo) { st.snapshot = si.Sequence }})
			if err != nil {
				t.Fatal(err)
			}
		})
		for range 4 { // Step2, CLOSE, two snapshot chunks
			p.recv()
		}
		h.do(t, func(seam.Session) {})
		return f, p, h, st
	}
	t.Run("matching", func(t *testing.T) {
		f, p, h, st := setup(t)
		p.send(&protocol.SyncApplied{NamespaceID: ns1, SyncRoundID: 1, AckedSequence: st.step2})
		p.send(&protocol.CloseOK{NamespaceID: ns2, AckedSequence: st.closeNS})
		p.send(&protocol.BootstrapAck{NamespaceID: ns3, AckedSequence: st.snapshot})
		testkit.Eventually(t, wait, "acks delivered", func() bool { return len(h.framesOf(protocol.TypeBootstrapAck)) == 1 })
		if len(h.framesOf(protocol.TypeSyncApplied)) != 1 || len(h.framesOf(protocol.TypeCloseOK)) != 1 {
			t.Fatal("acknowledgements missing")
		}
		if n := f.rec.Count(observer.TypeChunkedSnapshotSent); n != 1 {
			t.Fatalf("%d chunked-snapshot-sent", n)
		}
	})
	for _, tc := range []struct {
		name string
		ack  func(st sent) protocol.Message
	}{
		{"wrong type", func(st sent) protocol.Message { return &protocol.UpdateAck{NamespaceID: ns1, AckedSequence: st.step2} }},
		{"wrong namespace", func(st sent) protocol.Message {
			return &protocol.SyncApplied{NamespaceID: ns2, SyncRoundID: 1, AckedSequence: st.step2}
		}},
		{"middle chunk", func(st sent) protocol.Message {
			return &protocol.BootstrapAck{NamespaceID: ns3, AckedSequence: st.snapshot - 1}
		}},
		{"unsent sequence", func(st sent) protocol.Message { return &protocol.CloseOK{NamespaceID: ns2, AckedSequence: 99} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p, _, st := setup(t)
			p.send(tc.ack(st))
			if code, ec := p.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeAckStateViolation {
				t.Fatalf("close %d %s", code, ec)
			}
		})
	}
}

// coalesceThree queues the one-byte updates 0, 1 and 2 on o, whose own Sent must never run,
// and coalesces them by joining their bytes; the merged item's Sent appends to *sent.
func coalesceThree(t *testing.T, o seam.Outbox, sent *[]seam.SentInfo) {
	t.Helper()
	for i := range 3 {
		_ = o.Enqueue(seam.DataItem{Bytes: []byte{byte(i)}, Sent: func(seam.SentInfo) { t.Error("a merged item's own Sent ran") }})
	}
	join := func(u [][]byte, _ []*yjs.Shared) ([]byte, error) { return bytes.Join(u, nil), nil }
	if err := o.Coalesce(join, func(si seam.SentInfo) { *sent = append(*sent, si) }); err != nil {
		t.Fatal(err)
	}
}

// TestS10_1_CoalesceUnsent: unsent updates may be merged into one frame
// (docs/protocol.md#sending-and-relaying).
func TestS10_1_CoalesceUnsent(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	open := false
	var sent []seam.SentInfo
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns1, func() bool { return open })
		coalesceThree(t, o, &sent)
		if n, b := o.Len(); n != 1 || b != 3 {
			t.Fatalf("after coalescing: %d items, %d bytes", n, b)
		}
		open = true
	})
	fr := p.recv()
	if u, ok := fr.Message.(*protocol.Update); !ok || !bytes.Equal(u.Update, []byte{0, 1, 2}) {
		t.Fatalf("got %v %+v", fr.Type(), fr.Message)
	}
	h.do(t, func(seam.Session) {})
	if len(sent) != 1 || sent[0].Sequence != fr.Sequence {
		t.Fatalf("sent %+v", sent)
	}
}

// TestSentInfoCarriesTheItem: an item's Sent hears of its bytes and its Tag, so one callback
// serves every item.
func TestSentInfoCarriesTheItem(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	var sent []seam.SentInfo
	record := func(si seam.SentInfo) { sent = append(sent, si) }
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns1, nil)
		for i, n := range []int{5, 7} {
			if err := o.Enqueue(seam.DataItem{Bytes: upd(n, byte(i)), Sent: record, Tag: int64(40 + i)}); err != nil {
				t.Fatal(err)
			}
		}
	})
	p.recv()
	p.recv()
	h.do(t, func(seam.Session) {})
	if len(sent) != 2 || sent[0].Bytes != 5 || sent[0].Tag != 40 || sent[1].Bytes != 7 || sent[1].Tag != 41 {
		t.Fatalf("sent %+v", sent)
	}
}

// TestS10_1_CoalesceBehindATransfer: a live update whose chunks are leaving is not merged
// with the updates queued behind it; those are merged into one UPDATE that follows its last
// chunk.
func TestS10_1_CoalesceBehindATransfer(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(1)
	h := f.handshake(p)
	var sent []seam.SentInfo
	h.do(t, func(s seam.Session) {
		if err := s.Outbox(ns2, nil).Enqueue(seam.DataItem{Bytes: upd(5000, 8), Sent: func(si seam.SentInfo) { sent = append(sent, si) }}); err != nil {
			t.Fatal(err)
		}
	})
	// Four of its five chunks are handed over before the high watermark pauses the pump.
	testkit.Eventually(t, wait, "send-paused", func() bool { return f.rec.Count(observer.TypeSendPaused) == 1 })
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns2, nil)
		coalesceThree(t, o, &sent)
		if n, b := o.Len(); n != 2 || b != 5003 {
			t.Fatalf("after coalescing: %d items, %d bytes; want the transfer and one merged update", n, b)
		}
	})
	asm := protocol.NewAssembler(&f.cfg, clock.NewFake(epoch))
	for i := range 5 {
		fr := p.recv()
		c, ok := fr.Message.(*protocol.UpdateChunk)
		if !ok || c.ChunkIndex != uint32(i) {
			t.Fatalf("frame %d: %v, want chunk %d", i, fr.Type(), i)
		}
		whole, err := asm.Add(c, fr.Sequence, protocol.Binding{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 4 && (!whole.Complete || !bytes.Equal(whole.Data, upd(5000, 8))) {
			t.Fatal("the transfer did not reassemble to its update")
		}
	}
	fr := p.recv()
	if u, ok := fr.Message.(*protocol.Update); !ok || !bytes.Equal(u.Update, []byte{0, 1, 2}) {
		t.Fatalf("after the transfer: %v %+v", fr.Type(), fr.Message)
	}
	h.do(t, func(seam.Session) {})
	if len(sent) != 2 || !sent[0].Chunked || sent[1].Chunked || sent[1].Sequence != fr.Sequence {
		t.Fatalf("sent %+v", sent)
	}
}

// TestS8_1_BulkItems: snapshots and sync diffs go ahead of the live updates that have not
// started, with their own gate; they are outside the live-update limits and the shed ledger,
// so an overflow or a Clear drops the updates and keeps them; Close drops them too, and the
// rest of a transfer in progress is not sent.
func TestS8_1_BulkItems(t *testing.T) {
	const rid = "0123456789abcdef0123456789abcdef"
	cfg := wstest.SmallConfig(t)
	cfg.MaxChunkedBootstrapBytes, cfg.MaxChunkedSyncDiffBytes = 8192, 8192
	f := newHubFixture(t, cfg, nil)
	p := f.connect(64)
	h := f.handshake(p)
	live, bulkOpen := false, false
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns1, func() bool { return live })
		for i := range f.cfg.MaxQueuedUpdateCount {
			if err := o.Enqueue(seam.DataItem{Bytes: upd(10, byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
		// 5000 bytes: more than maxQueuedUpdateBytes allows beside the updates queued.
		err := o.Enqueue(seam.DataItem{Kind: protocol.KindSnapshot, Bytes: upd(5000, 9),
			Binding: protocol.Binding{ReplicationID: rid, ReplicationEpoch: 1}, Gate: func() bool { return bulkOpen }})
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if n, b := o.Len(); n != f.cfg.MaxQueuedUpdateCount || b != 10*n {
			t.Fatalf("Len %d/%d counts the snapshot", n, b)
		}
		if st := s.Stats(); st.QueuedTransferBytes != 5000 || st.QueuedBytes != 10*f.cfg.MaxQueuedUpdateCount {
			t.Fatalf("stats %+v", st)
		}
		// An overflow drops the live updates only.
		if err := o.Enqueue(seam.DataItem{Bytes: upd(10, 0)}); !errors.Is(err, seam.ErrQueueOverflow) {
			t.Fatalf("overflow: %v", err)
		}
		if st := s.Stats(); st.QueuedTransferBytes != 5000 || st.QueuedBytes != 0 {
			t.Fatalf("stats after overflow %+v", st)
		}
		_ = o.Enqueue(seam.DataItem{Bytes: upd(10, 1)})
		live = true // the live gate is open, the snapshot's own is not: nothing leaves
	})
	// Nothing left while the snapshot's gate was closed: its first chunk comes first.
	h.do(t, func(s seam.Session) { bulkOpen = true; s.Outbox(ns1, nil).Wake() })
	// The snapshot leaves before the update queued before it, one chunk per turn.
	for i := range 5 {
		fr := p.recv()
		c, ok := fr.Message.(*protocol.UpdateChunk)
		if !ok || c.Kind != protocol.KindSnapshot || c.ChunkIndex != uint32(i) {
			t.Fatalf("frame %d: %v %+v", i, fr.Type(), fr.Message)
		}
	}
	if fr := p.recv(); fr.Type() != protocol.TypeUpdate {
		t.Fatalf("after the snapshot: %v", fr.Type())
	}
}

// TestS10_3_CloseStopsATransfer: Clear keeps a sync diff in progress; Close stops it, and the
// chunks not yet handed to the writer are never sent.
func TestS10_3_CloseStopsATransfer(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(1)
	h := f.handshake(p)
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns2, nil)
		if err := o.Enqueue(seam.DataItem{Kind: protocol.KindSyncDiff, Bytes: upd(5000, 8), Binding: protocol.Binding{SyncRoundID: 3}}); err != nil {
			t.Fatal(err)
		}
	})
	// Five chunks of about 1080 bytes: four are handed over before the high watermark
	// (4096) pauses the pump, and the peer reads nothing yet.
	testkit.Eventually(t, wait, "send-paused", func() bool { return f.rec.Count(observer.TypeSendPaused) == 1 })
	h.do(t, func(s seam.Session) {
		o := s.Outbox(ns2, nil)
		if info := o.Clear(); info.Items != 0 || info.TransferAborted {
			t.Fatalf("Clear dropped the diff: %+v", info)
		}
		if st := s.Stats(); st.QueuedTransferBytes != 5000 {
			t.Fatalf("stats after Clear %+v", st)
		}
		o.Close()
		if st := s.Stats(); st.QueuedTransferBytes != 0 {
			t.Fatalf("stats after Close %+v", st)
		}
	})
	for i := range 4 {
		if c, ok := p.recv().Message.(*protocol.UpdateChunk); !ok || c.ChunkIndex != uint32(i) {
			t.Fatalf("chunk %d missing", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if b, err := p.end.Recv(ctx); err == nil {
		t.Fatalf("a frame after the Close: %x", b[:min(len(b), 40)])
	}
}

// TestS17_TransfersPerConnection: at most maxConcurrentAssembliesPerConnection chunked
// transfers are in progress at once on a connection (the receiver assembles no more); the
// next one starts when one finishes, and single-frame updates go on meanwhile.
func TestS17_TransfersPerConnection(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.MaxConcurrentAssembliesPerConnection = 2
	f := newHubFixture(t, cfg, nil)
	p := f.connect(256)
	h := f.handshake(p)
	h.do(t, func(s seam.Session) {
		for i := range 3 {
			if err := s.Outbox(wstest.NamespaceID(i+1), nil).Enqueue(seam.DataItem{Bytes: upd(3000, byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.Outbox(wstest.NamespaceID(4), nil).Enqueue(seam.DataItem{Bytes: upd(10, 4)})
	})
	asm := protocol.NewAssembler(&f.cfg, clock.NewFake(epoch))
	var order []string
	for range 3*3 + 1 {
		fr := p.recv()
		switch m := fr.Message.(type) {
		case *protocol.UpdateChunk:
			if _, err := asm.Add(m, fr.Sequence, protocol.Binding{}); err != nil {
				t.Fatalf("the receiver refused a chunk: %v", err)
			}
			if asm.Len() > 2 {
				t.Fatalf("%d transfers in progress", asm.Len())
			}
			order = append(order, m.NamespaceID.String()[34:]+"/"+string(rune('0'+m.ChunkIndex)))
		case *protocol.Update:
			order = append(order, m.NamespaceID.String()[34:]+"/u")
		}
	}
	want := "1/0 2/0 4/u 1/1 2/1 1/2 2/2 3/0 3/1 3/2"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}
