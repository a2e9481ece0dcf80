package ws

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// writer is the connection's single writing goroutine (loop). The owner hands it encoded
// frames in sequence order; it writes them in that order, so sequence order is write order.
// It reports written bytes back to the owner, which keeps the unflushed-bytes accounting
// (coder/websocket has no bufferedAmount: Write returns once the frame is in the socket).
//
// The goroutine runs only while there is something to write: push starts it when none is
// running, and it exits once its queue is empty, so an idle connection holds no writer
// stack. The close request starts it too, and it exits for good after closing the
// transport.
//
// The owner and the writer goroutine share it: push and requestClose run on the owner,
// stopOutput on any goroutine, loop and write on the writer; mu and the atomics are their
// only meeting points.
type writer struct {
	c *conn

	mu       sync.Mutex    // guards running, queue, spare, closing, errFrame and code
	running  bool          // a writer goroutine is running (it clears this when it exits idle)
	wake     chan struct{} // capacity 1: something was pushed for the running writer
	lingerT  *time.Timer   // the idle writer's wait before it exits (writer goroutine)
	queue    []outFrame
	spare    []outFrame // the last batch's slice, given back by the writer for reuse
	closing  bool
	errFrame []byte
	code     protocol.CloseCode

	unreleased int // the owner's: bytes pushed since the last release

	// The writer goroutine's own, carried from one run to the next (mu orders the runs).
	lastSeq uint32 // sequence of the last frame written
	failed  bool   // a write failed: nothing more is written

	abort   atomic.Bool // an aborting close: write nothing more
	writing atomic.Bool // a Write is in progress

	flushedData, flushedControl atomic.Int64 // written bytes the owner has not collected yet
	flushPending                atomic.Bool  // a collect is posted to the owner
	// reportWanted: the owner waits for written bytes (its pump is paused above the high
	// watermark), so the writer posts a collect; otherwise the owner collects them itself
	// when it next needs the figures, and the writer wakes nobody.
	reportWanted atomic.Bool
	collectFn    func() // w.collect, made once: posting it allocates nothing
	loopFn       func() // w.loop, made once: starting it allocates nothing
}

// outFrame is one encoded frame handed to the writer; control frames and data frames are
// accounted apart.
type outFrame struct {
	b       []byte
	control bool
}

func (w *writer) init(c *conn) {
	w.c = c
	w.wake = make(chan struct{}, 1)
	w.collectFn = w.collect
	w.loopFn = w.loop
}

// handOff gives an encoded frame, stamped with its sequence, to the writer.
func (c *conn) handOff(f outFrame) { c.w.push(f) }

// startLocked reports whether the caller must start the writer goroutine; w.mu is held.
func (w *writer) startLocked() bool {
	if w.running {
		return false
	}
	w.running = true
	return true
}

// push queues a frame. The writer takes it when the owner has finished the event it is
// handling (release): every frame of one event leaves in one batch, after everything the
// event reported — or, for an event that produces more than flushBatchBytes, every
// flushBatchBytes, so that writing overlaps with framing the rest.
func (w *writer) push(f outFrame) {
	w.mu.Lock()
	w.queue = append(w.queue, f)
	w.mu.Unlock()
	if w.unreleased += len(f.b); w.unreleased >= flushBatchBytes {
		w.release()
	}
}

// release, on the owner at the end of each event, hands the frames pushed during it to the
// writer, starting one if none runs.
func (w *writer) release() {
	w.unreleased = 0
	w.mu.Lock()
	if len(w.queue) == 0 {
		w.mu.Unlock()
		return
	}
	start := w.startLocked()
	w.mu.Unlock()
	if start {
		go w.loopFn()
	} else {
		w.signal()
	}
}

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// linger waits up to goroutineLinger (conn.linger) for a push to the running writer; false
// when none came.
func (w *writer) linger() bool {
	if w.lingerT == nil {
		w.lingerT = time.NewTimer(w.c.linger)
	} else {
		w.lingerT.Reset(w.c.linger)
	}
	select {
	case <-w.wake:
		return true
	case <-w.lingerT.C:
		return false
	}
}

// requestClose ends the writer: with flush, the frames handed over are written first (a
// drain that completed: its GOAWAY and close handshakes must leave); otherwise they are
// dropped, errFrame (if any) is sent, and the transport closed with code. Without errFrame
// and flush the close aborts: a write in progress is cancelled and nothing more is written,
// so no output follows the decision to close.
func (w *writer) requestClose(errFrame []byte, code protocol.CloseCode, flush bool) {
	w.mu.Lock()
	w.closing, w.errFrame, w.code = true, errFrame, code
	if !flush {
		w.queue = nil
	}
	start := w.startLocked()
	w.mu.Unlock()
	if errFrame == nil && !flush {
		w.stopOutput()
	}
	if start {
		go w.loopFn()
	} else {
		w.signal()
	}
}

// stopOutput makes the writer write nothing more. It may be called from any goroutine: the
// hub's shutdown stops every connection's output at once, before their owners close them
// (docs/protocol.md#restart-and-shutdown).
func (w *writer) stopOutput() {
	w.abort.Store(true)
	if w.writing.Load() {
		w.c.wcancel()
	}
}

// written reports written bytes to the owner: they wait in the atomics until the owner
// collects them, and the owner is woken for them only when it waits for them
// (reportWanted).
func (w *writer) written(data, control int) {
	if data == 0 && control == 0 {
		return
	}
	w.flushedData.Add(int64(data))
	w.flushedControl.Add(int64(control))
	if w.reportWanted.Load() && w.flushPending.CompareAndSwap(false, true) {
		w.c.post(w.collectFn)
	}
}

// wantReports makes the writer wake the owner when bytes are written (or stop doing so).
// After turning it on the owner collects once more: bytes written before the writer could
// see the flag are collected then, and the writer posts for every later write.
func (w *writer) wantReports(on bool) {
	w.reportWanted.Store(on)
	if on {
		w.collect()
	}
}

// collect, on the owner goroutine, takes the written bytes reported so far into the
// accounting (flushed). The owner calls it before every use of the unflushed figures.
func (w *writer) collect() {
	w.flushPending.Store(false)
	w.c.flushed(int(w.flushedData.Swap(0)), int(w.flushedControl.Swap(0)))
}

// write writes one frame, unless the output was stopped.
func (w *writer) write(b []byte) error {
	w.writing.Store(true)
	defer w.writing.Store(false)
	if w.abort.Load() {
		return errAborted
	}
	return w.c.t.Write(w.c.wctx, b)
}

// flush ends a batch: what the transport holds is written out.
func (w *writer) flush(bt batchTransport) error {
	w.writing.Store(true)
	defer w.writing.Store(false)
	if w.abort.Load() {
		return errAborted
	}
	return bt.Flush(w.c.wctx)
}

var errAborted = errors.New("ws: write aborted by close")

// flushBatchBytes is how many bytes a batch holds at most before the writer flushes it and
// starts another: the bytes of a batch count as unflushed until its flush returns, so this
// bounds how long the accounting lags the socket.
const flushBatchBytes = 64 << 10

// loop is the writer goroutine: it writes what the owner pushed until its queue is empty,
// and at the close the best-effort ERROR, then closes the transport. After a failed write
// it writes nothing more, and tells the owner the transport is lost.
//
// Writes are batched when the transport can (batchTransport): every frame handed over by
// the time the writer takes its queue is written into the transport's batch, which is
// flushed once — one write(2) for all of them — at the end, or every flushBatchBytes. Bytes
// are reported written only once their batch is flushed, so the unflushed-bytes accounting
// and the watermarks count exactly what has not reached the socket.
func (w *writer) loop() {
	c := w.c
	bt, _ := c.t.(batchTransport)
	// Liveness counts the bytes that move (conn.movedBytes): a transport that counts its
	// socket's bytes does; for one that does not, a frame counts when it is handed over —
	// before the remote can see it, so never after a ping that follows it.
	_, countsSocket := c.t.(interface{ socketBytes() int64 })
	fail := func(err error) {
		w.failed = true
		if !errors.Is(err, errAborted) {
			c.post(func() {
				c.rejectAdmission(observer.AuthPeerDisconnected)
				c.closeNow(protocol.CloseGoingAway, seam.CloseInfo{Code: protocol.CloseAbnormal, Cause: seam.CauseTransport})
			})
		}
	}
	var batchData, batchControl int // written into the open batch, not yet flushed
	batching := false
	endBatch := func() {
		if batching {
			batching = false
			if err := w.flush(bt); err != nil && !w.failed {
				fail(err)
			}
		}
		w.written(batchData, batchControl)
		batchData, batchControl = 0, 0
	}
	// idle: the writer lingered for goroutineLinger and nothing came. A wake with nothing
	// to take (a signal for frames an earlier pass already wrote) is not the end of the
	// linger: it waits again.
	idle := false
	for {
		w.mu.Lock()
		batch, closing, errFrame, code := w.queue, w.closing, w.errFrame, w.code
		if len(batch) == 0 && !closing {
			if !idle {
				w.mu.Unlock()
				idle = !w.linger()
				continue
			}
			w.running = false // idle: the next push starts a writer again
			w.lingerT = nil   // an idle connection holds no timer
			w.mu.Unlock()
			return
		}
		idle = false
		w.queue, w.spare = w.spare, nil
		w.mu.Unlock()
		for _, f := range batch {
			if !w.failed {
				if bt != nil && !batching {
					bt.BeginBatch()
					batching = true
				}
				if !countsSocket {
					c.progress.Add(int64(len(f.b)))
				}
				if err := w.write(f.b); err != nil {
					fail(err)
				} else {
					w.lastSeq = protocol.FrameSequence(f.b)
					if tap := c.tap; tap != nil {
						tap(c.tapConnectionID(), true, f.b)
					}
				}
			}
			if f.control {
				batchControl += len(f.b)
			} else {
				batchData += len(f.b)
			}
			// Without batching each frame is in the socket when Write returns.
			if bt == nil || batchData+batchControl >= flushBatchBytes {
				endBatch()
			}
		}
		endBatch()
		clear(batch)
		w.mu.Lock()
		if w.spare == nil {
			w.spare = batch[:0]
		}
		w.mu.Unlock()
		if closing {
			if errFrame != nil && !w.failed {
				// The ERROR takes the sequence after the last frame written.
				protocol.SetFrameSequence(errFrame, w.lastSeq+1)
				if w.write(errFrame) == nil { // best effort: the close follows either way
					if tap := c.tap; tap != nil {
						tap(c.tapConnectionID(), true, errFrame)
					}
				}
			}
			if code == 0 {
				code = protocol.CloseNormal
			}
			_ = c.t.Close(code, "") // a failed close handshake leaves nothing more to do
			c.post(func() { c.writerDone = true })
			return
		}
	}
}
