package ws

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// ---- the writer goroutine ----------------------------------------------------------

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

// ---- liveness (§17, §18) ----------------------------------------------------------------

// liveness runs WebSocket ping/pong on a ready connection: a ping every pingIntervalMs, and
// a pong timeout of pongTimeoutMs. Only the transport's Ping returning nil (a pong echoing
// the outstanding ping's payload) clears the timeout.
type liveness struct {
	c         *conn
	running   bool // a Ping call is out
	gen       uint64
	pingTimer *timer
	pongTimer *timer
	planned   observer.Opt[time.Time]
	cancel    context.CancelFunc
}

func (l *liveness) arm() {
	c := l.c
	// The planned time is read only for event-loop-delay-sampled (§23.1: observer and clock).
	l.planned = c.em.Now()
	if p, ok := l.planned.Get(); ok {
		l.planned = observer.Some(p.Add(c.cfg.PingInterval))
	}
	l.pingTimer = c.after(c.cfg.PingInterval, l.fire)
}

func (l *liveness) fire() {
	c := l.c
	if p, ok := l.planned.Get(); ok && c.em.Enabled() {
		if d, ok := c.em.SinceMs(observer.Some(p)).Get(); ok {
			c.em.Emit(observer.EventLoopDelaySampled{ConnectionID: c.connIDOpt(), DelayMs: d})
		}
	}
	l.arm()
	if l.running {
		return
	}
	l.gen++
	gen := l.gen
	ctx, cancel := context.WithCancel(c.ioCtx)
	l.cancel, l.running = cancel, true
	l.pongTimer = c.after(c.cfg.PongTimeout, l.timedOut)
	go func() {
		err := c.t.Ping(ctx)
		c.post(func() {
			l.running = false
			cancel()
			if err == nil && gen == l.gen && !c.closing {
				l.pongTimer.Stop()
			}
		})
	}()
}

// timedOut: §18 "pong 超时按临时失败处理：先停止旧 liveness … 并使 connection epoch 失效，
// 再关闭传输（close code 1001）".
func (l *liveness) timedOut() {
	c := l.c
	if c.closing {
		return
	}
	l.stop()
	code := protocol.CloseGoingAway
	c.teardown(code, nil, seam.CloseInfo{Code: code, Error: protocol.CodePongTimeout, Cause: seam.CausePongTimeout}, false)
	if c.em.Enabled() {
		c.em.Emit(observer.ConnectionFailed{ConnectionID: c.connIDOpt(), Code: observer.ConnErrPongTimeout, WSCloseCode: int(code)})
	}
}

func (l *liveness) stop() {
	l.gen++
	if l.cancel != nil {
		l.cancel()
	}
	l.pingTimer.Stop()
	l.pongTimer.Stop()
}

// ---- OPEN admission (GUIDE §6) ---------------------------------------------------------

// openAdmission limits the OPEN_NAMESPACE requests the namespace layer works on at once
// (maxConcurrentOpens). Further OPENs, and every later frame of their namespaces, wait in
// arrival order; more than maxEarlyFrames waiting frames is CONNECTION_POLICY_VIOLATION.
// An OPEN is answered when the handler sends OPEN_OK or a namespace ERROR for it.
type openAdmission struct {
	outstanding map[protocol.NamespaceID]int
	total       int
	held        []protocol.Frame
	heldNS      map[protocol.NamespaceID]int
}

func frameNamespace(f protocol.Frame) protocol.NamespaceID {
	if m, ok := f.Message.(protocol.NamespaceMessage); ok {
		return m.Namespace()
	}
	return protocol.NamespaceID{}
}

func (a *openAdmission) admit(c *conn, f protocol.Frame) bool {
	ns := frameNamespace(f)
	open := f.Type() == protocol.TypeOpenNamespace
	if len(a.held) > 0 && (open || a.heldNS[ns] > 0) || open && a.total >= c.cfg.MaxConcurrentOpens {
		if len(a.held) >= c.cfg.MaxEarlyFrames {
			c.fail(frameErr(protocol.CodeConnectionPolicyViolation, f, "too many frames waiting for OPEN admission"))
			return false
		}
		if a.heldNS == nil {
			a.heldNS = make(map[protocol.NamespaceID]int)
		}
		a.held = append(a.held, f)
		a.heldNS[ns]++
		return false
	}
	if open {
		a.start(ns)
	}
	return true
}

func (a *openAdmission) start(ns protocol.NamespaceID) {
	if a.outstanding == nil {
		a.outstanding = make(map[protocol.NamespaceID]int)
	}
	a.outstanding[ns]++
	a.total++
}

// answered records an OPEN_OK or namespace ERROR sent for ns.
func (a *openAdmission) answered(c *conn, ns protocol.NamespaceID) {
	if a.outstanding[ns] == 0 {
		return
	}
	if a.outstanding[ns]--; a.outstanding[ns] == 0 {
		delete(a.outstanding, ns)
	}
	a.total--
	if len(a.held) > 0 {
		c.defer_(func() { a.release(c) })
	}
}

func (a *openAdmission) release(c *conn) {
	for len(a.held) > 0 && !c.closing {
		f := a.held[0]
		open := f.Type() == protocol.TypeOpenNamespace
		if open && a.total >= c.cfg.MaxConcurrentOpens {
			return
		}
		a.held[0] = protocol.Frame{}
		a.held = a.held[1:]
		ns := frameNamespace(f)
		if a.heldNS[ns]--; a.heldNS[ns] == 0 {
			delete(a.heldNS, ns)
		}
		if c.state == stDraining && f.Type().Rule().StartsWork {
			c.drainDrop(f)
			continue
		}
		if open {
			a.start(ns)
		}
		c.handler.HandleFrame(f)
	}
}

// ---- control frames -------------------------------------------------------------------

// sendNamespaceControl is Session.Send.
func (c *conn) sendNamespaceControl(m protocol.NamespaceMessage) (uint32, error) {
	if c.closing {
		return 0, seam.ErrClosed
	}
	if m == nil {
		return 0, seam.ErrNotAllowed
	}
	r := m.Type().Rule()
	if r.Lane != protocol.LaneControl || protocol.ScopeOf(m) != protocol.ScopeNamespace || !r.Direction.SentBy(c.local) {
		return 0, seam.ErrNotAllowed
	}
	return c.sendControl(m)
}

// sendControl encodes m with the next sequence and hands it to the writer at once (§17:
// control frames go before queued data). A message that does not encode consumes no
// sequence and its error is returned (the connection goes on). Unflushed control bytes are
// bounded by maxQueuedControlBytes; exhausting it is CONNECTION_BACKPRESSURE (1011), and
// sendControl returns ErrClosed, as it does after sequence exhaustion.
func (c *conn) sendControl(m protocol.Message) (uint32, error) {
	if c.closing {
		return 0, seam.ErrClosed
	}
	b, seq, err := c.out.AppendFrame(nil, m)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeOutboundSequenceExhausted {
			c.sequenceExhausted()
			return 0, seam.ErrClosed
		}
		return 0, err
	}
	if c.sched.unflushedControl+len(b) > c.cfg.MaxQueuedControlBytes {
		c.failWith(&protocol.Error{Code: protocol.CodeConnectionBackpressure, Scope: protocol.ScopeConnection,
			Detail: "unflushed control bytes over maxQueuedControlBytes"}, seam.CauseBackpressure)
		return 0, seam.ErrClosed
	}
	c.sched.unflushedControl += len(b)
	c.handOff(outFrame{b: b, control: true})
	if nm, ok := m.(protocol.NamespaceMessage); ok {
		if ack := m.Type().Rule().AckedBy; ack != 0 {
			c.await(seq, ackKey{nm.Namespace(), ack})
		}
	}
	if ns, ok := protocol.AnswersOpen(m); ok {
		c.opens.answered(c, ns)
	}
	c.forgetOnTerminal(m, true)
	return seq, nil
}

// sequenceExhausted closes a connection whose sending direction used every uint32
// sequence (§23.2 OUTBOUND_SEQUENCE_EXHAUSTED, no wire frame).
func (c *conn) sequenceExhausted() {
	code := protocol.CloseInternal
	c.teardown(code, nil, seam.CloseInfo{Code: code, Error: protocol.CodeOutboundSequenceExhausted, Cause: seam.CauseProtocol}, false)
	if c.em.Enabled() {
		c.em.Emit(observer.ConnectionFailed{ConnectionID: c.connIDOpt(), Code: observer.ConnErrOutboundSequenceExhausted, WSCloseCode: int(code)})
	}
}

// ---- data queues, round-robin, watermarks (§17) -------------------------------------------

// scheduler is the outbound accounting of one connection, owned by the owner goroutine.
type scheduler struct {
	ring             []*nsQueue // namespaces with queued data, in round-robin order
	next             int        // ring index of the next turn
	queued           int        // bytes of every namespace queue
	unflushedData    int        // data frame bytes handed to the writer, not yet written
	unflushedControl int        // control frame bytes handed to the writer, not yet written
	paused           bool       // above the high watermark, until the low one
}

func (s *scheduler) unflushed() int { return s.unflushedData + s.unflushedControl }

// nsQueue is one namespace's unsent data.
type nsQueue struct {
	ns     protocol.NamespaceID
	gate   func() bool
	items  []*queuedItem
	bytes  int
	inRing bool
	closed bool
}

type queuedItem struct {
	seam.DataItem
	enqueued observer.Opt[time.Time]
	split    *protocol.Splitter // set when its first chunk is sent
	tid      uint32
}

func (c *conn) outbox(ns protocol.NamespaceID, gate func() bool) *outbox {
	q := c.queues[ns]
	if q == nil {
		q = &nsQueue{ns: ns, gate: gate}
		c.queues[ns] = q
	}
	return &outbox{c: c, q: q}
}

func (c *conn) handOff(f outFrame) { c.w.push(f) }

// checkItem refuses an item the connection could not frame (§10.1, §10.3, §8.1, §9.2).
func (c *conn) checkItem(ns protocol.NamespaceID, it seam.DataItem) error {
	switch {
	case !it.Kind.Known():
		return &protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeNamespace, Namespace: ns, Detail: "unknown data kind"}
	case it.Kind == protocol.KindLiveUpdate && len(it.Bytes) <= c.cfg.MaxUpdateBytes:
		return nil // one UPDATE
	case !c.negotiated.Chunked():
		// Snapshots and diffs that fit one frame travel as control frames (Session.Send):
		// what reaches an Outbox must be chunked.
		return &protocol.Error{Code: it.Kind.UnchunkedCode(), Scope: protocol.ScopeNamespace, Namespace: ns,
			Detail: it.Kind.String() + " of " + strconv.Itoa(len(it.Bytes)) + " bytes needs CAP_CHUNKED_UPDATE"}
	}
	// Validate the transfer as the splitter will cut it (transfer id 1 stands in).
	_, err := protocol.NewSplitter(c.cfg, it.Kind, ns, 1, it.Bytes, it.Binding)
	return err
}

func (c *conn) enqueue(q *nsQueue, it seam.DataItem) error {
	switch {
	case c.closing || q.closed:
		return seam.ErrClosed
	case c.state == stDraining:
		return seam.ErrDraining
	}
	if err := c.checkItem(q.ns, it); err != nil {
		return err
	}
	n := len(it.Bytes)
	// §17: "未发送队列任一上限超出：丢弃全部未发送增量，标记 needs-resync".
	if len(q.items)+1 > c.cfg.MaxQueuedUpdateCount || q.bytes+n > c.cfg.MaxQueuedUpdateBytes {
		c.clearQueue(q)
		return seam.ErrQueueOverflow
	}
	s := &c.sched
	if s.queued+s.unflushed()+n > c.cfg.MaxQueuedBytesPerConnection {
		if c.shed(q, n) {
			return seam.ErrConnectionShed
		}
	}
	qi := &queuedItem{DataItem: it}
	if c.em.Enabled() {
		qi.enqueued = c.em.Now()
	}
	q.items = append(q.items, qi)
	q.bytes += n
	s.queued += n
	if !q.inRing {
		q.inRing = true
		s.ring = append(s.ring, q)
	}
	return nil
}

func (c *conn) coalesce(q *nsQueue, merge func([][]byte) ([]byte, error), sent func(seam.SentInfo)) error {
	if c.closing || q.closed {
		return seam.ErrClosed
	}
	var idx []int
	var ups [][]byte
	total := 0
	for i, it := range q.items {
		if it.split == nil && it.Kind == protocol.KindLiveUpdate {
			idx = append(idx, i)
			ups = append(ups, it.Bytes)
			total += len(it.Bytes)
		}
	}
	if len(idx) < 2 {
		return nil
	}
	m, err := merge(ups)
	if err != nil {
		return err
	}
	item := seam.DataItem{Kind: protocol.KindLiveUpdate, Bytes: m, Sent: sent}
	if err := c.checkItem(q.ns, item); err != nil {
		return err
	}
	merged := &queuedItem{DataItem: item, enqueued: q.items[idx[0]].enqueued}
	out := q.items[:0:0]
	for i, it := range q.items {
		switch {
		case i == idx[0]:
			out = append(out, merged)
		case it.split == nil && it.Kind == protocol.KindLiveUpdate:
		default:
			out = append(out, it)
		}
	}
	q.items = out
	q.bytes += len(m) - total
	c.sched.queued += len(m) - total
	return nil
}

// shed makes room for n bytes of q (§17): whole queues of the largest namespaces are
// dropped until the queued side is at most the low watermark; if the item still does not
// fit, or q itself was shed, it is refused and q's surviving queue dropped too. Each shed
// namespace other than q is told through HandleShed; shed reports whether q was.
func (c *conn) shed(q *nsQueue, n int) bool {
	s := &c.sched
	qShed := false
	for s.queued > c.cfg.LowWaterBytes {
		var big *nsQueue
		for _, r := range s.ring {
			if big == nil || r.bytes > big.bytes || r.bytes == big.bytes && r.ns.String() < big.ns.String() {
				big = r
			}
		}
		if big == nil || big.bytes == 0 {
			break
		}
		info := c.clearQueue(big)
		if big == q {
			qShed = true
			continue
		}
		ns := big.ns
		c.defer_(func() {
			if !c.closing {
				c.handler.HandleShed(ns, info)
			}
		})
	}
	if qShed || s.queued+s.unflushed()+n > c.cfg.MaxQueuedBytesPerConnection {
		c.clearQueue(q)
		return true
	}
	return false
}

// clearQueue drops q's unsent items.
func (c *conn) clearQueue(q *nsQueue) seam.ShedInfo {
	info := seam.ShedInfo{Items: len(q.items), Bytes: q.bytes}
	if len(q.items) > 0 && q.items[0].split != nil {
		info.TransferAborted = true
	}
	c.sched.queued -= q.bytes
	q.items, q.bytes = nil, 0
	c.removeFromRing(q)
	return info
}

func (c *conn) removeFromRing(q *nsQueue) {
	if !q.inRing {
		return
	}
	s := &c.sched
	i := slices.Index(s.ring, q)
	s.ring = slices.Delete(s.ring, i, i+1)
	if i < s.next {
		s.next--
	}
	q.inRing = false
}

// pump hands data frames to the writer: round-robin over the namespaces with queued data,
// one frame per namespace per turn, skipping a namespace whose gate is closed, while the
// connection is ready and below the high watermark (§17). It stops after a whole round
// without a frame. It reports whether it sent anything.
func (c *conn) pump() bool {
	s := &c.sched
	if c.closing || c.state != stReady || s.paused {
		return false
	}
	sent, idle := false, 0
	for len(s.ring) > 0 && idle < len(s.ring) && !s.paused && !c.closing {
		if s.next >= len(s.ring) {
			s.next = 0
		}
		q := s.ring[s.next]
		s.next++
		if c.sendOne(q) {
			sent, idle = true, 0
		} else {
			idle++
		}
	}
	return sent
}

// sendOne sends the next frame of q's head item, if its gate allows.
func (c *conn) sendOne(q *nsQueue) bool {
	if len(q.items) == 0 {
		c.removeFromRing(q)
		return false
	}
	it := q.items[0]
	if it.split == nil && q.gate != nil && !q.gate() {
		return false
	}
	var m protocol.Message
	last, chunked := true, false
	if it.Kind == protocol.KindLiveUpdate && len(it.Bytes) <= c.cfg.MaxUpdateBytes {
		m = &protocol.Update{NamespaceID: q.ns, Update: it.Bytes}
	} else {
		chunked = true
		if it.split == nil {
			tid, err := c.tids.Next(q.ns)
			if err == nil {
				it.tid = tid
				it.split, err = protocol.NewSplitter(c.cfg, it.Kind, q.ns, tid, it.Bytes, it.Binding)
			}
			if err != nil { // checked at Enqueue; only exhaustion gets here
				c.sequenceExhausted()
				return false
			}
		}
		chunk, ok := it.split.Next()
		if !ok {
			// An item leaves the queue with its last chunk, so this is a broken invariant.
			c.fail(&protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeConnection, Detail: "a chunked item without chunks left"})
			return false
		}
		m = chunk
		last = it.split.Remaining() == 0
	}
	b, seq, err := c.out.AppendFrame(nil, m)
	if err != nil {
		c.sequenceExhausted()
		return false
	}
	s := &c.sched
	s.unflushedData += len(b)
	c.handOff(outFrame{b: b})
	if s.unflushed() >= c.cfg.HighWaterBytes {
		s.paused = true
		if c.em.Enabled() {
			c.em.Emit(observer.SendPaused{ConnectionID: c.connIDOpt(), BufferedAmount: s.unflushed()})
		}
	}
	if !last {
		return true
	}
	q.items[0] = nil
	q.items = q.items[1:]
	q.bytes -= len(it.Bytes)
	s.queued -= len(it.Bytes)
	if len(q.items) == 0 {
		c.removeFromRing(q)
	}
	info := seam.SentInfo{Sequence: seq, ChunkCount: 1}
	if chunked {
		info.Chunked, info.TransferID, info.ChunkCount = true, it.tid, it.split.ChunkCount()
	}
	c.await(seq, ackKey{q.ns, it.Kind.AckedBy()})
	c.emitSent(q.ns, it, info)
	if it.Sent != nil {
		c.defer_(func() { it.Sent(info) })
	}
	return true
}

// emitSent reports a data item's egress (§23.1): update-sent for an UPDATE frame (the
// connection stamps its sequence), chunked-*-sent when a transfer's last chunk leaves.
func (c *conn) emitSent(ns protocol.NamespaceID, it *queuedItem, info seam.SentInfo) {
	if !c.em.Enabled() {
		return
	}
	id := c.connIDOpt()
	if !info.Chunked {
		c.em.Emit(observer.UpdateSent{ConnectionID: id, NamespaceID: ns.String(), Bytes: len(it.Bytes),
			Sequence: info.Sequence, SendQueueMs: c.em.SinceMs(it.enqueued)})
		return
	}
	total := uint32(len(it.Bytes))
	switch it.Kind {
	case protocol.KindSnapshot:
		c.em.Emit(observer.ChunkedSnapshotSent{ConnectionID: id, NamespaceID: ns.String(), TransferID: info.TransferID, ChunkCount: info.ChunkCount, TotalBytes: total})
	case protocol.KindSyncDiff:
		c.em.Emit(observer.ChunkedSyncSent{ConnectionID: id, NamespaceID: ns.String(), TransferID: info.TransferID, ChunkCount: info.ChunkCount, TotalBytes: total, SyncRoundID: it.Binding.SyncRoundID})
	default:
		c.em.Emit(observer.ChunkedUpdateSent{ConnectionID: id, NamespaceID: ns.String(), TransferID: info.TransferID, ChunkCount: info.ChunkCount, TotalBytes: total})
	}
}

// flushed records bytes the writer wrote and resumes the pump below the low watermark.
func (c *conn) flushed(data, control int) {
	s := &c.sched
	s.unflushedData -= data
	s.unflushedControl -= control
	if s.paused && s.unflushed() <= c.cfg.LowWaterBytes {
		s.paused = false
		if c.em.Enabled() && !c.closing {
			c.em.Emit(observer.SendResumed{ConnectionID: c.connIDOpt(), BufferedAmount: s.unflushed()})
		}
	}
}

// Load is the outbound load of a hub's or a peer's connections, readable from any goroutine
// (the Prometheus gauges of §23.6): bytes queued or handed to the writer and not yet written,
// and live UPDATEs sent and not yet acknowledged (nor given up at an ACK timeout). Each
// connection publishes it after every event of its owner goroutine.
type Load struct {
	QueuedBytes int64
	InFlight    int64
}

func (l *Load) add(c *conn) {
	l.QueuedBytes += c.pubQueued.Load()
	l.InFlight += c.pubInFlight.Load()
}
