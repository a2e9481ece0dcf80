package ws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// recordConn is a net.Conn that records each Write call.
type recordConn struct {
	net.Conn
	mu     sync.Mutex // guards writes
	writes [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (r *recordConn) calls() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.writes...)
}

func TestCorkConnHoldsUntilUncork(t *testing.T) {
	rc := &recordConn{}
	c := newCorkConn(rc, nil)
	// Not corked: every write goes through at once.
	mustWrite(t, c, "a")
	mustWrite(t, c, "b")
	if got := rc.calls(); len(got) != 2 {
		t.Fatalf("%d writes uncorked, want 2", len(got))
	}
	// Corked: held, then one write in order, including a write made from another goroutine
	// (a pong answered by the reader) during the batch.
	c.cork()
	mustWrite(t, c, "frame1|")
	done := make(chan struct{})
	go func() { defer close(done); mustWrite(t, c, "pong|") }()
	<-done
	mustWrite(t, c, "frame2")
	if got := rc.calls(); len(got) != 2 || c.held() != len("frame1|pong|frame2") {
		t.Fatalf("corked writes reached the socket: %d calls, %d held", len(got), c.held())
	}
	if err := c.uncork(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := rc.calls()
	if len(got) != 3 || string(got[2]) != "frame1|pong|frame2" {
		t.Fatalf("after uncork: %q", got)
	}
	if c.held() != 0 {
		t.Fatal("bytes still held after uncork")
	}
	// After uncork, writes go through again (a ping between batches is not held).
	mustWrite(t, c, "ping")
	if got := rc.calls(); len(got) != 4 {
		t.Fatalf("%d writes, want 4", len(got))
	}
}

func TestCorkConnOverflowKeepsOrder(t *testing.T) {
	rc := &recordConn{}
	c := newCorkConn(rc, nil)
	c.cork()
	first := bytes.Repeat([]byte{1}, corkMaxBytes-10)
	second := bytes.Repeat([]byte{2}, 20)
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(second); err != nil {
		t.Fatal(err)
	}
	// What was held left first, then the write that did not fit, in pieces of at most
	// socketWritePiece bytes.
	got := rc.calls()
	for _, w := range got {
		if len(w) > socketWritePiece {
			t.Fatalf("a write of %d bytes", len(w))
		}
	}
	if all := bytes.Join(got, nil); !bytes.Equal(all, append(first, second...)) {
		t.Fatalf("overflow wrote %d bytes out of order", len(all))
	}
	// Still corked after an overflow.
	mustWrite(t, c, "x")
	if c.held() != 1 {
		t.Fatalf("held %d, want 1", c.held())
	}
	if err := c.uncork(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCorkConnUncorkEndsWithContext: a flush to a socket that takes nothing ends when its
// context does.
func TestCorkConnUncorkEndsWithContext(t *testing.T) {
	a, b := net.Pipe() // unbuffered: a write blocks until the other end reads
	defer a.Close()
	defer b.Close()
	c := newCorkConn(a, nil)
	c.cork()
	mustWrite(t, c, "stuck")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.uncork(ctx)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("uncork of a stuck socket: %v", err)
	}
}

// fakeHijacker is a ResponseWriter whose connection the server had read ahead of.
type fakeHijacker struct {
	http.ResponseWriter
	conn net.Conn
	brw  *bufio.ReadWriter
}

func (f *fakeHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return f.conn, f.brw, nil }

func TestCorkingHijackKeepsReadAheadBytes(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	br := bufio.NewReader(io.MultiReader(strings.NewReader("early"), a))
	if _, err := br.Peek(5); err != nil { // the server read "early" past the request
		t.Fatal(err)
	}
	w := &corkingResponseWriter{ResponseWriter: &fakeHijacker{conn: a, brw: bufio.NewReadWriter(br, bufio.NewWriter(a))}}
	nc, brw, err := w.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	if nc != w.conn || w.conn == nil {
		t.Fatal("Hijack did not return the cork connection")
	}
	go func() { _, _ = b.Write([]byte("-late")) }()
	got := make([]byte, len("early-late"))
	if _, err := io.ReadFull(brw, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "early-late" {
		t.Fatalf("read %q", got)
	}
	if brw.Writer.Size() != hubWriteBufBytes {
		t.Fatalf("write buffer %d bytes", brw.Writer.Size())
	}
}

func mustWrite(t *testing.T, w io.Writer, s string) {
	t.Helper()
	if _, err := w.Write([]byte(s)); err != nil {
		t.Error(err)
	}
}

// TestDialedTransportBatches: the peer's dialed WebSocket is corked by BeginBatch and its
// messages reach the server only at Flush, in order, as separate messages.
func TestDialedTransportBatches(t *testing.T) {
	got := make(chan []byte, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			_, m, err := c.Read(r.Context())
			if err != nil {
				return
			}
			got <- m
		}
	}))
	defer srv.Close()
	tr, err := WebSocketDialer{}.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(1000, "")
	wt := tr.(*wsTransport)
	if wt.cork == nil {
		t.Fatal("the dialed socket is not corkable")
	}
	wt.BeginBatch()
	for _, m := range []string{"one", "two", "three"} {
		if err := wt.Write(context.Background(), []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case m := <-got:
		t.Fatalf("%q arrived before the flush", m)
	case <-time.After(50 * time.Millisecond):
	}
	if err := wt.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two", "three"} {
		select {
		case m := <-got:
			if string(m) != want {
				t.Fatalf("got %q, want %q", m, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("flushed messages did not arrive")
		}
	}
}

// TestCorkConnReadsThroughPooledBuffer: on a TCP socket a read waits for data without a
// buffer, then one read(2) takes the whole burst into a pooled buffer that small reads are
// served from; once consumed the buffer goes back (an idle connection holds none); the end
// of the stream is io.EOF.
// tcpPair connects two TCP sockets on loopback; both are closed when the test ends.
func tcpPair(t *testing.T) (client, srv net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	select {
	case srv = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener accepted nothing in ten seconds")
	}
	t.Cleanup(func() { srv.Close() })
	return client, srv
}

func TestCorkConnReadsThroughPooledBuffer(t *testing.T) {
	client, srv := tcpPair(t)
	c := newCorkConn(srv, []byte("pre:"))
	if c.raw == nil {
		t.Fatal("a TCP socket without a RawConn")
	}
	burst := strings.Repeat("frame;", 100)
	if _, err := client.Write([]byte(burst)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	p := make([]byte, 7)
	for len(got) < len("pre:")+len(burst) {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
		if len(got) > len("pre:") && len(got) < len("pre:")+len(burst) && c.rbuf == nil {
			t.Fatalf("after %d bytes the burst is not held in one pooled buffer", len(got))
		}
	}
	if string(got) != "pre:"+burst {
		t.Fatalf("read %q", got)
	}
	if c.rbuf != nil {
		t.Fatal("the read buffer is still held once consumed")
	}
	if m := c.moved.Load(); m != int64(len(burst)) {
		t.Fatalf("moved %d bytes, want %d", m, len(burst))
	}
	client.Close()
	if n, err := c.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("at the end: %d, %v", n, err)
	}
}

// TestCorkConnReadOfTheSocketAllocatesNothing: a read that has to wait for the socket and
// read(2) it allocates nothing (the buffer is pooled, the readiness callback bound once):
// each run below is one such read.
func TestCorkConnReadOfTheSocketAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count: not in -short")
	}
	client, srv := tcpPair(t)
	c := newCorkConn(srv, nil)
	one, p := []byte{1}, make([]byte, 64)
	read := func() {
		if _, err := client.Write(one); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(p); n != 1 || err != nil {
			t.Fatalf("read %d bytes, %v", n, err)
		}
	}
	read() // warm up: the pool has a buffer
	if allocs := testing.AllocsPerRun(100, read); allocs > 0 {
		t.Fatalf("%.1f allocations per read of the socket, want none", allocs)
	}
}

// TestTransportReadAllocatesTheMessageOnly: reading a message from a real WebSocket costs
// one allocation — the message itself — on top of what coder/websocket allocates per
// message (none in steady state).
func TestTransportReadAllocatesTheMessageOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count: not in -short")
	}
	srvT := make(chan *wsTransport, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &corkingResponseWriter{ResponseWriter: w}
		c, err := websocket.Accept(cw, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		srvT <- newWSTransport(c, cw.conn, time.Second)
	}))
	defer srv.Close()
	client, err := WebSocketDialer{}.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.(*wsTransport).c.CloseNow()
	hub := <-srvT
	defer hub.c.CloseNow()
	const runs = 200
	msg := bytes.Repeat([]byte{7}, 100)
	go func() {
		for range runs + 10 {
			if err := client.Write(context.Background(), msg); err != nil {
				return
			}
		}
	}()
	ctx := context.Background()
	for range 10 { // warm up
		if _, err := hub.Read(ctx, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(runs-1, func() {
		if _, err := hub.Read(ctx, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%.1f allocations per message read, want 1 (the message)", allocs)
	}
}
