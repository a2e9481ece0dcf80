package ws_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// echoNS is a minimal namespace layer over the seam, enough to drive it end to end: the
// peer opens namespaces and sends updates through its Outbox with a window of maxInFlight
// (the gate, woken by each ACK), the hub answers OPEN with OPEN_OK and every UPDATE with UPDATE_ACK and sends
// its own updates back; ACKs free the window. It records what arrived.
type echoNS struct {
	s        seam.Session
	hub      bool
	inFlight map[protocol.NamespaceID]map[uint32]bool

	mu       sync.Mutex // guards received, acked and closed
	received map[protocol.NamespaceID][][]byte
	acked    int
	closed   bool
}

func newEchoNS(s seam.Session, hub bool) *echoNS {
	return &echoNS{s: s, hub: hub, inFlight: map[protocol.NamespaceID]map[uint32]bool{}, received: map[protocol.NamespaceID][][]byte{}}
}

func (e *echoNS) window(ns protocol.NamespaceID) func() bool {
	return func() bool { return len(e.inFlight[ns]) < e.s.Config().MaxInFlightUpdates }
}

func (e *echoNS) send(ns protocol.NamespaceID, b []byte) error {
	if e.inFlight[ns] == nil {
		e.inFlight[ns] = map[uint32]bool{}
	}
	return e.s.Outbox(ns, e.window(ns)).Enqueue(seam.DataItem{Bytes: b, Sent: func(si seam.SentInfo) { e.inFlight[ns][si.Sequence] = true }})
}

func (e *echoNS) HandleFrame(f protocol.Frame) {
	switch m := f.Message.(type) {
	case *protocol.OpenNamespace:
		if _, ok := e.s.Authorize(m.NamespaceID); !ok {
			em, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeNamespaceUnauthorized, m.NamespaceID, "unauthorized")
			_, _ = e.s.Send(em.WithRelatedSequence(f.Sequence))
			return
		}
		_, _ = e.s.Send(&protocol.OpenOK{NamespaceID: m.NamespaceID, Mode: protocol.ModeBootstrap, ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1})
	case *protocol.Update:
		e.mu.Lock()
		e.received[m.NamespaceID] = append(e.received[m.NamespaceID], bytes.Clone(m.Update))
		e.mu.Unlock()
		_, _ = e.s.Send(&protocol.UpdateAck{NamespaceID: m.NamespaceID, AckedSequence: f.Sequence})
		if e.hub { // echo it back, reversed, as the hub's own write
			r := bytes.Clone(m.Update)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			_ = e.send(m.NamespaceID, r)
		}
	case *protocol.UpdateAck:
		delete(e.inFlight[m.NamespaceID], m.AckedSequence)
		e.s.Outbox(m.NamespaceID, nil).Wake() // a slot of the window is free
		e.mu.Lock()
		e.acked++
		e.mu.Unlock()
	}
}

func (e *echoNS) HandleRejected(*protocol.Error)                 {}
func (e *echoNS) HandleDrain(seam.Drain)                         { e.s.Quiesced() }
func (e *echoNS) HandleShed(protocol.NamespaceID, seam.ShedInfo) {}
func (e *echoNS) HandleRevoked(auth.PeerRevocation)              {}
func (e *echoNS) HandleClosed(seam.CloseInfo) {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
}

// hubDialer connects a Peer to a Hub over fake pairs: each dial is accepted by the hub as
// the peer authenticated by token.
type hubDialer struct {
	hub   *ws.Hub
	table *auth.PeerTable
}

func (d hubDialer) Dial(ctx context.Context, url string, h http.Header) (ws.Transport, error) {
	tok := h.Get("Authorization")[len("Bearer "):]
	id, err := d.table.Authenticate(ctx, tok)
	if err != nil {
		return nil, &ws.DialError{StatusCode: 401, Err: err}
	}
	a, b := wstest.Pair(64)
	if err := d.hub.Accept(b, id); err != nil {
		return nil, err
	}
	return a, nil
}

// TestSeam_EndToEnd drives a hub and a peer through the seam with echoing namespace layers:
// namespace frames sent through Session.Send (OPEN_NAMESPACE is accepted for sending),
// windowed updates both ways with ACK correlation and one update-sent event per UPDATE, a
// GOAWAY drain ending early when the namespace layers quiesce, and the peer reconnecting
// on a new connection after SERVER_RESTARTING. The namespace rules themselves (OPEN_OK,
// authorization) are the namespace layer's tests.
func TestSeam_EndToEnd(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.MaxInFlightUpdates = 4
	clk := clock.NewFake(epoch)
	rec := &observertest.Recorder{}
	hubSide := make(chan *echoNS, 4)
	peerSide := make(chan *echoNS, 4)
	table, err := auth.NewPeerTable([]auth.PeerEntry{{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("tok"), Namespaces: []string{ns1.String(), ns2.String()}, Read: true, Submit: true}})
	must(t, err)
	hub, err := ws.NewHub(ws.HubOptions{Config: cfg, InstanceID: hubID, Auth: table, Clock: clk, Observer: rec,
		Namespaces: func(s seam.Session) seam.Handler { e := newEchoNS(s, true); hubSide <- e; return e }})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ws.NewPeer(ws.PeerOptions{Config: cfg, InstanceID: peerID, HubInstanceID: hubID, URL: "ws://hub",
		Token: func() (string, error) { return "tok", nil }, Dialer: hubDialer{hub, table}, Clock: clk, Rand: wstest.MaxRand{}, Observer: rec,
		Namespaces: func(s seam.Session) seam.Handler { e := newEchoNS(s, false); peerSide <- e; return e }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		peer.Close()
		if err := hub.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		rec.AssertValid(t)
		rec.AssertSafe(t, "tok")
	}()
	peer.Start()
	p := <-peerSide
	h := <-hubSide
	const n = 30 // 15 per namespace: within maxQueuedUpdateCount (16)
	do := func(e *echoNS, f func()) {
		done := make(chan struct{})
		e.s.Post(func() { f(); close(done) })
		<-done
	}
	do(p, func() {
		for _, ns := range []protocol.NamespaceID{ns1, ns2, ns3} {
			seq, err := p.s.Send(&protocol.OpenNamespace{NamespaceID: ns})
			if err != nil || seq == 0 {
				t.Errorf("open: %d %v", seq, err)
			}
		}
		for i := range n {
			if err := p.send([]protocol.NamespaceID{ns1, ns2}[i%2], []byte{byte(i), 1, 2}); err != nil {
				t.Error(err)
			}
		}
	})
	testkit.Eventually(t, wait, "echoes", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.received[ns1])+len(p.received[ns2]) == n && p.acked == n
	})
	testkit.Eventually(t, wait, "hub acked", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.acked == n })
	// The peer's view of its connection (introspection): ready since the handshake.
	if c, ok := peer.Connection(); !ok || c.State != observer.ConnReady || !c.ReadyAt.Equal(epoch) || c.ConnectionID != "" {
		t.Errorf("the peer's connection: %+v %v", c, ok)
	}
	h.mu.Lock()
	if len(h.received[ns1]) != n/2 || h.received[ns1][1][0] != 2 {
		t.Errorf("hub received %d on ns1 (acked %d)", len(h.received[ns1]), h.acked)
	}
	h.mu.Unlock()
	if got := rec.Count(observer.TypeUpdateSent); got != 2*n {
		t.Errorf("%d update-sent events, want %d", got, 2*n)
	}
	// A drain that the namespace layers end early; SERVER_RESTARTING with a retry hint
	// brings the peer back after retryAfterMs + jitter.
	hub.GoAway(protocol.GoAwayServerRestarting, time.Minute, 3*time.Second, true)
	testkit.Eventually(t, wait, "peer backoff", func() bool { return peer.State() == observer.ConnBackoff })
	clk.Advance(3*time.Second + 250*time.Millisecond)
	p2 := <-peerSide
	<-hubSide
	testkit.Eventually(t, wait, "peer ready again", func() bool { return peer.State() == observer.ConnReady })
	if p2.s.ConnectionID() == p.s.ConnectionID() {
		t.Fatal("same connection id after reconnect")
	}
}

// TestS2_AdmissionRefusals: the remaining auth-upgrade-rejected reasons: an authenticator
// slower than authTimeoutMs (503), a hub that is shut down (503), an authenticator that
// yields no valid instance id (500, a wiring bug).
func TestS2_AdmissionRefusals(t *testing.T) {
	clk := clock.NewFake(epoch)
	rec := &observertest.Recorder{}
	auth := &scriptedAuth{clk: clk}
	hub, err := ws.NewHub(ws.HubOptions{Config: wstest.SmallConfig(t), InstanceID: hubID, Auth: auth, Clock: clk, Observer: rec,
		Namespaces: func(seam.Session) seam.Handler { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	serve := func() int {
		req, _ := http.NewRequest("GET", "/v1/replication", nil)
		req.Header.Set("Authorization", "Bearer t")
		w := &statusRecorder{header: http.Header{}}
		hub.ServeHTTP(w, req)
		return w.status
	}
	auth.mode = "slow"
	if s := serve(); s != http.StatusServiceUnavailable {
		t.Fatalf("slow authenticator: %d", s)
	}
	auth.mode = "no-id"
	if s := serve(); s != http.StatusInternalServerError {
		t.Fatalf("no identity: %d", s)
	}
	if err := hub.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := serve(); s != http.StatusServiceUnavailable {
		t.Fatalf("after shutdown: %d", s)
	}
	var reasons []observer.AuthRejectReason
	for _, e := range rec.OfType(observer.TypeAuthUpgradeRejected) {
		reasons = append(reasons, e.Payload.(observer.AuthUpgradeRejected).Reason)
	}
	want := []observer.AuthRejectReason{observer.AuthTimeout, observer.AuthInvalidInstanceID, observer.AuthHubShutdown}
	if len(reasons) != 3 || reasons[0] != want[0] || reasons[1] != want[1] || reasons[2] != want[2] {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
}

type scriptedAuth struct {
	clk  *clock.Fake
	mode string
}

func (a *scriptedAuth) Authenticate(ctx context.Context, token string) (auth.PeerIdentity, error) {
	switch a.mode {
	case "slow": // waits for its context: the hub's authTimeoutMs fires on the fake clock
		go func() {
			a.clk.WaitForTimers(1, wait)
			a.clk.Advance(smallConfigAuthTimeout)
		}()
		<-ctx.Done()
		return auth.PeerIdentity{}, ctx.Err()
	case "no-id":
		return auth.PeerIdentity{}, nil
	}
	return auth.PeerIdentity{PeerInstanceID: peerID}, nil
}

func (a *scriptedAuth) AuthorizeNamespace(string, protocol.NamespaceID) (auth.NamespaceGrant, bool) {
	return auth.NamespaceGrant{}, false
}

var smallConfigAuthTimeout = protocol.DefaultConfig().AuthTimeout

type statusRecorder struct {
	header http.Header
	status int
}

func (w *statusRecorder) Header() http.Header         { return w.header }
func (w *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusRecorder) WriteHeader(s int)           { w.status = s }
