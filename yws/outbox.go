package yws

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/clock"
)

// outbox is the send side of one editor socket — a y-websocket connection or a Hocuspocus
// socket: the messages waiting for the socket's writer goroutine, and the close the socket
// is to end with. Any goroutine puts messages and never blocks. The queue is bounded
// (Options.SendQueueMessages and SendQueueBytes bound what waits behind the first message
// waiting, which is taken whole whatever its size, so that a document larger than the
// bound still goes out); its overflow policy is "drop the socket": put reports the
// overflow, the caller closes the socket at once (a close frame would wait behind the full
// buffers), and the client reconnects and resyncs.
type outbox struct {
	mu          sync.Mutex // guards queue, queued and the close fields
	queue       []outMsg
	queued      int // bytes of the messages waiting behind the first one
	closing     bool
	closeCode   websocket.StatusCode
	closeReason string        // sent to the client
	closeCause  string        // the log's and metrics' short name
	wake        chan struct{} // cap 1: queue or closing changed
	written     atomic.Int64  // messages written to the socket
}

// outMsg is one WebSocket message waiting to be sent: head then body, or body alone (head
// nil). The body may be shared with other sockets and the registry — a document's encoded
// state, the same bytes for every editor that joins at that state — and is never modified;
// writing head and body as two parts of one message spares a copy per editor.
type outMsg struct{ head, body []byte }

func newOutbox() *outbox { return &outbox{wake: make(chan struct{}, 1)} }

// put queues a message of head and body; a closing socket takes nothing. It returns false
// when the queue was at its bounds: the queue is emptied, and the caller closes the socket
// as too slow.
func (b *outbox) put(o *Options, head, body []byte) bool {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return true
	}
	if len(b.queue) >= o.SendQueueMessages || b.queued >= o.SendQueueBytes {
		b.queue, b.queued = nil, 0
		b.mu.Unlock()
		return false
	}
	if len(b.queue) > 0 {
		b.queued += len(head) + len(body)
	}
	b.queue = append(b.queue, outMsg{head, body})
	b.mu.Unlock()
	signal(b.wake)
	return true
}

// close marks the socket closing with a status, a reason for the client and a cause for
// the logs, dropping what waits; the first call wins.
func (b *outbox) close(code websocket.StatusCode, reason, cause string) {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return
	}
	b.closing, b.closeCode, b.closeReason, b.closeCause = true, code, reason, cause
	b.queue, b.queued = nil, 0
	b.mu.Unlock()
	signal(b.wake)
}

// closedWith returns the close status and cause (zero before close).
func (b *outbox) closedWith() (websocket.StatusCode, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeCode, b.closeCause
}

// writeLoop is the socket's writer: it writes the queued messages, one WebSocket message
// each, every write (every frame of a large message) bounded by WriteTimeout, counting
// their bytes in m; when nothing went out for KeepAlive it writes keepAlive's message (none
// when it returns nil). Once the socket is closing it sends the close frame — or drops the
// socket when the client is gone or too slow to read even that (its socket buffers are
// full: a close frame would wait for them) — and returns; a failed write closes it too.
func (b *outbox) writeLoop(ws *websocket.Conn, o *Options, m *Metrics, keepAlive func() []byte) {
	tick := clock.NewTicker(o.Clock, o.KeepAlive)
	defer tick.Stop()
	wrote := false
	for {
		b.mu.Lock()
		batch, closing := b.queue, b.closing
		b.queue, b.queued = nil, 0
		code, reason, cause := b.closeCode, b.closeReason, b.closeCause
		b.mu.Unlock()
		if closing {
			switch {
			case code == websocket.StatusAbnormalClosure, code == websocket.StatusMessageTooBig, cause == "slow-client":
				ws.CloseNow()
			default:
				ws.Close(code, reason)
			}
			return
		}
		if len(batch) == 0 {
			select {
			case <-b.wake:
			case <-tick.C:
				if !wrote {
					if ka := keepAlive(); ka != nil {
						batch = []outMsg{{body: ka}}
					}
				}
				wrote = false
			}
			if len(batch) == 0 {
				continue
			}
		}
		for _, msg := range batch {
			if err := writeMessage(ws, o.WriteTimeout, msg); err != nil {
				b.close(websocket.StatusAbnormalClosure, "", "write-failed")
				ws.CloseNow()
				return
			}
			b.written.Add(1)
			m.sent(len(msg.head) + len(msg.body))
		}
		wrote = true
	}
}

// writeFrameBytes is the largest frame the node writes to an editor: a larger message goes
// out as the frames of one fragmented message, each written within WriteTimeout. An editor
// busy applying what it received (a browser tab, a crowd of editors on one machine) then
// receives a document of any size as long as it keeps reading, while one that stops
// reading is dropped after WriteTimeout as before.
const writeFrameBytes = 1 << 20

// writeMessage writes one message to an editor's socket: a small body alone as one frame;
// otherwise head and body, in frames of at most writeFrameBytes, as one fragmented message
// — a shared body goes to the socket without being copied.
func writeMessage(ws *websocket.Conn, timeout time.Duration, m outMsg) error {
	if m.head == nil && len(m.body) <= writeFrameBytes {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return ws.Write(ctx, websocket.MessageBinary, m.body)
	}
	// One deadline per frame: the timer is reset after each frame written; when it fires,
	// the cancelled context closes the socket and the write in progress fails.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadline := time.AfterFunc(timeout, cancel)
	defer deadline.Stop()
	w, err := ws.Writer(ctx, websocket.MessageBinary)
	if err != nil {
		return err
	}
	for _, part := range [2][]byte{m.head, m.body} {
		for len(part) > 0 {
			n := min(len(part), writeFrameBytes)
			if _, err := w.Write(part[:n]); err != nil {
				return err
			}
			part = part[n:]
			deadline.Reset(timeout)
		}
	}
	return w.Close()
}
