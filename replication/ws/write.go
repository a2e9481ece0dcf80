package ws

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// writer is the connection's single writing goroutine. The owner hands it encoded frames
// in sequence order; it writes them in that order, so sequence order is write order. It
// reports written bytes back to the owner, which keeps the unflushed-bytes accounting
// (coder/websocket has no bufferedAmount: Write returns once the frame is in the socket).
type writer struct {
	c    *conn
	wake chan struct{}

	mu       sync.Mutex // guards the fields below
	queue    []outFrame
	closing  bool
	errFrame []byte
	code     protocol.CloseCode

	abort   atomic.Bool // an aborting close: write nothing more
	writing atomic.Bool // a Write is in progress

	flushedData, flushedControl atomic.Int64 // written bytes not yet reported
	flushPending                atomic.Bool  // a report is posted to the owner
}

type outFrame struct {
	b       []byte
	control bool
}

func (w *writer) init(c *conn) {
	w.c = c
	w.wake = make(chan struct{}, 1)
}

func (c *conn) handOff(f outFrame) { c.w.push(f) }

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) push(f outFrame) {
	w.mu.Lock()
	w.queue = append(w.queue, f)
	w.mu.Unlock()
	w.signal()
}

// requestClose ends the writer: with flush, the frames handed over are written first (a
// drain that completed: its GOAWAY and close handshakes must leave); otherwise they are
// dropped, errFrame (if any) is sent, and the transport closed with code. Without errFrame
// and flush the close aborts: a write in progress is cancelled and nothing more is written
// (§18, §21: output is invalidated before the transport closes).
func (w *writer) requestClose(errFrame []byte, code protocol.CloseCode, flush bool) {
	w.mu.Lock()
	w.closing, w.errFrame, w.code = true, errFrame, code
	if !flush {
		w.queue = nil
	}
	w.mu.Unlock()
	if errFrame == nil && !flush {
		w.stopOutput()
	}
	w.signal()
}

// stopOutput makes the writer write nothing more, from any goroutine (§21: the hub's
// service close invalidates wire output synchronously, before the owner closes).
func (w *writer) stopOutput() {
	w.abort.Store(true)
	if w.writing.Load() {
		w.c.wcancel()
	}
}

// written reports n written bytes to the owner, coalescing reports.
func (w *writer) written(n int, control bool) {
	if control {
		w.flushedControl.Add(int64(n))
	} else {
		w.flushedData.Add(int64(n))
	}
	if w.flushPending.CompareAndSwap(false, true) {
		w.c.post(w.collect)
	}
}

func (w *writer) collect() {
	w.flushPending.Store(false)
	w.c.flushed(int(w.flushedData.Swap(0)), int(w.flushedControl.Swap(0)))
}

func (w *writer) write(b []byte) error {
	w.writing.Store(true)
	defer w.writing.Store(false)
	if w.abort.Load() {
		return errAborted
	}
	return w.c.t.Write(w.c.wctx, b)
}

var errAborted = errors.New("ws: write aborted by close")

func (w *writer) loop() {
	c := w.c
	defer c.post(func() { c.writerDone = true })
	var lastSeq uint32
	failed := false
	for {
		<-w.wake
		w.mu.Lock()
		batch, closing, errFrame, code := w.queue, w.closing, w.errFrame, w.code
		w.queue = nil
		w.mu.Unlock()
		for _, f := range batch {
			if !failed {
				if err := w.write(f.b); err != nil {
					failed = true
					if !errors.Is(err, errAborted) {
						c.post(func() {
							c.rejectAdmission(observer.AuthPeerDisconnected)
							c.closeNow(protocol.CloseGoingAway, seam.CloseInfo{Code: protocol.CloseAbnormal, Cause: seam.CauseTransport})
						})
					}
				} else {
					lastSeq = protocol.FrameSequence(f.b)
				}
			}
			w.written(len(f.b), f.control)
		}
		if closing {
			if errFrame != nil && !failed {
				// §14: the best-effort ERROR takes the sequence after the last frame written.
				protocol.SetFrameSequence(errFrame, lastSeq+1)
				_ = w.write(errFrame) // best effort (§14): the close follows either way
			}
			if code == 0 {
				code = protocol.CloseNormal
			}
			_ = c.t.Close(code, "") // a failed close handshake leaves nothing more to do
			return
		}
	}
}
