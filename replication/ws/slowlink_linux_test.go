//go:build linux

package ws_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// A slow link whose sender's kernel holds seconds of data: the hub's socket has a large send
// buffer (as Linux autotunes it on a long, fat link), the peer's client reads slowly through
// a small receive buffer. Once the hub has handed its last bytes to the kernel, its own
// socket counters stop, but the kernel keeps delivering what it holds — with the ping behind
// it. These tests run on Linux only: elsewhere liveness cannot see delivery (tcp_info).

// Sizes of the kernel-buffered slow link.
const (
	kbHubSndBuf    = 512 << 10 // SO_SNDBUF the hub's socket gets (Linux doubles it)
	kbClientRcvBuf = 16 << 10  // SO_RCVBUF of the client's socket, set before connecting
	kbReadRate     = 500_000   // bytes per second the client reads
	kbUpdate       = 64_000    // bytes per update
	kbUpdates      = 24        // 1.5 MB in all
)

// sndbufListener gives every accepted TCP socket a fixed send buffer and keeps it, so the
// test can ask the kernel how much of what the hub wrote is still unacknowledged. The
// connection it returns is the *net.TCPConn itself: the hub sees a plain TCP socket.
type sndbufListener struct {
	net.Listener
	mu    sync.Mutex // guards conns
	conns []*net.TCPConn
}

func (l *sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(kbHubSndBuf)
		l.mu.Lock()
		l.conns = append(l.conns, tc)
		l.mu.Unlock()
	}
	return c, nil
}

// outq returns the bytes the hub's first socket holds that the client has not acknowledged
// (SIOCOUTQ), or -1.
func (l *sndbufListener) outq() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) == 0 {
		return -1
	}
	raw, err := l.conns[0].SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = v
		}
	})
	return n
}

// slowReadConn reads at most th's rate, in 10 ms slices, and nothing while th is stalled.
type slowReadConn struct {
	net.Conn
	th        *throttle
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *slowReadConn) Read(p []byte) (int, error) {
	for {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		case <-time.After(10 * time.Millisecond):
		}
		if n, stalled := c.th.slice(); !stalled && n > 0 {
			return c.Conn.Read(p[:min(len(p), n)])
		}
	}
}

func (c *slowReadConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// kernelBufferedLink starts a hub with a 250 ms pong timeout behind an sndbufListener and
// connects a client that reads through th.
type kernelBufferedLink struct {
	cfg protocol.Config
	rec *observertest.Recorder
	hub *ws.Hub
	ln  *sndbufListener
	cl  *client
	h   *testHandler
}

func newKernelBufferedLink(t *testing.T, th *throttle) *kernelBufferedLink {
	t.Helper()
	cfg := protocol.DefaultConfig()
	cfg.PingInterval, cfg.PongTimeout = 400*time.Millisecond, 250*time.Millisecond
	must(t, cfg.Validate())
	k := &kernelBufferedLink{cfg: cfg, rec: &observertest.Recorder{}}
	hs := newHandlers(nil)
	table, _ := auth.NewPeerTable([]auth.PeerEntry{{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("secret-a"), Namespaces: []string{"*"}, Read: true, Submit: true}})
	hub, err := ws.NewHub(ws.HubOptions{Config: cfg, InstanceID: hubID, Auth: table, Namespaces: hs.factory, Observer: k.rec})
	must(t, err)
	k.hub = hub
	srv := httptest.NewUnstartedServer(hub)
	k.ln = &sndbufListener{Listener: srv.Listener}
	srv.Listener = k.ln
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = hub.Shutdown(context.Background()) })

	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, kbClientRcvBuf)
		}); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowReadConn{Conn: c, th: th, closed: make(chan struct{})}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/replication",
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, HTTPHeader: http.Header{"Authorization": {"Bearer secret-a"}}})
	must(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(1 << 20)
	codec := protocol.NewCodec(cfg.Limits(), protocol.CapChunkedUpdate)
	k.cl = &client{t: t, c: c, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec)}
	must(t, k.cl.handshake())
	k.h = hs.next(t)
	return k
}

// send queues kbUpdates updates across four namespaces on the hub.
func (k *kernelBufferedLink) send(t *testing.T) {
	k.h.do(t, func(s seam.Session) {
		for i := range kbUpdates {
			if err := s.Outbox(wstest.NamespaceID(i%4+1), nil).Enqueue(seam.DataItem{Bytes: upd(kbUpdate, byte(i))}); err != nil {
				t.Error(err)
			}
		}
	})
}

// watchOutq samples the hub socket's unacknowledged bytes every 10 ms until stop is closed,
// and keeps the largest.
func (k *kernelBufferedLink) watchOutq(stop <-chan struct{}) *atomic.Int64 {
	var most atomic.Int64
	go func() {
		for {
			if n := int64(k.ln.outq()); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return &most
}

func (k *kernelBufferedLink) pongTimeouts() int {
	n := 0
	for _, e := range k.rec.OfType(observer.TypeConnectionFailed) {
		if cf, ok := e.Payload.(observer.ConnectionFailed); ok && cf.Code == observer.ConnErrPongTimeout {
			n++
		}
	}
	return n
}

// TestS17_SlowLinkKernelBufferDrains: the hub writes 1.5 MB to a client that reads at
// 500 KB/s; its socket's send buffer takes about 1 MB of it, so after the hub's last write
// the kernel still delivers for about two seconds — eight pong timeouts — while the hub
// reads nothing and the ping waits behind the data. The remote's TCP acknowledges bytes
// all along, so the connection stays up and every update arrives.
func TestS17_SlowLinkKernelBufferDrains(t *testing.T) {
	th := &throttle{bytesPerSec: kbReadRate}
	k := newKernelBufferedLink(t, th)
	stop := make(chan struct{})
	defer close(stop)
	most := k.watchOutq(stop)

	k.send(t)
	start := time.Now()
	for i := range kbUpdates {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, msg, err := k.cl.c.Read(ctx) // answers the hub's pings as they arrive
		cancel()
		if err != nil {
			t.Fatalf("update %d of %d: %v (after %v; %d pong timeouts)", i+1, kbUpdates, err, time.Since(start), k.pongTimeouts())
		}
		if msg[5] != byte(protocol.TypeUpdate) || len(msg) < kbUpdate {
			t.Fatalf("update %d: frame type %d, %d bytes", i+1, msg[5], len(msg))
		}
	}
	took := time.Since(start)
	// The test proves something only if the kernel held more than a pong timeout's worth
	// of the client's reading: at least 2 × 250 ms × 500 KB/s.
	held := most.Load()
	if need := int64(2 * kbReadRate * k.cfg.PongTimeout / time.Second); held < need {
		t.Fatalf("the hub's socket held at most %d unacknowledged bytes (< %d): the kernel buffered too little for the test to prove anything", held, need)
	}
	if got := k.rec.Count(observer.TypeConnectionFailed); got != 0 {
		t.Fatalf("%d connection failures (%d pong timeouts) on a link that was delivering", got, k.pongTimeouts())
	}
	if cs := k.hub.Connections(); len(cs) != 1 || cs[0].State != observer.ConnReady {
		t.Fatalf("connections after the slow transfer: %+v", cs)
	}
	t.Logf("%d KB in %v; the hub's socket held up to %d KB unacknowledged", kbUpdates*kbUpdate/1000, took.Round(time.Millisecond), held/1000)
}

// TestS17_SlowLinkKernelBufferStalls: the same link, but the client stops reading after the
// first update while the hub's socket holds a full send buffer. Nothing is acknowledged and
// nothing is read, so the pong timeout still closes the connection with PONG_TIMEOUT.
func TestS17_SlowLinkKernelBufferStalls(t *testing.T) {
	th := &throttle{bytesPerSec: kbReadRate}
	k := newKernelBufferedLink(t, th)
	stop := make(chan struct{})
	defer close(stop)
	most := k.watchOutq(stop)
	k.send(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, _, err := k.cl.c.Read(ctx)
	cancel()
	must(t, err)
	th.set(kbReadRate, true)
	stalled := time.Now()
	testkit.Eventually(t, wait, "pong timeout on a stalled reader", func() bool { return k.pongTimeouts() > 0 })
	testkit.Eventually(t, wait, "the connection closed", func() bool { return len(k.hub.Connections()) == 0 })
	t.Logf("stall detected after %v; the hub's socket held up to %d KB unacknowledged", time.Since(stalled).Round(time.Millisecond), most.Load()/1000)
}
