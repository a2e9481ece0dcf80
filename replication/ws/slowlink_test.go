package ws_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// throttle limits what the hub's sockets write to bytesPerSec, in 10 ms slices, and can
// stall them (nothing is written or read while stalled).
type throttle struct {
	mu          sync.Mutex // guards bytesPerSec, stalled
	bytesPerSec int
	stalled     bool
}

func (th *throttle) set(bytesPerSec int, stalled bool) {
	th.mu.Lock()
	th.bytesPerSec, th.stalled = bytesPerSec, stalled
	th.mu.Unlock()
}

func (th *throttle) slice() (int, bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.bytesPerSec / 100, th.stalled
}

type throttledListener struct {
	net.Listener
	th *throttle
}

func (l throttledListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &throttledConn{Conn: c, th: l.th, closed: make(chan struct{})}, nil
}

type throttledConn struct {
	net.Conn
	th        *throttle
	closeOnce sync.Once
	closed    chan struct{}
}

// wait sleeps one slice, or returns false once the connection is closed.
func (c *throttledConn) wait() bool {
	select {
	case <-c.closed:
		return false
	case <-time.After(10 * time.Millisecond):
		return true
	}
}

func (c *throttledConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, stalled := c.th.slice()
		if stalled || n == 0 {
			if !c.wait() {
				return done, net.ErrClosed
			}
			continue
		}
		m, err := c.Conn.Write(p[done:min(len(p), done+n)])
		done += m
		if err != nil {
			return done, err
		}
		if done < len(p) && !c.wait() {
			return done, net.ErrClosed
		}
	}
	return done, nil
}

func (c *throttledConn) Read(p []byte) (int, error) {
	for {
		if _, stalled := c.th.slice(); !stalled {
			break
		}
		if !c.wait() {
			return 0, net.ErrClosed
		}
	}
	return c.Conn.Read(p)
}

func (c *throttledConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestS17_SlowLinkStaysLive: on a link that delivers at 200 KB/s with far more queued than
// it drains within pongTimeoutMs, the pong waits behind data, yet the hub does not declare
// the link dead; when the link then stalls (nothing moves), the pong timeout still closes
// the connection with PONG_TIMEOUT, within pingIntervalMs + pongTimeoutMs plus the window
// in which the last bytes moved. Scaled down from 6 MB at 100 KB/s with the default timers
// (60 s of data, six pong timeouts): 600 KB queued at 200 KB/s, a 200 ms pong timeout, a
// 300 ms ping interval.
func TestS17_SlowLinkStaysLive(t *testing.T) {
	cfg := protocol.DefaultConfig()
	cfg.PingInterval, cfg.PongTimeout = 300*time.Millisecond, 200*time.Millisecond
	must(t, cfg.Validate())
	rec := &observertest.Recorder{}
	hs := newHandlers(nil)
	table, _ := auth.NewPeerTable([]auth.PeerEntry{{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("secret-a"), Namespaces: []string{"*"}, Read: true, Submit: true}})
	hub, err := ws.NewHub(ws.HubOptions{Config: cfg, InstanceID: hubID, Auth: table, Namespaces: hs.factory, Observer: rec})
	must(t, err)
	th := &throttle{bytesPerSec: 200_000}
	srv := httptest.NewUnstartedServer(hub)
	srv.Listener = throttledListener{Listener: srv.Listener, th: th}
	srv.Start()
	defer srv.Close()
	defer hub.Shutdown(context.Background())

	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/replication",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer secret-a"}}})
	must(t, err)
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	codec := protocol.NewCodec(cfg.Limits(), protocol.CapChunkedUpdate)
	cl := &client{t: t, c: c, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec)}
	must(t, cl.handshake())
	h := hs.next(t)

	// 600 updates of 1 KB: 3 s of the link, fifteen pong timeouts.
	const n = 600
	h.do(t, func(s seam.Session) {
		for i := range n {
			if err := s.Outbox(wstest.NamespaceID(i%4+1), nil).Enqueue(seam.DataItem{Bytes: upd(1000, byte(i))}); err != nil {
				t.Error(err)
			}
		}
	})
	start := time.Now()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, msg, err := c.Read(ctx) // answers the hub's pings as they arrive
		cancel()
		if err != nil {
			t.Fatalf("update %d of %d: %v (after %v)", i+1, n, err, time.Since(start))
		}
		if msg[5] != byte(protocol.TypeUpdate) {
			t.Fatalf("frame type %d", msg[5])
		}
	}
	took := time.Since(start)
	if took < 2*time.Second {
		t.Fatalf("delivered in %v: the link was not slow, the test proves nothing", took)
	}
	if got := rec.Count(observer.TypeConnectionFailed); got != 0 {
		t.Fatalf("%d connection failures on a link that was delivering", got)
	}
	if cs := hub.Connections(); len(cs) != 1 || cs[0].State != observer.ConnReady {
		t.Fatalf("connections after the slow transfer: %+v", cs)
	}

	// Keep reading (pongs) in the background, then stall the link: nothing moves.
	go func() {
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	time.Sleep(cfg.PingInterval) // a ping or two answered on the idle link
	stalled := time.Now()
	th.set(200_000, true)
	testkit.Eventually(t, wait, "pong timeout on a stalled link", func() bool {
		for _, e := range rec.OfType(observer.TypeConnectionFailed) {
			if cf, ok := e.Payload.(observer.ConnectionFailed); ok && cf.Code == observer.ConnErrPongTimeout {
				return true
			}
		}
		return false
	})
	t.Logf("slow link: %d KB in %v; stall detected after %v", n, took.Round(time.Millisecond), time.Since(stalled).Round(time.Millisecond))
}
