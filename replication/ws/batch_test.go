package ws_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// batchEnd is a fake transport that batches like the corked WebSocket: between BeginBatch
// and Flush its writes are held, and Flush hands them to the remote in order. Flushes can be
// held back (hold) to play a socket that has not taken the batch yet.
type batchEnd struct {
	*wstest.End
	mu       sync.Mutex // guards batching, held
	batching bool
	held     [][]byte
	gate     chan struct{} // closed: flushes go through
	flushes  atomic.Int32  // Flush calls that began
	frames   atomic.Int32  // frames written through Write
}

func newBatchEnd(e *wstest.End) *batchEnd {
	g := make(chan struct{})
	close(g)
	return &batchEnd{End: e, gate: g}
}

func (b *batchEnd) hold() {
	b.mu.Lock()
	b.gate = make(chan struct{})
	b.mu.Unlock()
}

func (b *batchEnd) release() {
	b.mu.Lock()
	close(b.gate)
	b.mu.Unlock()
}

func (b *batchEnd) BeginBatch() {
	b.mu.Lock()
	b.batching = true
	b.mu.Unlock()
}

func (b *batchEnd) Write(ctx context.Context, msg []byte) error {
	b.frames.Add(1)
	b.mu.Lock()
	if b.batching {
		b.held = append(b.held, append([]byte(nil), msg...))
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	return b.End.Write(ctx, msg)
}

func (b *batchEnd) Flush(ctx context.Context) error {
	b.flushes.Add(1)
	b.mu.Lock()
	gate := b.gate
	b.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	held := b.held
	b.held, b.batching = nil, false
	b.mu.Unlock()
	for _, m := range held {
		if err := b.End.Write(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// batchedConnection is a hub fixture with one connection whose hub end batches (batchEnd).
func batchedConnection(t *testing.T) (*hubFixture, *batchEnd, *rawPeer) {
	t.Helper()
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	var be *batchEnd
	p := f.connectVia(64, func(e *wstest.End) ws.Transport { be = newBatchEnd(e); return be })
	return f, be, p
}

// TestBatchedWritesAccounting: the writer puts every frame that is ready into one batch and
// flushes it once; bytes written into a batch count as unflushed until its flush returns,
// so the watermark accounting is exact (docs/protocol.md#backpressure), and the frames arrive
// in sequence order.
func TestBatchedWritesAccounting(t *testing.T) {
	f, be, p := batchedConnection(t)
	h := f.handshake(p)
	if n := be.flushes.Load(); n != 1 {
		t.Fatalf("%d flushes for HELLO_ACK, want 1", n)
	}

	// One UPDATE whose flush the socket does not take yet.
	be.hold()
	const size = 100
	frameLen := 0
	h.do(t, func(s seam.Session) {
		if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: upd(size, 0)}); err != nil {
			t.Fatal(err)
		}
	})
	testkit.Eventually(t, wait, "first batch flushing", func() bool { return be.flushes.Load() == 2 })
	h.do(t, func(s seam.Session) {
		frameLen = s.Stats().UnflushedData
		// Ten more while the first batch is stuck: they wait for the writer.
		for i := 1; i <= 10; i++ {
			if err := s.Outbox(wstest.NamespaceID(i%3+1), nil).Enqueue(seam.DataItem{Bytes: upd(size, byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
	})
	if frameLen <= size {
		t.Fatalf("unflushed %d bytes while the first batch is not flushed, want its frame", frameLen)
	}
	testkit.Eventually(t, wait, "all handed to the writer", func() bool {
		var st seam.QueueStats
		h.do(t, func(s seam.Session) { st = s.Stats() })
		return st.QueuedBytes == 0 && st.UnflushedData == 11*frameLen
	})
	be.release()
	// The ten frames went into one batch: one more flush, and every byte is flushed.
	testkit.Eventually(t, wait, "second batch flushed", func() bool {
		var st seam.QueueStats
		h.do(t, func(s seam.Session) { st = s.Stats() })
		return st.UnflushedData == 0
	})
	if n := be.flushes.Load(); n != 3 {
		t.Fatalf("%d flushes, want 3 (HELLO_ACK, the first UPDATE, then the ten together)", n)
	}
	var last uint32
	for i := range 11 {
		fr := p.recv()
		if fr.Type() != protocol.TypeUpdate {
			t.Fatalf("frame %d: %v", i, fr.Type())
		}
		if fr.Sequence <= last {
			t.Fatalf("frame %d: sequence %d after %d", i, fr.Sequence, last)
		}
		last = fr.Sequence
	}
}

// TestWriterLingersPastAStaleWake: a writer that took frames pushed while it was flushing
// finds their wake-up still pending when it goes idle; that wake must not end its linger,
// or a busy connection starts a writer goroutine (and grows its stack) for nearly every
// batch.
func TestWriterLingersPastAStaleWake(t *testing.T) {
	defer ws.SetGoroutineLinger(time.Hour)()
	f, be, p := batchedConnection(t)
	h := f.handshake(p)

	// The first UPDATE's flush is held; the second is pushed while the writer waits in it,
	// which signals the running writer.
	be.hold()
	h.do(t, func(s seam.Session) {
		if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: upd(100, 0)}); err != nil {
			t.Fatal(err)
		}
	})
	testkit.Eventually(t, wait, "first batch flushing", func() bool { return be.flushes.Load() == 2 })
	h.do(t, func(s seam.Session) {
		if err := s.Outbox(ns1, nil).Enqueue(seam.DataItem{Bytes: upd(100, 1)}); err != nil {
			t.Fatal(err)
		}
	})
	testkit.Eventually(t, wait, "second frame handed to the writer", func() bool {
		var st seam.QueueStats
		h.do(t, func(s seam.Session) { st = s.Stats() })
		return st.QueuedBytes == 0
	})
	be.release()
	for range 2 {
		if fr := p.recv(); fr.Type() != protocol.TypeUpdate {
			t.Fatalf("got %v, want UPDATE", fr.Type())
		}
	}
	// Both written: the writer is idle, lingering for an hour. A writer that took the stale
	// wake for new work would find nothing and exit at once.
	time.Sleep(50 * time.Millisecond)
	if n := ws.WritersRunning(f.hub); n != 1 {
		t.Fatalf("%d writers running after the batch, want 1 lingering", n)
	}
}
