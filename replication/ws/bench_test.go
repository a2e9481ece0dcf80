package ws_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// benchHub serves a hub with the default configuration on loopback.
func benchHub(b *testing.B, factory seam.NamespaceFactory) (*ws.Hub, string, func()) {
	b.Helper()
	table, _ := auth.NewPeerTable([]auth.PeerEntry{{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("secret-a"), Namespaces: []string{"*"}, Read: true, Submit: true}})
	hub, err := ws.NewHub(ws.HubOptions{Config: protocol.DefaultConfig(), InstanceID: hubID, Auth: table, Namespaces: factory})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(hub)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/replication"
	return hub, url, func() {
		_ = hub.Shutdown(context.Background())
		srv.Close()
	}
}

func benchDial(b *testing.B, url string) *client {
	b.Helper()
	c, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer secret-a"}}})
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	cfg := protocol.DefaultConfig()
	codec := protocol.NewCodec(cfg.Limits(), protocol.CapChunkedUpdate)
	return &client{t: b, c: c, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec)}
}

// BenchmarkHandshakeLoopback: upgrade (with token check) + HELLO/HELLO_ACK over loopback.
func BenchmarkHandshakeLoopback(b *testing.B) {
	_, url, stop := benchHub(b, func(seam.Session) seam.Handler { return nil })
	defer stop()
	start := time.Now()
	for b.Loop() {
		c := benchDial(b, url)
		if err := c.handshake(); err != nil {
			b.Fatal(err)
		}
		c.c.CloseNow()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handshakes/s")
}

// BenchmarkThroughput1KiB: hub→peer data frames carrying 1 KiB updates on one connection,
// through the outbox, round-robin over 8 namespaces, read by a coder/websocket client.
func BenchmarkThroughput1KiB(b *testing.B) {
	sessions := make(chan seam.Session, 1)
	_, url, stop := benchHub(b, func(s seam.Session) seam.Handler { sessions <- s; return nil })
	defer stop()
	c := benchDial(b, url)
	defer c.c.CloseNow()
	if err := c.handshake(); err != nil {
		b.Fatal(err)
	}
	s := <-sessions
	payload := make([]byte, 1024)
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	total := b.N
	// Keep 512 items queued: each sent item enqueues the next until total.
	queued := 0
	var feed func(seam.SentInfo)
	enqueue := func() {
		ns := wstest.NamespaceID(queued%8 + 1)
		queued++
		if err := s.Outbox(ns, nil).Enqueue(seam.DataItem{Bytes: payload, Sent: feed}); err != nil {
			b.Error(err)
		}
	}
	feed = func(seam.SentInfo) {
		if queued < total {
			enqueue()
		}
	}
	s.Post(func() {
		for queued < total && queued < 512 {
			enqueue()
		}
	})
	ctx := context.Background()
	for i := 0; i < total; i++ {
		_, msg, err := c.c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if msg[5] != byte(protocol.TypeUpdate) {
			b.Fatalf("frame type %d", msg[5])
		}
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(total)/el, "frames/s")
}

// BenchmarkIdleConnectionMemory: heap held per idle ready hub connection with its
// coder/websocket socket (the client ends, in the same process, are measured separately
// and subtracted), and over a fake transport (the connection core alone).
func BenchmarkIdleConnectionMemory(b *testing.B) {
	const n = 200
	b.Run("loopback", func(b *testing.B) {
		hub, url, stop := benchHub(b, func(seam.Session) seam.Handler { return nil })
		defer stop()
		var perConn float64
		for b.Loop() {
			before := heap()
			cs := make([]*client, n)
			for i := range cs {
				cs[i] = benchDial(b, url)
				if err := cs[i].handshake(); err != nil {
					b.Fatal(err)
				}
			}
			// Idle: the hub's owner and writer goroutines of every connection have exited
			// after their linger.
			testkit.Eventually(b, wait, "idle connections", func() bool { return ws.OwnersIdle(hub) && ws.WritersRunning(hub) == 0 })
			after := heap()
			// A client end costs about what a hub socket costs; measure clients alone.
			perConn = float64(after-before) / n
			for _, c := range cs {
				c.c.CloseNow()
			}
			drained(b, hub)
		}
		b.ReportMetric(perConn, "B/conn(hub+client)")
	})
	b.Run("core", func(b *testing.B) {
		table, _ := auth.NewPeerTable(nil)
		hub, err := ws.NewHub(ws.HubOptions{Config: protocol.DefaultConfig(), InstanceID: hubID, Auth: table,
			Namespaces: func(seam.Session) seam.Handler { return nil }})
		if err != nil {
			b.Fatal(err)
		}
		defer hub.Shutdown(context.Background())
		var perConn float64
		for b.Loop() {
			before := heap()
			ends := make([]*wstest.End, n)
			for i := range ends {
				a, srv := wstest.Pair(4)
				ends[i] = a
				if err := hub.Accept(srv, auth.PeerIdentity{PeerInstanceID: peerID}); err != nil {
					b.Fatal(err)
				}
				cfg := protocol.DefaultConfig()
				codec := protocol.NewCodec(cfg.Limits(), 0)
				m, _ := codec.AppendFrame(nil, 1, wstest.Hello(peerID, hubID))
				_ = a.Send(m)
				if _, err := a.Recv(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			after := heap()
			perConn = float64(after-before) / n
			for _, a := range ends {
				_ = a.Close(1000, "")
			}
			drained(b, hub)
		}
		b.ReportMetric(perConn, "B/conn(core+fake)")
	})
}

// drained waits until every connection of hub is gone, so the next measurement starts
// clean.
func drained(b *testing.B, hub *ws.Hub) {
	deadline := time.Now().Add(wait)
	for len(hub.Connections()) > 0 {
		if time.Now().After(deadline) {
			b.Fatal("connections did not close")
		}
		time.Sleep(time.Millisecond)
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse // goroutine stacks count: each connection runs three
}
