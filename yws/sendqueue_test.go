package yws

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/yjs"
)

// The send queue's bounds apply to what waits behind the first message waiting: a SyncStep2
// larger than the bound, still waiting for the writer, does not make the awareness messages
// of other editors joining drop the editor; what piles up behind it beyond the bound does.
func TestSendQueue_BoundsWhatWaitsBehindTheFirst(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.SendQueueMessages, o.SendQueueBytes = 64, 1<<20 })
	c := newConn(e.srv, &room{srv: e.srv, ns: e.ns}, nil, auth.ClientGrant{Name: "writer"}, "test", false)
	defer c.cancel()
	state := make([]byte, 4<<20)
	c.sendParts(AppendSyncHead(nil, SyncStep2, len(state)), state)
	small := make([]byte, 64<<10)
	for i := range 16 { // 1 MiB behind it: up to the bound
		c.send(small)
		if _, cause := c.out.closedWith(); cause != "" {
			t.Fatalf("dropped (%s) after the big first message and %d small ones", cause, i+1)
		}
	}
	c.send(small)
	if _, cause := c.out.closedWith(); cause != "slow-client" {
		t.Fatalf("more than the bound behind the first message: closing as %q, want dropped as slow-client", cause)
	}
}

// throttledConn reads at most 64 KiB every 4 ms (about 16 MiB/s, 1 MiB in about 60 ms: an
// eighth of the test's WriteTimeout, so that a loaded machine does not make it miss a
// frame's deadline): an editor that keeps reading while busy with what it received.
type throttledConn struct{ net.Conn }

func (c throttledConn) Read(p []byte) (int, error) {
	time.Sleep(4 * time.Millisecond)
	return c.Conn.Read(p[:min(len(p), 64<<10)])
}

// A document far larger than what a slow editor reads within WriteTimeout reaches it, since
// each frame of the message (1 MiB) has WriteTimeout of its own; one that stops reading is
// still dropped (TestSlowClient_DroppedBeyondItsQueue, and the e2e hostile editors).
func TestLargeSyncStep2ToSlowReader(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.WriteTimeout = 500 * time.Millisecond })
	l, err := e.reg.Open(context.Background(), "default", e.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	doc := yjs.NewDoc()
	var updates [][]byte
	doc.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	for range 6 { // 24 MiB: about 1.5 s at the reader's pace, three times WriteTimeout
		if err := doc.GetText("body").Insert(0, strings.Repeat("s", 4<<20-1024), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range updates {
		if _, err := l.WriteLocal(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	want, err := l.EncodeState(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dialer := &net.Dialer{}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return throttledConn{c}, nil
	}}}
	ws, _, err := websocket.Dial(ctx, e.url(e.ns, "writer"), &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(64 << 20)
	if err := ws.Write(ctx, websocket.MessageBinary, AppendSync(nil, SyncStep1, []byte{0})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("the slow reader lost its connection after %v: %v (write-failed closes: %v)", time.Since(start).Round(time.Millisecond), err,
				e.metric("nomicore_client_disconnects_total", "reason", "write-failed"))
		}
		m, err := decodeServerMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == TypeSync && m.Sync == SyncStep2 {
			if len(m.Payload) != len(want) {
				t.Fatalf("SyncStep2 of %d bytes, want %d", len(m.Payload), len(want))
			}
			t.Logf("%d MiB read in %v with WriteTimeout 500ms", len(b)>>20, time.Since(start).Round(time.Millisecond))
			return
		}
	}
}
