package ws_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

func TestS6_HandshakeReady(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := wstest.Hello(peerID, hubID)
	p.send(h)
	fr := p.recv()
	ack, ok := fr.Message.(*protocol.HelloAck)
	if !ok {
		t.Fatalf("got %v, want HELLO_ACK", fr.Type())
	}
	if fr.Sequence != 1 || ack.HubInstanceID != hubID || ack.ProtocolVersion != 1 ||
		ack.SelectedCapabilities != protocol.CapChunkedUpdate || ack.ConnectionNonce != h.ConnectionNonce || ack.ConnectionID == "" {
		t.Fatalf("HELLO_ACK %+v (seq %d)", ack, fr.Sequence)
	}
	th := f.hs.next(t)
	if got := th.s.PeerInstanceID(); got != peerID {
		t.Fatalf("session peer %q", got)
	}
	if th.s.ConnectionID() != ack.ConnectionID || !th.s.Negotiated().Chunked() {
		t.Fatalf("session %q %+v", th.s.ConnectionID(), th.s.Negotiated())
	}
	testkit.Eventually(t, wait, "ready", func() bool { return f.connState(t) == observer.ConnReady })
	evs := f.rec.OfType(observer.TypeConnectionStateChanged)
	if len(evs) != 1 {
		t.Fatalf("state events %v", evs)
	}
	e := evs[0].Payload.(observer.ConnectionStateChanged)
	if e.From != observer.ConnHandshaking || e.To != observer.ConnReady || e.ConnectionID.Or("") != ack.ConnectionID {
		t.Fatalf("state event %+v", e)
	}
}

func TestS6_GenerationV1OffersNoChunking(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.Generation = protocol.GenerationV1
	f := newHubFixture(t, cfg, nil)
	p := f.connect(64)
	p.send(wstest.Hello(peerID, hubID))
	if ack := p.recv().Message.(*protocol.HelloAck); ack.SelectedCapabilities != 0 {
		t.Fatalf("v1 hub selected %v", ack.SelectedCapabilities)
	}
	// docs/protocol.md#chunked-transfers: a 0x42 frame on a connection without
	// CAP_CHUNKED_UPDATE is connection fatal.
	f.hs.next(t)
	p.send(&protocol.UpdateChunk{Kind: protocol.KindLiveUpdate, NamespaceID: ns1, TransferID: 1, ChunkCount: 1, TotalBytes: 1, Bytes: []byte{1}})
	if code, ec := p.expectClose(); code != protocol.CloseProtocolError || ec != protocol.CodeUnsupportedMessageType {
		t.Fatalf("close %d %s", code, ec)
	}
}

// frame builds a raw frame with seq and then lets mutate edit its bytes.
func rawFrame(t *testing.T, seq uint32, m protocol.Message, mutate func([]byte) []byte) []byte {
	t.Helper()
	cfg := wstest.SmallConfig(t)
	b, err := protocol.NewCodec(cfg.Limits(), protocol.CapChunkedUpdate).AppendFrame(nil, seq, m)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		b = mutate(b)
	}
	return b
}

// TestS13_1_ConnectionErrors drives every connection error of
// docs/protocol.md#connection-errors against the hub and checks the ERROR frame (when framing
// is trusted) and the close code of docs/protocol.md#close-codes.
func TestS13_1_ConnectionErrors(t *testing.T) {
	open := &protocol.OpenNamespace{NamespaceID: ns1}
	cases := []struct {
		name string
		code protocol.ErrorCode
		ws   protocol.CloseCode
		run  func(t *testing.T, f *hubFixture, p *rawPeer)
	}{
		{"bad magic", protocol.CodeBadMagic, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 1, wstest.Hello(peerID, hubID), func(b []byte) []byte { b[0] = 'X'; return b }))
		}},
		{"envelope version", protocol.CodeUnsupportedEnvelopeVersion, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 1, wstest.Hello(peerID, hubID), func(b []byte) []byte { b[4] = 2; return b }))
		}},
		{"short message", protocol.CodeMalformedFrame, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw([]byte("NMCR"))
		}},
		{"malformed payload", protocol.CodeMalformedFrame, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 1, wstest.Hello(peerID, hubID), func(b []byte) []byte {
				b = append(b, 0) // trailing byte, declared in the length
				binary.BigEndian.PutUint32(b[12:16], uint32(len(b)-20))
				return b
			}))
		}},
		{"length mismatch", protocol.CodeFrameLengthMismatch, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 1, wstest.Hello(peerID, hubID), func(b []byte) []byte { return append(b, 0) }))
		}},
		{"frame too large", protocol.CodeFrameTooLarge, 1009, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(make([]byte, f.cfg.MaxFrameBytes+1))
		}},
		{"flags", protocol.CodeUnsupportedFlags, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 1, wstest.Hello(peerID, hubID), func(b []byte) []byte { b[7] = 1; return b }))
		}},
		{"unknown type", protocol.CodeUnsupportedMessageType, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 1, wstest.Hello(peerID, hubID), func(b []byte) []byte { b[5] = 0x7f; return b }))
		}},
		{"sequence", protocol.CodeSequenceViolation, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.sendRaw(rawFrame(t, 2, wstest.Hello(peerID, hubID), nil))
		}},
		{"hello required", protocol.CodeHelloRequired, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			p.send(open)
		}},
		{"hello timeout", protocol.CodeHelloTimeout, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			if !f.clk.WaitForTimers(1, wait) {
				t.Fatal("hello timer not armed")
			}
			f.clk.Advance(f.cfg.HelloTimeout)
		}},
		{"protocol version", protocol.CodeUnsupportedProtocolVersion, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			h := wstest.Hello(peerID, hubID)
			h.ProtocolVersions = []uint64{3, 2}
			p.send(h)
		}},
		{"capability", protocol.CodeUnsupportedCapability, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			h := wstest.Hello(peerID, hubID)
			h.RequiredCapabilities = 0x4
			p.send(h)
		}},
		{"peer identity", protocol.CodeInstanceIdentityMismatch, 1008, func(t *testing.T, f *hubFixture, p *rawPeer) {
			h := wstest.Hello(peerID, hubID)
			h.PeerInstanceID = "peer-b" // not the identity authenticated at the upgrade
			p.send(h)
		}},
		{"hub identity", protocol.CodeInstanceIdentityMismatch, 1008, func(t *testing.T, f *hubFixture, p *rawPeer) {
			h := wstest.Hello(peerID, hubID)
			h.ExpectedHubInstanceID = "other-hub"
			p.send(h)
		}},
		{"second hello", protocol.CodeUnsupportedMessageType, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			f.handshake(p)
			p.send(wstest.Hello(peerID, hubID))
		}},
		{"wrong direction", protocol.CodeUnsupportedMessageType, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			f.handshake(p)
			p.send(&protocol.OpenOK{NamespaceID: ns1, ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1})
		}},
		{"text message", protocol.CodeMalformedFrame, 1002, nil}, // covered by the real WebSocket tests
		{"policy: open admission", protocol.CodeConnectionPolicyViolation, 1008, func(t *testing.T, f *hubFixture, p *rawPeer) {
			f.handshake(p) // the handler answers no OPEN: 4 are admitted, 16 wait, one more is refused
			for i := range f.cfg.MaxConcurrentOpens + f.cfg.MaxEarlyFrames + 1 {
				p.send(&protocol.OpenNamespace{NamespaceID: wstest.NamespaceID(i + 1)})
			}
		}},
		{"ack state", protocol.CodeAckStateViolation, 1002, func(t *testing.T, f *hubFixture, p *rawPeer) {
			f.handshake(p)
			p.send(&protocol.UpdateAck{NamespaceID: ns1, AckedSequence: 1}) // seq 1 was HELLO_ACK
		}},
		{"control backpressure", protocol.CodeConnectionBackpressure, 1011, func(t *testing.T, f *hubFixture, p *rawPeer) {
			h := f.handshake(p)
			p.end.SetAutoPong(true)
			// The peer reads nothing: the first frame fills the pipe, the writer blocks, and
			// unflushed control bytes pass maxQueuedControlBytes.
			h.do(t, func(s seam.Session) {
				for i := range 8 {
					_, _ = s.Send(&protocol.BootstrapSnapshot{NamespaceID: wstest.NamespaceID(i + 1), ReplicationID: "0123456789abcdef0123456789abcdef",
						ReplicationEpoch: 1, Snapshot: make([]byte, 1000)})
				}
			})
		}},
		{"internal error", protocol.CodeInternalError, 1011, func(t *testing.T, f *hubFixture, p *rawPeer) {
			h := f.handshake(p)
			h.do(t, func(s seam.Session) { s.Fail(protocol.CodeInternalError, "test") })
		}},
	}
	seen := map[protocol.ErrorCode]bool{}
	for _, tc := range cases {
		seen[tc.code] = true
		if tc.run == nil {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			f := newHubFixture(t, wstest.SmallConfig(t), nil)
			capacity := 64
			if tc.code == protocol.CodeConnectionBackpressure {
				capacity = 1
			}
			p := f.connect(capacity)
			tc.run(t, f, p)
			code, ec := p.expectClose()
			if code != tc.ws {
				t.Errorf("close code %d, want %d", code, tc.ws)
			}
			if tc.code != protocol.CodeConnectionBackpressure && ec != tc.code {
				// A blocked pipe may swallow the best-effort ERROR of a backpressure close.
				t.Errorf("ERROR code %q, want %q", ec, tc.code)
			}
			testkit.Eventually(t, wait, "connection-failed", func() bool { return f.rec.Count(observer.TypeConnectionFailed) == 1 })
			ev := f.rec.OfType(observer.TypeConnectionFailed)[0].Payload.(observer.ConnectionFailed)
			if string(ev.Code) != string(tc.code) || ev.WSCloseCode != int(tc.ws) {
				t.Errorf("connection-failed %+v", ev)
			}
		})
	}
	for _, spec := range protocol.ConnectionErrors() {
		if !seen[spec.Code] {
			t.Errorf("connection error code %s not exercised", spec.Code)
		}
	}
}

func TestS2_AcceptWithoutTrustedIdentity(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	a := f.connect(1) // a valid connection for contrast
	_ = a
	for _, id := range []string{"", "Peer A", "1abc"} {
		if err := f.hub.Accept(nil, auth.PeerIdentity{PeerInstanceID: id}); !errors.Is(err, ws.ErrNoTrustedIdentity) {
			t.Fatalf("Accept(%q) = %v", id, err)
		}
	}
}

func TestGUIDE6_OpenAdmission(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	for i := range 6 {
		p.send(&protocol.OpenNamespace{NamespaceID: wstest.NamespaceID(i + 1)})
	}
	p.send(&protocol.CloseNamespace{NamespaceID: wstest.NamespaceID(5), ReasonCode: "remove"}) // waits behind its OPEN
	testkit.Eventually(t, wait, "4 OPENs admitted", func() bool { return len(h.framesOf(protocol.TypeOpenNamespace)) == 4 })
	h.do(t, func(s seam.Session) {}) // let the owner settle
	if n := len(h.framesOf(protocol.TypeOpenNamespace)); n != 4 {
		t.Fatalf("%d OPENs delivered, want 4 at once", n)
	}
	// Answering one OPEN admits the next; an ERROR answers too.
	h.do(t, func(s seam.Session) {
		_, _ = s.Send(&protocol.OpenOK{NamespaceID: wstest.NamespaceID(1), ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1})
		m, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeNamespaceNotFound, wstest.NamespaceID(2), "not found")
		_, _ = s.Send(m)
	})
	testkit.Eventually(t, wait, "held OPENs admitted", func() bool { return len(h.framesOf(protocol.TypeCloseNamespace)) == 1 })
	opens := h.framesOf(protocol.TypeOpenNamespace)
	if len(opens) != 6 || opens[4].Message.(*protocol.OpenNamespace).NamespaceID != wstest.NamespaceID(5) {
		t.Fatalf("opens %v", opens)
	}
}

func TestS6_3_GoAwayDrain(t *testing.T) {
	for _, tc := range []struct {
		reason   string
		openWant protocol.MessageType // what a late OPEN gets: ERROR, or nothing (0)
	}{
		{protocol.GoAwayServerRestarting, protocol.TypeError},
		{protocol.GoAwayServerShuttingDown, protocol.TypeError},
		{protocol.GoAwayReauthRequired, 0},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			f := newHubFixture(t, wstest.SmallConfig(t), func(h *testHandler) { h.autoOpen, h.autoAck = true, true })
			p := f.connect(64)
			h := f.handshake(p)
			p.send(&protocol.OpenNamespace{NamespaceID: ns1})
			if fr := p.recv(); fr.Type() != protocol.TypeOpenOK {
				t.Fatalf("got %v", fr.Type())
			}
			if tc.reason == protocol.GoAwayReauthRequired {
				f.table.Revoke(auth.PeerRevocation{PeerInstanceID: peerID})
			} else {
				f.hub.GoAway(tc.reason, 10*time.Second, 2*time.Second, true)
			}
			fr := p.recv()
			g, ok := fr.Message.(*protocol.GoAway)
			if !ok || g.ReasonCode != tc.reason {
				t.Fatalf("got %v %+v", fr.Type(), fr.Message)
			}
			testkit.Eventually(t, wait, "drain reported", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.drains) == 1 })
			testkit.Eventually(t, wait, "draining", func() bool { return f.connState(t) == observer.ConnDraining })
			// Late frames that start work are not admitted; a close handshake still is.
			p.send(&protocol.OpenNamespace{NamespaceID: ns2})
			p.send(&protocol.Update{NamespaceID: ns1, Update: []byte{1}})
			p.send(&protocol.SyncStep1{NamespaceID: ns1, SyncRoundID: 1, StateVector: []byte{0}})
			p.send(&protocol.CloseNamespace{NamespaceID: ns1, ReasonCode: "drain"})
			testkit.Eventually(t, wait, "close delivered", func() bool { return len(h.framesOf(protocol.TypeCloseNamespace)) == 1 })
			if tc.openWant == protocol.TypeError {
				fr := p.recv()
				em, ok := fr.Message.(*protocol.ErrorMessage)
				if !ok || em.Code != protocol.CodeNamespaceReopenRequiresReconnect || em.NamespaceID != ns2 {
					t.Fatalf("late OPEN answered with %v %+v", fr.Type(), fr.Message)
				}
			}
			if n := len(h.framesOf(protocol.TypeUpdate)) + len(h.framesOf(protocol.TypeSyncStep1)) + len(h.framesOf(protocol.TypeOpenNamespace)); n != 1 {
				t.Fatalf("%d work frames delivered during the drain, want only the first OPEN", n)
			}
			h.do(t, func(s seam.Session) {
				if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: []byte{1}}); !errors.Is(err, seam.ErrDraining) {
					t.Errorf("enqueue while draining: %v", err)
				}
				s.Quiesced()
			})
			if code, _ := p.expectClose(); code != protocol.CloseGoingAway {
				t.Fatalf("close %d, want 1001", code)
			}
		})
	}
}

func TestS6_3_GoAwayDeadline(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	f.handshake(p)
	f.hub.GoAway(protocol.GoAwayServerRestarting, 10*time.Second, 0, false)
	if fr := p.recv(); fr.Type() != protocol.TypeGoAway || fr.Message.(*protocol.GoAway).HasRetryAfter {
		t.Fatalf("got %v", fr.Message)
	}
	f.clk.Advance(10*time.Second - time.Millisecond)
	select {
	case <-p.end.Done():
		t.Fatal("closed before the drain deadline")
	default:
	}
	f.clk.Advance(time.Millisecond)
	if code, _ := p.expectClose(); code != protocol.CloseGoingAway {
		t.Fatalf("close %d", code)
	}
	evs := f.rec.OfType(observer.TypeConnectionStateChanged)
	var path []observer.ConnectionState
	for _, e := range evs {
		path = append(path, e.Payload.(observer.ConnectionStateChanged).To)
	}
	want := []observer.ConnectionState{observer.ConnReady, observer.ConnDraining, observer.ConnClosed}
	if len(path) != 3 || path[0] != want[0] || path[1] != want[1] || path[2] != want[2] {
		t.Fatalf("hub connection path %v, want %v", path, want)
	}
}

func TestS19_RevokeNamespaces(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	f.table.Revoke(auth.PeerRevocation{PeerInstanceID: "peer-b", Namespaces: []protocol.NamespaceID{ns1}}) // another peer
	f.table.Revoke(auth.PeerRevocation{PeerInstanceID: peerID, Namespaces: []protocol.NamespaceID{ns2}})
	testkit.Eventually(t, wait, "revocation", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.revoked) == 1 })
	if r := h.revoked[0]; len(r.Namespaces) != 1 || r.Namespaces[0] != ns2 {
		t.Fatalf("revoked %+v", r)
	}
	if g, ok := h.s.Authorize(ns1); !ok || g.Owner != "default" {
		t.Fatalf("authorize %+v %v", g, ok)
	}
}

// TestS21_ShutdownClosesWithoutGoAway: the hub's service close
// (docs/protocol.md#restart-and-shutdown): 1001 without GOAWAY, and Shutdown waits for
// admitted work.
func TestS21_ShutdownClosesWithoutGoAway(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	var end func()
	h.do(t, func(s seam.Session) { end = s.BeginWork() })
	done := make(chan error, 1)
	go func() { done <- f.hub.Shutdown(context.Background()) }()
	code, ec := p.expectClose()
	if code != protocol.CloseGoingAway || ec != "" {
		t.Fatalf("close %d %q", code, ec)
	}
	if n := len(p.end.Written()); n != 1 { // only our HELLO
		t.Fatalf("peer wrote %d frames", n)
	}
	testkit.Eventually(t, wait, "closed", func() bool { _, ok := h.closeInfo(); return ok })
	if info, _ := h.closeInfo(); info.Cause != seam.CauseShutdown || info.Code != protocol.CloseGoingAway {
		t.Fatalf("close info %+v", info)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v before admitted work drained", err)
	case <-time.After(20 * time.Millisecond):
	}
	end()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// After shutdown, Accept refuses.
	a, b := newPair()
	defer a.Close(1000, "")
	if err := f.hub.Accept(b, auth.PeerIdentity{PeerInstanceID: peerID}); !errors.Is(err, ws.ErrHubShutdown) {
		t.Fatalf("Accept after shutdown: %v", err)
	}
}

// TestS23_1_AdmissionRejections: refusals after the upgrade and before the handshake are
// auth-upgrade-rejected events without connectionId: an oversized first message, a peer
// that goes away.
func TestS23_1_AdmissionRejections(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	p.sendRaw(make([]byte, f.cfg.MaxFrameBytes+1))
	if code, _ := p.expectClose(); code != protocol.CloseTooBig {
		t.Fatalf("close %d", code)
	}
	q := f.connect(64)
	q.end.Drop()
	testkit.Eventually(t, wait, "two rejections", func() bool { return f.rec.Count(observer.TypeAuthUpgradeRejected) == 2 })
	var reasons []observer.AuthRejectReason
	for _, e := range f.rec.OfType(observer.TypeAuthUpgradeRejected) {
		reasons = append(reasons, e.Payload.(observer.AuthUpgradeRejected).Reason)
	}
	if reasons[0] != observer.AuthFrameTooLarge || reasons[1] != observer.AuthPeerDisconnected {
		t.Fatalf("reasons %v", reasons)
	}
	// A connection that completed its handshake is no longer an upgrade rejection.
	r := f.connect(64)
	f.handshake(r)
	r.end.Drop()
	testkit.Eventually(t, wait, "gone", func() bool { return len(f.hub.Connections()) == 0 })
	if n := f.rec.Count(observer.TypeAuthUpgradeRejected); n != 2 {
		t.Fatalf("%d rejections", n)
	}
}
