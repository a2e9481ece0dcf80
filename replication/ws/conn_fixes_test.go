package ws_test

import (
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// TestS10_2_LateAckAfterTerminalSent: when this side ends a namespace (a fatal namespace
// ERROR, IDENTITY_CHANGED or CLOSE_OK), the remote may already have acknowledged frames of
// that namespace before the end reached it. Each such acknowledgement is accepted once and
// not delivered; a second one is still ACK_STATE_VIOLATION.
func TestS10_2_LateAckAfterTerminalSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, s seam.Session)
	}{
		{"namespace error", func(t *testing.T, s seam.Session) {
			m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeProtectedFieldMutation, ns1, "refused")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Send(m); err != nil {
				t.Fatal(err)
			}
		}},
		{"identity changed", func(t *testing.T, s seam.Session) {
			if _, err := s.Send(&protocol.IdentityChanged{NamespaceID: ns1, ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 2}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHubFixture(t, wstest.SmallConfig(t), nil)
			p := f.connect(64)
			h := f.handshake(p)
			var updSeq, step2Seq uint32
			h.do(t, func(s seam.Session) {
				if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: []byte{1, 2, 3}, Sent: func(si seam.SentInfo) { updSeq = si.Sequence }}); err != nil {
					t.Fatal(err)
				}
			})
			p.recv() // UPDATE
			h.do(t, func(s seam.Session) {
				var err error
				if step2Seq, err = s.Send(&protocol.SyncStep2{NamespaceID: ns1, SyncRoundID: 1, RelatedStep1Sequence: 1, Update: []byte{0, 0}}); err != nil {
					t.Fatal(err)
				}
				tc.end(t, s)
			})
			p.recv() // SYNC_STEP2
			p.recv() // the terminal frame
			// Both acknowledgements left the peer before the terminal frame reached it.
			p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: updSeq})
			p.send(&protocol.SyncApplied{NamespaceID: ns1, SyncRoundID: 1, AckedSequence: step2Seq})
			p.send(&protocol.OpenNamespace{NamespaceID: ns2}) // a frame that is delivered
			testkit.Eventually(t, wait, "the frame after the late acks", func() bool { return len(h.framesOf(protocol.TypeOpenNamespace)) == 1 })
			if n := len(h.framesOf(protocol.TypeUpdateAck)) + len(h.framesOf(protocol.TypeSyncApplied)); n != 0 {
				t.Fatalf("%d late acknowledgements delivered to the namespace layer", n)
			}
			// A second acknowledgement of the same frame is a violation.
			p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: updSeq})
			if code, ec := p.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeAckStateViolation {
				t.Fatalf("close %d %s", code, ec)
			}
		})
	}
}

// TestS17_OutboxCloseAfterConnectionClose: an Outbox with queued data may be closed after
// its connection closed (the namespace layer releases its channels in HandleClosed).
func TestS17_OutboxCloseAfterConnectionClose(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	var o seam.Outbox
	h.do(t, func(s seam.Session) {
		o = s.Outbox(ns1, func() bool { return false })
		if err := o.Enqueue(seam.DataItem{Bytes: []byte{1}}); err != nil {
			t.Fatal(err)
		}
		s.Fail(protocol.CodeInternalError, "test")
		o.Close() // after the close decision: must not panic
		if n, _ := o.Len(); n != 0 {
			t.Fatalf("%d items left", n)
		}
	})
	p.expectClose()
}

// TestS18_GivenUpAcksAreBounded: after this side declares ACK_TIMEOUT
// (docs/protocol.md#timeouts: no resend), the UPDATEs it gave up may still be acknowledged,
// once each and without reaching the namespace layer — but only the newest 1,024 of them, so
// that a remote that never acknowledges cannot grow the connection's bookkeeping without
// limit; an older acknowledgement is then unknown (ACK_STATE_VIOLATION,
// docs/protocol.md#the-ack-window).
func TestS18_GivenUpAcksAreBounded(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	const rounds, perRound = 11, 100 // 1,100 given up, beyond the bound
	var seqs []uint32
	for range rounds {
		for range perRound {
			h.do(t, func(s seam.Session) {
				if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: []byte{1, 2, 3}, Sent: func(si seam.SentInfo) { seqs = append(seqs, si.Sequence) }}); err != nil {
					t.Fatal(err)
				}
			})
			p.recv() // UPDATE, never acknowledged
		}
		h.do(t, func(s seam.Session) {
			m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeAckTimeout, ns1, "ack timeout")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Send(m); err != nil {
				t.Fatal(err)
			}
		})
		p.recv() // ERROR ACK_TIMEOUT
	}
	if len(seqs) != rounds*perRound {
		t.Fatalf("%d updates sent", len(seqs))
	}
	// The newest given-up UPDATE may still be acknowledged, once, and is not delivered.
	p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: seqs[len(seqs)-1]})
	p.send(&protocol.OpenNamespace{NamespaceID: ns2}) // a frame that is delivered
	testkit.Eventually(t, wait, "the frame after the late ack", func() bool { return len(h.framesOf(protocol.TypeOpenNamespace)) == 1 })
	if n := len(h.framesOf(protocol.TypeUpdateAck)); n != 0 {
		t.Fatalf("%d given-up acknowledgements delivered to the namespace layer", n)
	}
	// The oldest fell out of the bound.
	p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: seqs[0]})
	if code, ec := p.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeAckStateViolation {
		t.Fatalf("close %d %s", code, ec)
	}
}

// TestS23_6_LoadGauges: Hub.Load reports, from any goroutine, the live UPDATEs in flight
// (sent, neither acknowledged nor given up) and the bytes not yet written — the sources of
// the nomicore_in_flight_updates and nomicore_queued_bytes gauges.
func TestS23_6_LoadGauges(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	var seqs []uint32
	for range 3 {
		h.do(t, func(s seam.Session) {
			if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: []byte{1, 2, 3}, Sent: func(si seam.SentInfo) { seqs = append(seqs, si.Sequence) }}); err != nil {
				t.Fatal(err)
			}
		})
		p.recv()
	}
	testkit.Eventually(t, wait, "three updates in flight", func() bool { return f.hub.Load().InFlight == 3 })
	p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: seqs[0]})
	testkit.Eventually(t, wait, "two updates in flight", func() bool { return f.hub.Load().InFlight == 2 })
	h.do(t, func(s seam.Session) { // the rest are given up at an ACK timeout
		m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeAckTimeout, ns1, "ack timeout")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	})
	p.recv()
	testkit.Eventually(t, wait, "no update in flight", func() bool { return f.hub.Load().InFlight == 0 })
	// Bytes handed to a writer that cannot write stay counted until written.
	p.hub.BlockWrites()
	h.do(t, func(s seam.Session) {
		if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: make([]byte, 300)}); err != nil {
			t.Fatal(err)
		}
	})
	testkit.Eventually(t, wait, "queued bytes", func() bool { return f.hub.Load().QueuedBytes >= 300 })
	p.hub.UnblockWrites()
	p.recv()
	testkit.Eventually(t, wait, "nothing queued", func() bool { return f.hub.Load().QueuedBytes == 0 })
}

// TestS12_CrossedClosesComplete: both sides send CLOSE_NAMESPACE (a drain on each side
// does this). This side answers the remote's close first; the remote's CLOSE_OK for this
// side's close must still reach the namespace layer, which waits for it to end the
// namespace — otherwise a drain lasts until its deadline.
func TestS12_CrossedClosesComplete(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), func(h *testHandler) { h.autoOpen = true })
	p := f.connect(64)
	h := f.handshake(p)
	p.send(&protocol.OpenNamespace{NamespaceID: ns1})
	p.recv() // OPEN_OK
	var hubClose uint32
	h.do(t, func(s seam.Session) {
		var err error
		if hubClose, err = s.Send(&protocol.CloseNamespace{NamespaceID: ns1, ReasonCode: "drain"}); err != nil {
			t.Fatal(err)
		}
	})
	peerClose := p.send(&protocol.CloseNamespace{NamespaceID: ns1, ReasonCode: "drain"}) // crossing
	p.recv()                                                                             // the hub's CLOSE_NAMESPACE
	testkit.Eventually(t, wait, "the peer's close delivered", func() bool { return len(h.framesOf(protocol.TypeCloseNamespace)) == 1 })
	h.do(t, func(s seam.Session) {
		if _, err := s.Send(&protocol.CloseOK{NamespaceID: ns1, AckedSequence: peerClose}); err != nil {
			t.Fatal(err)
		}
	})
	if fr := p.recv(); fr.Type() != protocol.TypeCloseOK {
		t.Fatalf("got %v, want CLOSE_OK", fr.Type())
	}
	p.send(&protocol.CloseOK{NamespaceID: ns1, AckedSequence: hubClose})
	testkit.Eventually(t, wait, "the peer's CLOSE_OK delivered", func() bool { return len(h.framesOf(protocol.TypeCloseOK)) == 1 })
	// It was awaited once: a second one is a violation.
	p.send(&protocol.CloseOK{NamespaceID: ns1, AckedSequence: hubClose})
	if code, ec := p.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeAckStateViolation {
		t.Fatalf("close %d %s", code, ec)
	}
}
