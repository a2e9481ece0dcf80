package ws_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

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

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	hubID  = "hub"
	peerID = "peer-a"
	wait   = 5 * time.Second // real-time bound on waiting for goroutines under test
)

var (
	ns1 = protocol.MustNamespaceID("ns-00000000000000000000000000000001")
	ns2 = protocol.MustNamespaceID("ns-00000000000000000000000000000002")
	ns3 = protocol.MustNamespaceID("ns-00000000000000000000000000000003")
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// must fails the test at once when err is not nil.
var must = testkit.Must

// ---- a namespace handler for tests -------------------------------------------------------

// testHandler is a small namespace layer: it answers OPEN_NAMESPACE with OPEN_OK (when
// autoOpen), UPDATE with UPDATE_ACK (when autoAck), records every call, and ends a drain
// at once (quiesceOnDrain: it has no namespaces to close).
type testHandler struct {
	s seam.Session

	autoOpen, autoAck, quiesceOnDrain bool

	mu       sync.Mutex // guards the records below: the test reads them from its own goroutine
	frames   []protocol.Frame
	rejected []*protocol.Error
	drains   []seam.Drain
	sheds    []protocol.NamespaceID
	revoked  []auth.PeerRevocation
	closed   []seam.CloseInfo
}

func (h *testHandler) HandleFrame(f protocol.Frame) {
	h.mu.Lock()
	h.frames = append(h.frames, f)
	h.mu.Unlock()
	switch m := f.Message.(type) {
	case *protocol.OpenNamespace:
		if h.autoOpen {
			_, _ = h.s.Send(&protocol.OpenOK{NamespaceID: m.NamespaceID, Mode: protocol.ModeBootstrap,
				ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1})
		}
	case *protocol.Update:
		if h.autoAck {
			_, _ = h.s.Send(&protocol.UpdateAck{NamespaceID: m.NamespaceID, AckedSequence: f.Sequence})
		}
	}
}

func (h *testHandler) HandleRejected(e *protocol.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected = append(h.rejected, e)
}

func (h *testHandler) HandleDrain(d seam.Drain) {
	h.mu.Lock()
	h.drains = append(h.drains, d)
	h.mu.Unlock()
	if h.quiesceOnDrain {
		h.s.Quiesced()
	}
}

func (h *testHandler) HandleShed(ns protocol.NamespaceID, _ seam.ShedInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sheds = append(h.sheds, ns)
}

func (h *testHandler) HandleRevoked(r auth.PeerRevocation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked = append(h.revoked, r)
}

func (h *testHandler) HandleClosed(info seam.CloseInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = append(h.closed, info)
}

func (h *testHandler) framesOf(t protocol.MessageType) []protocol.Frame {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []protocol.Frame
	for _, f := range h.frames {
		if f.Type() == t {
			out = append(out, f)
		}
	}
	return out
}

func (h *testHandler) closeInfo() (seam.CloseInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.closed) == 0 {
		return seam.CloseInfo{}, false
	}
	return h.closed[len(h.closed)-1], true
}

// do runs f on the handler's owner goroutine and waits for it.
func (h *testHandler) do(t testing.TB, f func(s seam.Session)) {
	t.Helper()
	done := make(chan struct{})
	if !h.s.Post(func() { f(h.s); close(done) }) {
		t.Fatal("connection owner has exited")
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("posted function did not run")
	}
}

// handlers collects the handlers a factory creates.
type handlers struct {
	ch    chan *testHandler
	setup func(*testHandler)
}

func newHandlers(setup func(*testHandler)) *handlers {
	return &handlers{ch: make(chan *testHandler, 512), setup: setup}
}

func (hs *handlers) factory(s seam.Session) seam.Handler {
	h := &testHandler{s: s}
	if hs.setup != nil {
		hs.setup(h)
	}
	hs.ch <- h
	return h
}

func (hs *handlers) next(t testing.TB) *testHandler {
	t.Helper()
	select {
	case h := <-hs.ch:
		return h
	case <-time.After(wait):
		t.Fatal("no connection became ready")
		return nil
	}
}

// ---- a hub under test, and a hand-driven peer ----------------------------------------------

type hubFixture struct {
	t     *testing.T
	cfg   protocol.Config
	clk   *clock.Fake
	rec   *observertest.Recorder
	hub   *ws.Hub
	hs    *handlers
	table *auth.PeerTable
}

func newHubFixture(t *testing.T, cfg protocol.Config, setup func(*testHandler)) *hubFixture {
	t.Helper()
	f := &hubFixture{t: t, cfg: cfg, clk: clock.NewFake(epoch), rec: &observertest.Recorder{}, hs: newHandlers(setup)}
	table, err := auth.NewPeerTable([]auth.PeerEntry{
		{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("secret-a"), Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true},
		{PeerInstanceID: "peer-b", TokenSHA256: auth.HashToken("secret-b"), Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true},
		{PeerInstanceID: "peer-x", TokenSHA256: auth.HashToken("secret-forbidden")},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.table = table
	f.hub, err = ws.NewHub(ws.HubOptions{Config: cfg, InstanceID: hubID, Auth: table, Namespaces: f.hs.factory,
		Clock: f.clk, Random: bytes.NewReader(bytes.Repeat([]byte{7}, 1<<16)), Observer: f.rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := f.hub.Shutdown(ctx); err != nil {
			t.Errorf("hub shutdown: %v", err)
		}
		f.rec.AssertValid(t)
		f.rec.AssertSafe(t, "secret-a", "secret-b", "default")
	})
	return f
}

// rawPeer plays the peer by hand over a fake transport: it encodes and decodes with the
// protocol codec and checks nothing itself.
type rawPeer struct {
	t   testing.TB
	end *wstest.End
	hub *wstest.End // the hub's end of the pair
	out *protocol.Outbound
	in  *protocol.Inbound
}

func (f *hubFixture) connect(capacity int) *rawPeer {
	f.t.Helper()
	return f.connectVia(capacity, func(e *wstest.End) ws.Transport { return e })
}

// connectVia is connect with the hub's end of the pair wrapped as the hub's transport.
func (f *hubFixture) connectVia(capacity int, wrap func(*wstest.End) ws.Transport) *rawPeer {
	f.t.Helper()
	a, b := wstest.Pair(capacity)
	if err := f.hub.Accept(wrap(b), auth.PeerIdentity{PeerInstanceID: peerID}); err != nil {
		f.t.Fatal(err)
	}
	codec := protocol.NewCodec(f.cfg.Limits(), protocol.CapChunkedUpdate)
	return &rawPeer{t: f.t, end: a, hub: b, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec)}
}

func (p *rawPeer) send(m protocol.Message) uint32 {
	p.t.Helper()
	return wstest.SendFrame(p.t, p.end, p.out, m)
}

func (p *rawPeer) sendRaw(b []byte) {
	p.t.Helper()
	if err := p.end.Send(b); err != nil {
		p.t.Fatal(err)
	}
}

// recv returns the next frame from the hub.
func (p *rawPeer) recv() protocol.Frame {
	p.t.Helper()
	return wstest.RecvFrame(p.t, p.end, p.in)
}

// expectClose reads until the hub closes and returns the close code and the connection
// ERROR code received before it ("" if none).
func (p *rawPeer) expectClose() (protocol.CloseCode, protocol.ErrorCode) {
	p.t.Helper()
	return wstest.RecvClose(p.t, p.end, p.in)
}

// ---- frames on a test's end of a connection ------------------------------------------------

// handshake completes HELLO/HELLO_ACK and returns the hub's handler for the connection.
func (f *hubFixture) handshake(p *rawPeer) *testHandler {
	f.t.Helper()
	p.send(wstest.Hello(peerID, hubID))
	fr := p.recv()
	if _, ok := fr.Message.(*protocol.HelloAck); !ok {
		f.t.Fatalf("expected HELLO_ACK, got %v", fr.Type())
	}
	return f.hs.next(f.t)
}

func (f *hubFixture) connState(t testing.TB) observer.ConnectionState {
	cs := f.hub.Connections()
	if len(cs) != 1 {
		return ""
	}
	return cs[0].State
}

func newPair() (*wstest.End, *wstest.End) { return wstest.Pair(1) }
