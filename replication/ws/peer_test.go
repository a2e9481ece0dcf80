package ws_test

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

type peerFixture struct {
	t      *testing.T
	cfg    protocol.Config
	clk    *clock.Fake
	rec    *observertest.Recorder
	d      *wstest.Dialer
	hs     *handlers
	peer   *ws.Peer
	mu     sync.Mutex // guards states
	states []ws.PeerState
	token  string
}

func newPeerFixture(t *testing.T, cfg protocol.Config, r ws.Rand, setup func(*testHandler)) *peerFixture {
	t.Helper()
	return newPeerFixtureWith(t, cfg, r, setup, nil)
}

// newPeerFixtureWith is newPeerFixture with edit applied to the peer's options.
func newPeerFixtureWith(t *testing.T, cfg protocol.Config, r ws.Rand, setup func(*testHandler), edit func(*ws.PeerOptions)) *peerFixture {
	t.Helper()
	f := &peerFixture{t: t, cfg: cfg, clk: clock.NewFake(epoch), rec: &observertest.Recorder{}, d: wstest.NewDialer(),
		hs: newHandlers(setup), token: "tok-1"}
	if r == nil {
		r = wstest.MaxRand{}
	}
	opts := ws.PeerOptions{Config: cfg, InstanceID: peerID, HubInstanceID: hubID, URL: "ws://hub/v1/replication",
		Token:  func() (string, error) { f.mu.Lock(); defer f.mu.Unlock(); return f.token, nil },
		Dialer: f.d, Namespaces: f.hs.factory, Clock: f.clk, Rand: r, Observer: f.rec, SlowAfter: 3}
	if edit != nil {
		edit(&opts)
	}
	var err error
	f.peer, err = ws.NewPeer(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.peer.Watch(func(s ws.PeerState) { f.mu.Lock(); f.states = append(f.states, s); f.mu.Unlock() })
	t.Cleanup(func() {
		f.peer.Close()
		f.rec.AssertValid(t)
		f.rec.AssertSafe(t, "tok-1", "tok-2")
	})
	return f
}

// waitState waits until the peer has entered s (at or after position from) and returns the
// position after it.
func (f *peerFixture) waitState(from int, s ws.PeerState) int {
	f.t.Helper()
	pos := -1
	testkit.Eventually(f.t, wait, "state "+string(s), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i := from; i < len(f.states); i++ {
			if f.states[i] == s {
				pos = i + 1
				return true
			}
		}
		return false
	})
	return pos
}

func (f *peerFixture) path() []ws.PeerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ws.PeerState(nil), f.states...)
}

// rawHub plays the hub by hand on the far end of a fake dial.
type rawHub struct {
	t   testing.TB
	end *wstest.End
	out *protocol.Outbound
	in  *protocol.Inbound
	hdr string
}

func (f *peerFixture) accept() *rawHub {
	f.t.Helper()
	select {
	case d := <-f.d.Accepted:
		codec := protocol.NewCodec(f.cfg.Limits(), protocol.CapChunkedUpdate)
		return &rawHub{t: f.t, end: d.End, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec), hdr: d.Header.Get("Authorization")}
	case <-time.After(wait):
		f.t.Fatal("no dial")
		return nil
	}
}

func (h *rawHub) send(m protocol.Message) uint32 {
	h.t.Helper()
	return wstest.SendFrame(h.t, h.end, h.out, m)
}

func (h *rawHub) recv() protocol.Frame {
	h.t.Helper()
	return wstest.RecvFrame(h.t, h.end, h.in)
}

// expectClose reads until the peer closes; it returns the close code and the connection
// ERROR code the peer sent, if any.
func (h *rawHub) expectClose() (protocol.CloseCode, protocol.ErrorCode) {
	h.t.Helper()
	return wstest.RecvClose(h.t, h.end, h.in)
}

// handshake answers the peer's HELLO; ack may edit the HELLO_ACK.
func (h *rawHub) handshake(ack func(*protocol.HelloAck)) {
	h.t.Helper()
	fr := h.recv()
	hello, ok := fr.Message.(*protocol.Hello)
	if !ok {
		h.t.Fatalf("got %v, want HELLO", fr.Type())
	}
	a := &protocol.HelloAck{HubInstanceID: hubID, ProtocolVersion: 1, SelectedCapabilities: hello.OptionalCapabilities,
		ConnectionNonce: hello.ConnectionNonce, ConnectionID: "c-test"}
	if ack != nil {
		ack(a)
	}
	h.send(a)
}

// ready starts the peer (or waits for its next dial) and completes a handshake.
func (f *peerFixture) ready(from int) (*rawHub, *testHandler, int) {
	f.t.Helper()
	h := f.accept()
	h.handshake(nil)
	th := f.hs.next(f.t)
	return h, th, f.waitState(from, observer.ConnReady)
}

func (f *peerFixture) lastBackoff() observer.ConnectionBackoffScheduled {
	f.t.Helper()
	var ev []observer.Event
	testkit.Eventually(f.t, wait, "backoff event", func() bool { ev = f.rec.OfType(observer.TypeConnectionBackoffScheduled); return len(ev) > 0 })
	return ev[len(ev)-1].Payload.(observer.ConnectionBackoffScheduled)
}

func TestS15_1_StartToReady(t *testing.T) {
	f := newPeerFixture(t, wstest.SmallConfig(t), nil, nil)
	if f.peer.State() != observer.ConnStopped {
		t.Fatalf("initial state %v", f.peer.State())
	}
	f.peer.Start()
	h, th, _ := f.ready(0)
	if h.hdr != "Bearer tok-1" {
		t.Fatalf("Authorization header %q", h.hdr)
	}
	want := []ws.PeerState{observer.ConnDisconnected, observer.ConnConnecting, observer.ConnHandshaking, observer.ConnReady}
	if got := f.path(); len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("path %v, want %v", got, want)
	}
	if th.s.ConnectionID() != "c-test" || th.s.HubInstanceID() != hubID {
		t.Fatalf("session %q %q", th.s.ConnectionID(), th.s.HubInstanceID())
	}
	// connectionId appears in state events only from the handshake on
	// (docs/protocol.md#safe-fields).
	evs := f.rec.OfType(observer.TypeConnectionStateChanged)
	if len(evs) != len(want) {
		t.Fatalf("%d connection-state-changed events, want %d", len(evs), len(want))
	}
	for _, e := range evs {
		ev := e.Payload.(observer.ConnectionStateChanged)
		if ev.ConnectionID.Present() != (ev.To == observer.ConnReady) {
			t.Fatalf("event %+v", ev)
		}
	}
}

func TestS15_1_DialFailures(t *testing.T) {
	f := newPeerFixture(t, wstest.SmallConfig(t), nil, nil)
	f.d.Fail(errors.New("connection refused"), &ws.DialError{StatusCode: 401})
	f.peer.Start()
	pos := f.waitState(0, observer.ConnBackoff)
	if b := f.lastBackoff(); b.Reason != observer.BackoffDialFailed || b.Attempt != 0 || b.DelayMs != 250 {
		t.Fatalf("backoff %+v", b)
	}
	f.clk.Advance(250 * time.Millisecond)
	pos = f.waitState(pos, observer.ConnConnecting)
	// 401: a permanent configuration failure.
	pos = f.waitState(pos, observer.ConnBlocked)
	if f.d.Dials() != 2 {
		t.Fatalf("%d dials", f.d.Dials())
	}
	// blocked --config-change--> disconnected --dial--> connecting.
	f.mu.Lock()
	f.token = "tok-2"
	f.mu.Unlock()
	f.peer.ConfigChanged()
	pos = f.waitState(pos, observer.ConnDisconnected)
	pos = f.waitState(pos, observer.ConnConnecting)
	h, _, _ := f.ready(pos)
	if h.hdr != "Bearer tok-2" {
		t.Fatalf("token after change %q", h.hdr)
	}
}

// TestS15_1_CloseOutcomes drives a ready (or handshaking) connection into each close the
// contract classifies and checks the state the controller takes.
func TestS15_1_CloseOutcomes(t *testing.T) {
	type outcome struct {
		state  ws.PeerState
		reason observer.BackoffReason
	}
	backoff := func(r observer.BackoffReason) outcome { return outcome{observer.ConnBackoff, r} }
	blocked := outcome{state: observer.ConnBlocked}
	cases := []struct {
		name      string
		handshake bool // act during the handshake instead of after it
		act       func(t *testing.T, f *peerFixture, h *rawHub, th *testHandler)
		want      outcome
		wantClose protocol.CloseCode // what the peer sent, when it closed
		wantError protocol.ErrorCode
	}{
		{"hello timeout", true, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.recv() // HELLO, never answered
			f.clk.Advance(f.cfg.HelloTimeout)
		}, backoff(observer.BackoffHelloTimeout), 1002, protocol.CodeHelloTimeout},
		{"hub identity mismatch", true, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.handshake(func(a *protocol.HelloAck) { a.HubInstanceID = "other-hub" })
		}, blocked, 1008, protocol.CodeInstanceIdentityMismatch},
		{"nonce not echoed", true, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.handshake(func(a *protocol.HelloAck) { a.ConnectionNonce[0] ^= 1 })
		}, blocked, 1008, protocol.CodeConnectionPolicyViolation},
		{"unoffered version", true, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.handshake(func(a *protocol.HelloAck) { a.ProtocolVersion = 2 })
		}, blocked, 1002, protocol.CodeUnsupportedProtocolVersion},
		{"hub refuses version", true, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.recv()
			m, _ := protocol.NewErrorMessage(protocol.ScopeConnection, protocol.CodeUnsupportedProtocolVersion, protocol.NamespaceID{}, "v")
			h.send(m)
			h.end.Close(protocol.CloseProtocolError, "")
		}, blocked, 0, ""},
		{"namespace frame before HELLO_ACK", true, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.recv()
			h.send(&protocol.OpenOK{NamespaceID: ns1, ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1})
		}, blocked, 1002, protocol.CodeHelloRequired},
		{"lost transport", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.end.Drop()
		}, backoff(observer.BackoffSocketClosed), 0, ""},
		{"1001 without GOAWAY", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.end.Close(protocol.CloseGoingAway, "")
		}, backoff(observer.BackoffSocketClosed), 0, ""},
		{"1002", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			m, _ := protocol.NewErrorMessage(protocol.ScopeConnection, protocol.CodeSequenceViolation, protocol.NamespaceID{}, "s")
			h.send(m)
			h.end.Close(protocol.CloseProtocolError, "")
		}, blocked, 0, ""},
		{"1008 without ERROR", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.end.Close(protocol.ClosePolicy, "")
		}, blocked, 0, ""},
		{"1011", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.end.Close(protocol.CloseInternal, "")
		}, backoff(observer.BackoffConnectionBackpressure), 0, ""},
		{"hub protocol violation seen by the peer", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.send(&protocol.OpenNamespace{NamespaceID: ns1}) // Peer→Hub only
		}, blocked, 1002, protocol.CodeUnsupportedMessageType},
		{"pong timeout", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.end.SetAutoPong(false)
			if !f.clk.WaitForTimers(1, wait) {
				t.Fatal("no ping timer")
			}
			f.clk.Advance(f.cfg.PingInterval)
			testkit.Eventually(t, wait, "ping", func() bool { return len(h.end.Pings()) == 1 })
			f.clk.Advance(f.cfg.PongTimeout)
		}, backoff(observer.BackoffPongTimeout), 1001, ""},
		{"namespace recovery", false, func(t *testing.T, f *peerFixture, h *rawHub, th *testHandler) {
			th.do(t, func(s seam.Session) { s.Reconnect() })
		}, backoff(observer.BackoffNamespaceRecovery), 1001, ""},
		{"GOAWAY SERVER_RESTARTING with retryAfter", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.send(&protocol.GoAway{ReasonCode: protocol.GoAwayServerRestarting, DrainTimeoutMs: 5000, RetryAfterMs: 7000, HasRetryAfter: true})
			f.waitState(0, observer.ConnDraining)
			h.end.Close(protocol.CloseGoingAway, "")
		}, backoff(observer.BackoffGoAwayRetryHint), 0, ""},
		{"GOAWAY SERVER_RESTARTING", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.send(&protocol.GoAway{ReasonCode: protocol.GoAwayServerRestarting, DrainTimeoutMs: 5000})
			f.waitState(0, observer.ConnDraining)
			h.end.Close(protocol.CloseGoingAway, "")
		}, backoff(observer.BackoffGoAwayClosed), 0, ""},
		{"GOAWAY SERVER_SHUTTING_DOWN", false, func(t *testing.T, f *peerFixture, h *rawHub, th *testHandler) {
			h.send(&protocol.GoAway{ReasonCode: protocol.GoAwayServerShuttingDown, DrainTimeoutMs: 5000})
			f.waitState(0, observer.ConnDraining)
			testkit.Eventually(t, wait, "drain", func() bool { th.mu.Lock(); defer th.mu.Unlock(); return len(th.drains) == 1 })
			th.do(t, func(s seam.Session) { s.Quiesced() }) // the peer leaves once its namespaces closed
		}, blocked, 1000, ""},
		{"GOAWAY with an unknown reason", false, func(t *testing.T, f *peerFixture, h *rawHub, _ *testHandler) {
			h.send(&protocol.GoAway{ReasonCode: "MAINTENANCE", DrainTimeoutMs: 5000})
			f.waitState(0, observer.ConnDraining)
			h.end.Close(protocol.CloseGoingAway, "")
		}, backoff(observer.BackoffGoAwayClosed), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newPeerFixture(t, wstest.SmallConfig(t), nil, nil)
			f.peer.Start()
			var h *rawHub
			var th *testHandler
			if tc.handshake {
				h = f.accept()
			} else {
				h, th, _ = f.ready(0)
			}
			tc.act(t, f, h, th)
			f.waitState(0, tc.want.state)
			if tc.want.state == observer.ConnBackoff {
				if b := f.lastBackoff(); b.Reason != tc.want.reason {
					t.Fatalf("backoff reason %s, want %s", b.Reason, tc.want.reason)
				}
			} else if n := f.rec.Count(observer.TypeConnectionBackoffScheduled); n != 0 {
				t.Fatalf("%d backoffs before blocking", n)
			}
			if tc.wantClose != 0 {
				code, ec := h.expectClose()
				if code != tc.wantClose || ec != tc.wantError {
					t.Fatalf("peer closed with %d %q, want %d %q", code, ec, tc.wantClose, tc.wantError)
				}
			}
			if tc.name == "GOAWAY SERVER_RESTARTING with retryAfter" {
				// docs/protocol.md#peer-connection-states: retryAfterMs + jitter (jitter = the
				// attempt-0 cap with maxRand).
				if b := f.lastBackoff(); b.DelayMs != 7000+250 {
					t.Fatalf("delay %v, want 7250", b.DelayMs)
				}
			}
		})
	}
}

// TestS15_1_BackoffSequence: delay = random(0, min(maxBackoff, base·2^attempt)), with exact
// values for a scripted and for a seeded random source — as
// docs/protocol.md#peer-connection-states writes it (ContractBackoff), and by default also
// never more than half the time the peer has been without a connection (but at least base).
func TestS15_1_BackoffSequence(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	for _, tc := range []struct {
		name     string
		r        func() ws.Rand
		contract bool
	}{
		{"top of range", func() ws.Rand { return wstest.MaxRand{} }, true},
		{"seeded", func() ws.Rand { return mrand.New(mrand.NewPCG(1, 2)) }, true},
		{"top of range, bounded by the outage", func() ws.Rand { return wstest.MaxRand{} }, false},
		{"seeded, bounded by the outage", func() ws.Rand { return mrand.New(mrand.NewPCG(1, 2)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The expected delays, computed here from the formula with a second copy of the
			// random source; the fake clock advances by each delay, so the outage so far is
			// their sum.
			oracle := tc.r()
			var want []float64
			downMs := int64(0)
			for attempt := range 10 {
				capMs := int64(30000)
				if c := int64(250) << attempt; c < capMs {
					capMs = c
				}
				if !tc.contract {
					capMs = min(capMs, max(250, downMs/2))
				}
				d := oracle.Int64N(capMs + 1)
				downMs += d
				want = append(want, float64(d))
			}
			f := newPeerFixtureWith(t, cfg, tc.r(), nil, func(o *ws.PeerOptions) { o.ContractBackoff = tc.contract })
			errs := make([]error, 11)
			for i := range errs {
				errs[i] = errors.New("refused")
			}
			f.d.Fail(errs...)
			f.peer.Start()
			for attempt := range 10 {
				var ev []observer.Event
				testkit.Eventually(t, wait, "backoff", func() bool {
					ev = f.rec.OfType(observer.TypeConnectionBackoffScheduled)
					return len(ev) == attempt+1
				})
				b := ev[attempt].Payload.(observer.ConnectionBackoffScheduled)
				if b.Attempt != attempt || b.DelayMs != want[attempt] {
					t.Fatalf("attempt %d: %+v, want delay %v", attempt, b, want[attempt])
				}
				f.clk.Advance(time.Duration(b.DelayMs) * time.Millisecond)
			}
			exp := map[string][]float64{
				"top of range":                        {250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000},
				"top of range, bounded by the outage": {250, 250, 250, 375, 562, 843, 1265, 1897, 2846, 4269},
			}[tc.name]
			for i := range exp {
				if want[i] != exp[i] {
					t.Fatalf("caps %v, want %v", want, exp)
				}
			}
		})
	}
}

// TestS15_1_AttemptResetAfterStableReady: the attempt counter survives a short ready spell
// and resets after backoffResetAfterMs of ready.
func TestS15_1_AttemptResetAfterStableReady(t *testing.T) {
	f := newPeerFixture(t, wstest.SmallConfig(t), nil, nil)
	f.d.Fail(errors.New("refused"))
	f.peer.Start()
	pos := f.waitState(0, observer.ConnBackoff) // attempt 0
	f.clk.Advance(250 * time.Millisecond)
	h, _, pos := f.ready(pos)
	f.clk.Advance(f.cfg.BackoffResetAfter - time.Second) // not long enough
	h.end.Drop()
	pos = f.waitState(pos, observer.ConnBackoff)
	if b := f.lastBackoff(); b.Attempt != 1 {
		t.Fatalf("attempt %d after a short ready, want 1", b.Attempt)
	}
	f.clk.Advance(500 * time.Millisecond)
	h, _, pos = f.ready(pos)
	f.clk.Advance(f.cfg.BackoffResetAfter)
	h.end.Drop()
	f.waitState(pos, observer.ConnBackoff)
	if b := f.lastBackoff(); b.Attempt != 0 || b.DelayMs != 250 {
		t.Fatalf("after a stable ready: %+v, want attempt 0", b)
	}
}

// TestS15_1_SlowCadenceAfter1011: repeated 1011 closes keep backing off (never blocked) and
// switch to the slow cadence (half to all of maxBackoffMs).
func TestS15_1_SlowCadenceAfter1011(t *testing.T) {
	f := newPeerFixture(t, wstest.SmallConfig(t), nil, nil) // SlowAfter 3
	f.peer.Start()
	pos := 0
	for i := range 4 {
		var h *rawHub
		h, _, pos = f.ready(pos)
		h.end.Close(protocol.CloseInternal, "")
		pos = f.waitState(pos, observer.ConnBackoff)
		b := f.lastBackoff()
		if b.Reason != observer.BackoffConnectionBackpressure {
			t.Fatalf("reason %s", b.Reason)
		}
		wantSlow := i+1 >= 3
		if slow := b.DelayMs >= 15000; slow != wantSlow {
			t.Fatalf("failure %d: delay %v (slow cadence %v)", i+1, b.DelayMs, wantSlow)
		}
		f.clk.Advance(time.Duration(b.DelayMs) * time.Millisecond)
	}
}

// TestS15_1_LocalStop: ready --local-stop--> draining --namespaces closed--> stopped, with a
// normal close; stop from backoff and from blocked; start from blocked.
func TestS15_1_LocalStop(t *testing.T) {
	f := newPeerFixture(t, wstest.SmallConfig(t), nil, func(h *testHandler) { h.quiesceOnDrain = true })
	f.peer.Start()
	h, th, pos := f.ready(0)
	if err := f.peer.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.expectClose(); code != protocol.CloseNormal {
		t.Fatalf("close %d", code)
	}
	got := f.path()[pos-1:]
	if len(got) != 3 || got[1] != observer.ConnDraining || got[2] != observer.ConnStopped {
		t.Fatalf("path %v", got)
	}
	if len(th.drains) != 1 || th.drains[0].ReasonCode != "" {
		t.Fatalf("drains %+v", th.drains)
	}
	// backoff --stop--> stopped.
	f.d.Fail(errors.New("refused"), &ws.DialError{StatusCode: 403})
	f.peer.Start()
	pos = f.waitState(pos+1, observer.ConnBackoff)
	if err := f.peer.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	pos = f.waitState(pos, observer.ConnStopped)
	// blocked --stop--> stopped; blocked --start--> disconnected.
	f.peer.Start()
	pos = f.waitState(pos, observer.ConnBlocked)
	f.peer.Start()
	pos = f.waitState(pos, observer.ConnDisconnected)
	f.ready(pos)
}

// TestS15_1_ReauthDialsOnceAtOnce: after a GOAWAY REAUTH_REQUIRED and its drain, the peer
// dials again at once (a zero-delay backoff, the attempt counter unchanged) with the token
// it has now; refused, it blocks without another dial.
func TestS15_1_ReauthDialsOnceAtOnce(t *testing.T) {
	for _, refused := range []bool{false, true} {
		name := map[bool]string{false: "new token accepted", true: "token refused"}[refused]
		t.Run(name, func(t *testing.T) {
			f := newPeerFixture(t, wstest.SmallConfig(t), nil, func(h *testHandler) { h.quiesceOnDrain = true })
			f.peer.Start()
			h, _, pos := f.ready(0)
			f.mu.Lock()
			f.token = "tok-2"
			f.mu.Unlock()
			if refused {
				f.d.Fail(&ws.DialError{StatusCode: 401})
			}
			h.send(&protocol.GoAway{ReasonCode: protocol.GoAwayReauthRequired, DrainTimeoutMs: 3_600_000})
			if code, _ := h.expectClose(); code != protocol.CloseNormal {
				t.Fatalf("peer closed with %d, want 1000 once drained", code)
			}
			var end ws.PeerState = observer.ConnReady
			if refused {
				end = observer.ConnBlocked
			} else {
				h2 := f.accept() // no clock advance: the dial is immediate
				if h2.hdr != "Bearer tok-2" {
					t.Fatalf("re-authenticated with %q", h2.hdr)
				}
				h2.handshake(nil)
			}
			f.waitState(pos, end)
			got := f.path()[pos-1:]
			want := []ws.PeerState{observer.ConnReady, observer.ConnDraining, observer.ConnBackoff, observer.ConnConnecting}
			if refused {
				want = append(want, observer.ConnBlocked)
			} else {
				want = append(want, observer.ConnHandshaking, observer.ConnReady)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("path %v, want %v", got, want)
			}
			if b := f.lastBackoff(); b.DelayMs != 0 || b.Attempt != 0 || b.Reason != observer.BackoffGoAwayClosed {
				t.Fatalf("backoff %+v, want an immediate dial", b)
			}
			if f.d.Dials() != 2 {
				t.Fatalf("%d dials, want 2", f.d.Dials())
			}
		})
	}
}

// TestS15_1_WorkingRestartsBackoff: a connection whose namespace layer reports its targets
// live (seam.Session.Working) restarts the backoff: the next loss is retried after at most
// baseBackoffMs, whatever failures came before. Without the report — or with
// ContractBackoff — the attempt counter carries on.
func TestS15_1_WorkingRestartsBackoff(t *testing.T) {
	for _, tc := range []struct {
		name             string
		working          bool
		contract         bool
		attempt, delayMs int
	}{
		{"working", true, false, 0, 250},
		{"not working", false, false, 4, 562}, // half of the 1.125 s outage so far
		{"working, contract backoff", true, true, 4, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPeerFixtureWith(t, wstest.SmallConfig(t), nil, nil, func(o *ws.PeerOptions) { o.ContractBackoff = tc.contract })
			refused := errors.New("refused")
			f.d.Fail(refused, refused, refused, refused)
			f.peer.Start()
			pos := 0
			for range 4 {
				pos = f.waitState(pos, observer.ConnBackoff)
				f.clk.Advance(time.Duration(f.lastBackoff().DelayMs) * time.Millisecond)
			}
			h, th, pos := f.ready(pos)
			if tc.working {
				// The report and the loss reach the controller in this order: both are posted
				// by the connection's owner goroutine.
				th.do(t, func(s seam.Session) { s.Working() })
			}
			h.end.Drop()
			f.waitState(pos, observer.ConnBackoff)
			if b := f.lastBackoff(); b.Attempt != tc.attempt || b.DelayMs != float64(tc.delayMs) {
				t.Fatalf("backoff %+v, want attempt %d delay %d", b, tc.attempt, tc.delayMs)
			}
		})
	}
}

// TestS15_1_RetryAfter: a hub refusing the upgrade with 503 (or 429) and a Retry-After is
// retried after that delay plus a jitter of up to as much again, without growing the
// attempt counter; without Retry-After, or with ContractBackoff, it is an ordinary failed
// dial.
func TestS15_1_RetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		contract bool
		delayMs  float64 // with maxRand: the top of the range
		attempt  int     // of the backoff after the next, ordinary, failure
	}{
		{"503 with Retry-After", &ws.DialError{StatusCode: 503, RetryAfter: 2 * time.Second}, false, 4000, 0},
		{"429 with Retry-After", &ws.DialError{StatusCode: 429, RetryAfter: time.Second}, false, 2000, 0},
		{"503 with a Retry-After over maxBackoff", &ws.DialError{StatusCode: 503, RetryAfter: time.Hour}, false, 60000, 0},
		{"503 without Retry-After", &ws.DialError{StatusCode: 503}, false, 250, 1},
		{"503 with Retry-After, contract backoff", &ws.DialError{StatusCode: 503, RetryAfter: 2 * time.Second}, true, 250, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPeerFixtureWith(t, wstest.SmallConfig(t), nil, nil, func(o *ws.PeerOptions) { o.ContractBackoff = tc.contract })
			f.d.Fail(tc.err, errors.New("refused"))
			f.peer.Start()
			pos := f.waitState(0, observer.ConnBackoff)
			b := f.lastBackoff()
			if b.DelayMs != tc.delayMs || b.Reason != observer.BackoffDialFailed {
				t.Fatalf("backoff %+v, want delay %v", b, tc.delayMs)
			}
			f.clk.Advance(time.Duration(b.DelayMs) * time.Millisecond)
			f.waitState(pos, observer.ConnBackoff)
			if b := f.lastBackoff(); b.Attempt != tc.attempt {
				t.Fatalf("next backoff %+v, want attempt %d", b, tc.attempt)
			}
		})
	}
}

// TestS15_1_FailoverURLs: with several hub endpoints the peer dials the next one after a
// failed dial and after a lost connection, in turn, with its backoff in between.
func TestS15_1_FailoverURLs(t *testing.T) {
	const a, b, c = "ws://a/v1/replication", "ws://b/v1/replication", "ws://c/v1/replication"
	f := newPeerFixtureWith(t, wstest.SmallConfig(t), nil, nil, func(o *ws.PeerOptions) {
		o.URL, o.FailoverURLs = a, []string{b, c}
	})
	f.d.Fail(errors.New("refused")) // a
	f.peer.Start()
	pos := f.waitState(0, observer.ConnBackoff)
	f.clk.Advance(time.Duration(f.lastBackoff().DelayMs) * time.Millisecond)
	h, _, pos := f.ready(pos) // b
	h.end.Drop()
	pos = f.waitState(pos, observer.ConnBackoff)
	f.d.Fail(errors.New("refused")) // c
	f.clk.Advance(time.Duration(f.lastBackoff().DelayMs) * time.Millisecond)
	pos = f.waitState(pos, observer.ConnBackoff)
	f.clk.Advance(time.Duration(f.lastBackoff().DelayMs) * time.Millisecond)
	f.ready(pos) // a again
	if got, want := f.d.URLs(), []string{a, b, c, a}; !slices.Equal(got, want) {
		t.Fatalf("dialed %v, want %v", got, want)
	}
	if _, err := ws.NewPeer(ws.PeerOptions{Config: wstest.SmallConfig(t), InstanceID: peerID, HubInstanceID: hubID, URL: a,
		FailoverURLs: []string{""}, Token: func() (string, error) { return "t", nil }, Namespaces: newHandlers(nil).factory}); err == nil {
		t.Fatal("an empty failover URL accepted")
	}
}

// TestS23_1_ConnectionFailedReceived: a fatal connection ERROR the hub sends before it
// closes is reported by the peer as connection-failed (code, wsCloseCode), like one it
// detects itself; an orderly close is not.
func TestS23_1_ConnectionFailedReceived(t *testing.T) {
	f := newPeerFixture(t, wstest.SmallConfig(t), nil, nil)
	f.peer.Start()
	h, _, pos := f.ready(0)
	m, _ := protocol.NewErrorMessage(protocol.ScopeConnection, protocol.CodeSequenceViolation, protocol.NamespaceID{}, "s")
	h.send(m)
	h.end.Close(protocol.CloseProtocolError, "")
	pos = f.waitState(pos, observer.ConnBlocked)
	evs := f.rec.OfType(observer.TypeConnectionFailed)
	if len(evs) != 1 {
		t.Fatalf("%d connection-failed events, want 1", len(evs))
	}
	if e := evs[0].Payload.(observer.ConnectionFailed); e.Code != observer.FoldConnectionCode("SEQUENCE_VIOLATION") ||
		e.WSCloseCode != 1002 || e.ConnectionID != observer.Some("c-test") {
		t.Fatalf("connection-failed %+v", e)
	}
	// A close without an ERROR reports nothing.
	f.peer.Start()
	h, _, _ = f.ready(pos)
	h.end.Close(protocol.CloseGoingAway, "")
	f.waitState(pos, observer.ConnBackoff)
	if n := f.rec.Count(observer.TypeConnectionFailed); n != 1 {
		t.Fatalf("%d connection-failed events after an orderly close", n)
	}
}
