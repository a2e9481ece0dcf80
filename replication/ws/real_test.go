package ws_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// liveHub is a hub behind a real HTTP server on loopback, with the real clock.
type liveHub struct {
	t     *testing.T
	cfg   protocol.Config
	hub   atomic.Pointer[ws.Hub]
	srv   *httptest.Server
	url   string
	rec   *observertest.Recorder
	hs    *handlers
	table *auth.PeerTable
	edit  func(*ws.HubOptions) // applied to the options of every hub it makes
}

func newLiveHub(t *testing.T, cfg protocol.Config, setup func(*testHandler)) *liveHub {
	t.Helper()
	return newLiveHubWith(t, cfg, setup, nil)
}

// newLiveHubWith is newLiveHub with edit applied to the hub's options.
func newLiveHubWith(t *testing.T, cfg protocol.Config, setup func(*testHandler), edit func(*ws.HubOptions)) *liveHub {
	t.Helper()
	l := &liveHub{t: t, cfg: cfg, rec: &observertest.Recorder{}, hs: newHandlers(setup), edit: edit}
	var err error
	l.table, err = auth.NewPeerTable([]auth.PeerEntry{
		{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("secret-a"), Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true},
		{PeerInstanceID: "peer-x", TokenSHA256: auth.HashToken("secret-forbidden")},
	})
	if err != nil {
		t.Fatal(err)
	}
	l.hub.Store(l.newHub())
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/replication", func(w http.ResponseWriter, r *http.Request) { l.hub.Load().ServeHTTP(w, r) })
	l.srv = httptest.NewServer(mux)
	l.url = "ws" + strings.TrimPrefix(l.srv.URL, "http") + "/v1/replication"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		if err := l.hub.Load().Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		l.srv.Close()
		l.rec.AssertValid(t)
		l.rec.AssertSafe(t, "secret-a", "secret-forbidden", "default")
	})
	return l
}

func (l *liveHub) newHub() *ws.Hub {
	opts := ws.HubOptions{Config: l.cfg, InstanceID: hubID, Auth: l.table, Namespaces: l.hs.factory, Observer: l.rec}
	if l.edit != nil {
		l.edit(&opts)
	}
	h, err := ws.NewHub(opts)
	if err != nil {
		l.t.Fatal(err)
	}
	return h
}

// client is a hand-driven peer over a real coder/websocket client connection.
type client struct {
	t   testing.TB
	c   *websocket.Conn
	out *protocol.Outbound
	in  *protocol.Inbound
}

func (l *liveHub) dialClient(t testing.TB, token string) (*client, error) {
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait) // 200 at once on a busy machine
	defer cancel()
	c, resp, err := websocket.Dial(ctx, l.url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if resp != nil {
			return nil, &ws.DialError{StatusCode: resp.StatusCode, Err: err}
		}
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	codec := protocol.NewCodec(l.cfg.Limits(), protocol.CapChunkedUpdate)
	return &client{t: t, c: c, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec)}, nil
}

func (c *client) send(m protocol.Message) error {
	b, _, err := c.out.AppendFrame(nil, m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return c.c.Write(ctx, websocket.MessageBinary, b)
}

func (c *client) recv(ctx context.Context) (protocol.Frame, error) {
	_, b, err := c.c.Read(ctx)
	if err != nil {
		return protocol.Frame{}, err
	}
	return c.in.Decode(b)
}

func (c *client) handshake() error {
	if err := c.send(wstest.Hello(peerID, hubID)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	f, err := c.recv(ctx)
	if err != nil {
		return err
	}
	if _, ok := f.Message.(*protocol.HelloAck); !ok {
		return fmt.Errorf("got %v", f.Type())
	}
	return nil
}

// TestS2_AuthBeforeUpgrade: 401 for a missing or unknown token, 403 for a known token that
// may not replicate; no WebSocket is created (the response is not 101 and carries no
// Upgrade), and each refusal is classified.
func TestS2_AuthBeforeUpgrade(t *testing.T) {
	l := newLiveHub(t, wstest.SmallConfig(t), nil)
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"Basic c2VjcmV0LWE=", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer secret-forbidden", http.StatusForbidden},
	} {
		req, _ := http.NewRequest("GET", l.srv.URL+"/v1/replication", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Upgrade") != "" || resp.Header.Get("Sec-WebSocket-Accept") != "" {
			t.Fatalf("%q: status %d, headers %v", tc.auth, resp.StatusCode, resp.Header)
		}
	}
	if n := len(l.hub.Load().Connections()); n != 0 {
		t.Fatalf("%d connections after refused upgrades", n)
	}
	var reasons []observer.AuthRejectReason
	for _, e := range l.rec.OfType(observer.TypeAuthUpgradeRejected) {
		reasons = append(reasons, e.Payload.(observer.AuthUpgradeRejected).Reason)
	}
	want := []observer.AuthRejectReason{observer.AuthMissingToken, observer.AuthMissingToken, observer.AuthInvalidCredentials, observer.AuthInvalidCredentials}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
	// The peer's dialer sees the status and blocks (docs/protocol.md#peer-connection-states
	// permanent-config-failure).
	if _, err := l.dialClient(t, "secret-forbidden"); err == nil {
		t.Fatal("dial with a forbidden token succeeded")
	} else if de := new(ws.DialError); !errors.As(err, &de) || de.StatusCode != 403 {
		t.Fatalf("dial error %v", err)
	}
}

// livePeer starts a real peer against l.
func (l *liveHub) livePeer(t *testing.T, id, hub, token string, cfg protocol.Config, hs *handlers) (*ws.Peer, chan ws.PeerState) {
	t.Helper()
	states := make(chan ws.PeerState, 256)
	p, err := ws.NewPeer(ws.PeerOptions{Config: cfg, InstanceID: id, HubInstanceID: hub, URL: l.url,
		Token: func() (string, error) { return token, nil }, Namespaces: hs.factory})
	if err != nil {
		t.Fatal(err)
	}
	p.Watch(func(s ws.PeerState) { states <- s })
	t.Cleanup(p.Close)
	p.Start()
	return p, states
}

func waitFor(t *testing.T, states chan ws.PeerState, want ws.PeerState) {
	t.Helper()
	timeout := time.After(2 * wait)
	for {
		select {
		case s := <-states:
			if s == want {
				return
			}
		case <-timeout:
			t.Fatalf("peer never reached %s", want)
		}
	}
}

func TestS6_RealHandshake(t *testing.T) {
	l := newLiveHub(t, wstest.SmallConfig(t), nil)
	t.Run("ready", func(t *testing.T) {
		phs := newHandlers(nil)
		_, states := l.livePeer(t, peerID, hubID, "secret-a", l.cfg, phs)
		waitFor(t, states, observer.ConnReady)
		hubSide := l.hs.next(t)
		peerSide := phs.next(t)
		if hubSide.s.ConnectionID() != peerSide.s.ConnectionID() || !peerSide.s.Negotiated().Chunked() {
			t.Fatalf("connection ids %q %q", hubSide.s.ConnectionID(), peerSide.s.ConnectionID())
		}
	})
	for _, tc := range []struct{ name, peer, hub string }{
		{"wrong hub id", peerID, "other-hub"},
		{"hello id differs from the token's", "peer-b", hubID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, states := l.livePeer(t, tc.peer, tc.hub, "secret-a", l.cfg, newHandlers(nil))
			waitFor(t, states, observer.ConnBlocked)
		})
	}
}

func TestS1_TextMessageIsMalformed(t *testing.T) {
	l := newLiveHub(t, wstest.SmallConfig(t), nil)
	c, err := l.dialClient(t, "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	var code protocol.ErrorCode
	for {
		f, err := c.recv(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusProtocolError || code != protocol.CodeMalformedFrame {
				t.Fatalf("closed with %v after ERROR %q", err, code)
			}
			return
		}
		if m, ok := f.Message.(*protocol.ErrorMessage); ok {
			code = m.Code
		}
	}
}

// TestS17_SlowReaderDoesNotBlockOthers: a peer that reads nothing fills its connection's
// socket and pauses its pump; another connection keeps flowing, and the hub shuts down.
func TestS17_SlowReaderDoesNotBlockOthers(t *testing.T) {
	l := newLiveHub(t, wstest.SmallConfig(t), nil)
	slow, err := l.dialClient(t, "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.c.CloseNow()
	if err := slow.handshake(); err != nil {
		t.Fatal(err)
	}
	slowH := l.hs.next(t)
	fast, err := l.dialClient(t, "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	defer fast.c.CloseNow()
	if err := fast.handshake(); err != nil {
		t.Fatal(err)
	}
	fastH := l.hs.next(t)
	// Flood the slow one until its pump pauses: its socket buffers fill up.
	paused := false
	for i := 0; i < 4000 && !paused; i++ {
		slowH.do(t, func(s seam.Session) {
			o := s.Outbox(wstest.NamespaceID(i%50+1), nil)
			err := o.Enqueue(seam.DataItem{Bytes: upd(1000, byte(i))})
			if err != nil && !errors.Is(err, seam.ErrConnectionShed) && !errors.Is(err, seam.ErrQueueOverflow) {
				t.Fatal(err)
			}
			paused = s.Stats().Paused
		})
	}
	if !paused {
		t.Fatal("the slow connection never paused")
	}
	// The fast connection still gets everything at once.
	const n = 100 // 10 KB: within the connection's 12 KiB budget
	fastH.do(t, func(s seam.Session) {
		for i := range n {
			if err := s.Outbox(wstest.NamespaceID(i%10+1), nil).Enqueue(seam.DataItem{Bytes: upd(100, byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for i := range n {
		f, err := fast.recv(ctx)
		if err != nil {
			t.Fatalf("fast frame %d: %v", i, err)
		}
		if f.Type() != protocol.TypeUpdate {
			t.Fatalf("fast frame %d: %v", i, f.Type())
		}
	}
	if l.rec.Count(observer.TypeSendPaused) == 0 {
		t.Fatal("no send-paused event")
	}
}

// TestS21_ShutdownAndReconnect: the hub service closes with 1001 without GOAWAY; the peer
// treats it as a temporary loss, backs off and reconnects to the restarted service.
func TestS21_ShutdownAndReconnect(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.BaseBackoff, cfg.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	l := newLiveHub(t, cfg, nil)
	phs := newHandlers(nil)
	_, states := l.livePeer(t, peerID, hubID, "secret-a", cfg, phs)
	waitFor(t, states, observer.ConnReady)
	first := phs.next(t)
	old := l.hub.Load()
	l.hub.Store(l.newHub()) // the restarted service answers the next upgrade
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, states, observer.ConnBackoff)
	waitFor(t, states, observer.ConnReady)
	phs.next(t)
	// The hub sent 1001 without GOAWAY. Under load coder/websocket's client can surface the
	// close as a bare EOF instead (a known race of the library, see docs/decisions.md); the
	// peer treats both as a temporary loss, as the backoff above shows.
	info, ok := first.closeInfo()
	if !ok || info.GoAway != nil || !info.Remote || info.Code != protocol.CloseGoingAway && info.Cause != seam.CauseTransport {
		t.Fatalf("first connection closed with %+v", info)
	}
}

// TestS6_ConcurrentHandshakes: 200 connections handshake at once (with an admission limit
// that lets them all in: each dials before any sends its HELLO).
func TestS6_ConcurrentHandshakes(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.HelloTimeout = time.Minute // the race detector on a shared 2-core machine is slow
	l := newLiveHubWith(t, cfg, nil, func(o *ws.HubOptions) { o.MaxHandshakes = 200 })
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	clients := make(chan *client, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := l.dialClient(t, "secret-a")
			if err == nil {
				clients <- c
				err = c.handshake()
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(clients)
	for err := range errs {
		t.Fatal(err)
	}
	// The hub hands HELLO_ACK to its writer before it publishes ready, so a client may
	// read its HELLO_ACK a moment before the hub's state says ready.
	ready := 0
	deadline := time.Now().Add(wait)
	for {
		ready = 0
		for _, c := range l.hub.Load().Connections() {
			if c.State == observer.ConnReady {
				ready++
			}
		}
		if ready == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if ready != n {
		t.Fatalf("%d of %d connections ready", ready, n)
	}
	for c := range clients {
		c.c.CloseNow()
	}
}

// ---- liveness over a real socket ---------------------------------------------------------

// rawWS is a minimal hand-written WebSocket client (RFC 6455) that lets a test answer pings
// with pongs of its choice, which no WebSocket library exposes.
type rawWS struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, l *liveHub) *rawWS {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /v1/replication HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer secret-a\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return &rawWS{conn: conn, br: br}
}

// write sends one masked frame.
func (r *rawWS) write(opcode byte, payload []byte) error {
	hdr := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := [4]byte{1, 2, 3, 4}
	hdr = append(hdr, mask[:]...)
	body := bytes.Clone(payload)
	for i := range body {
		body[i] ^= mask[i%4]
	}
	_, err := r.conn.Write(append(hdr, body...))
	return err
}

// read returns the next frame from the server (unmasked, unfragmented).
func (r *rawWS) read(d time.Duration) (byte, []byte, error) {
	r.conn.SetReadDeadline(time.Now().Add(d))
	var h [2]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, errors.New("frame too large")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r.br, p)
	return h[0] & 0x0f, p, err
}

const (
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xa
)

// TestS17_RealPongSemantics proves the liveness contract over coder/websocket: pings carry
// the library's payload, only its exact echo clears the pong timeout; empty, wrong,
// duplicate and unsolicited pongs are ignored and the hub closes with 1001; the hub
// answers a ping with its exact payload.
func TestS17_RealPongSemantics(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.PingInterval, cfg.PongTimeout = 250*time.Millisecond, 200*time.Millisecond
	for _, tc := range []struct {
		name    string
		answer  func(r *rawWS, ping, prev []byte) error
		survive bool
	}{
		{"exact echo", func(r *rawWS, ping, _ []byte) error { return r.write(opPong, ping) }, true},
		{"no pong", func(r *rawWS, ping, _ []byte) error { return nil }, false},
		{"empty pong", func(r *rawWS, ping, _ []byte) error { return r.write(opPong, nil) }, false},
		{"wrong payload", func(r *rawWS, ping, _ []byte) error { return r.write(opPong, append(bytes.Clone(ping), '0')) }, false},
		{"duplicate of an earlier ping", func(r *rawWS, ping, prev []byte) error {
			if prev == nil { // the first ping is answered properly
				return r.write(opPong, ping)
			}
			return r.write(opPong, prev)
		}, false},
		{"unsolicited pongs only", func(r *rawWS, ping, _ []byte) error {
			return r.write(opPong, []byte("999999"))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLiveHub(t, cfg, nil)
			r := dialRaw(t, l)
			defer r.conn.Close()
			b, _, _ := protocol.NewOutbound(protocol.NewCodec(cfg.Limits(), 0)).AppendFrame(nil, wstest.Hello(peerID, hubID))
			if err := r.write(opBinary, b); err != nil {
				t.Fatal(err)
			}
			// Our own ping is answered with its exact payload.
			if err := r.write(opPing, []byte("12345678")); err != nil {
				t.Fatal(err)
			}
			var prev []byte
			pings, pongSeen := 0, false
			for {
				op, p, err := r.read(2 * wait)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				switch op {
				case opPong:
					if string(p) != "12345678" {
						t.Fatalf("pong %q", p)
					}
					pongSeen = true
				case opPing:
					pings++
					if err := tc.answer(r, p, prev); err != nil {
						t.Fatal(err)
					}
					prev = bytes.Clone(p)
					if tc.survive && pings == 5 {
						if !pongSeen {
							t.Fatal("our ping was not answered")
						}
						return // five rounds answered, still open
					}
				case opClose:
					if tc.survive {
						t.Fatalf("closed after %d answered pings", pings)
					}
					if code := binary.BigEndian.Uint16(p); code != 1001 {
						t.Fatalf("close code %d, want 1001", code)
					}
					testkit.Eventually(t, wait, "pong-timeout event", func() bool { return l.rec.Count(observer.TypeConnectionFailed) == 1 })
					if c := l.rec.OfType(observer.TypeConnectionFailed)[0].Payload.(observer.ConnectionFailed).Code; c != observer.ConnErrPongTimeout {
						t.Fatalf("code %s", c)
					}
					return
				}
			}
		})
	}
}

// TestS17_RealLivenessBothSides: with a short ping interval on both sides, a hub and a peer
// over real sockets answer each other's pings (coder/websocket echoes the payload) and
// stay ready through many rounds.
func TestS17_RealLivenessBothSides(t *testing.T) {
	cfg := wstest.SmallConfig(t)
	cfg.PingInterval, cfg.PongTimeout = 300*time.Millisecond, 250*time.Millisecond // generous: a busy machine
	l := newLiveHub(t, cfg, nil)
	peerRec := &observertest.Recorder{}
	p, err := ws.NewPeer(ws.PeerOptions{Config: cfg, InstanceID: peerID, HubInstanceID: hubID, URL: l.url,
		Token: func() (string, error) { return "secret-a", nil }, Namespaces: newHandlers(nil).factory, Observer: peerRec})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Start()
	testkit.Eventually(t, wait, "ready", func() bool { return p.State() == observer.ConnReady })
	// Six ping rounds on each side (event-loop-delay samples count the pings).
	testkit.Eventually(t, wait, "ping rounds", func() bool {
		return peerRec.Count(observer.TypeEventLoopDelaySampled) >= 6 && l.rec.Count(observer.TypeEventLoopDelaySampled) >= 6
	})
	if p.State() != observer.ConnReady || peerRec.Count(observer.TypeConnectionFailed) != 0 || l.rec.Count(observer.TypeConnectionFailed) != 0 {
		t.Fatalf("state %s, failures peer %d hub %d", p.State(), peerRec.Count(observer.TypeConnectionFailed), l.rec.Count(observer.TypeConnectionFailed))
	}
}
