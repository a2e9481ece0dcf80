package ws

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/yjs"
)

// This file is the data lane (docs/protocol.md#per-connection): one unsent queue per
// namespace (seam.Outbox), sent round-robin across namespaces, one frame per namespace per
// turn, within each namespace's window and below the connection's high watermark, with the
// bounds and shedding that keep a slow remote from holding unbounded memory. Everything here
// runs on the owner goroutine.
//
// A namespace's queue holds two kinds of items: live updates, bounded by
// maxQueuedUpdateBytes/Count and shed under connection backpressure, and transfers of a
// snapshot or a sync diff too large for one frame ("bulk" items), which go ahead of the
// updates that have not started, are bounded by their kind's chunked cap instead, and are
// dropped only by Outbox.Close: each is the one snapshot of a bootstrap or the one diff of a
// round, and dropping it would leave the namespace stuck rather than resynced. At most
// maxConcurrentAssembliesPerConnection chunked transfers are in progress on the connection
// at once, the most the receiver assembles.

// frameOverhead is room for a data frame's envelope and fields around its payload (an
// UPDATE_CHUNK's are the largest).
const frameOverhead = 96

// scheduler is the outbound accounting of one connection.
type scheduler struct {
	ring             []*nsQueue // namespaces with queued data and a turn, in round-robin order
	next             int        // ring index of the next turn
	parked           []*nsQueue // namespaces with queued data whose gate refused: no turn until woken
	queued           int        // bytes of every namespace's live updates: the shed ledger
	queuedBulk       int        // bytes of every namespace's snapshots and sync diffs
	transfers        int        // chunked transfers whose first chunk left and last has not
	unflushedData    int        // data frame bytes handed to the writer, not yet written
	unflushedControl int        // control frame bytes handed to the writer, not yet written
	paused           bool       // above the high watermark, until the low one
	merging          mergeLists // coalesce's lists, reused
}

// mergeLists are the lists coalesce hands to its merge: the queued updates and their
// DataItem.Shared.
type mergeLists struct {
	updates [][]byte
	shared  []*yjs.Shared
}

// unflushed is every byte handed to the writer and not yet written.
func (s *scheduler) unflushed() int { return s.unflushedData + s.unflushedControl }

// nsQueue is one namespace's unsent data, and its seam.Outbox.
type nsQueue struct {
	c         *conn
	ns        protocol.NamespaceID
	gate      func() bool
	items     []queuedItem  // live updates, in order (by value: one allocation less per update)
	bytes     int           // their bytes
	bulk      []*queuedItem // snapshots and sync diffs, in order
	bulkBytes int
	inRing    bool // in scheduler.ring
	// parked: the gate refused the queue's next item, so the queue is out of the ring (in
	// scheduler.parked, at parkedAt) until something the gate reads may have changed — an
	// Enqueue, a Coalesce, or the namespace layer's Wake. Without it, a connection carrying
	// many namespaces whose windows are closed would ask every gate again after every event.
	parked   bool
	parkedAt int
	closed   bool
	name     string // ns.String() once an event has needed it (eventName)
}

// eventName is the namespace id as the observer's events carry it, formatted once.
func (q *nsQueue) eventName() string {
	if q.name == "" {
		q.name = q.ns.String()
	}
	return q.name
}

// empty reports whether q holds nothing to send.
func (q *nsQueue) empty() bool { return len(q.items) == 0 && len(q.bulk) == 0 }

// bulkKind reports whether items of kind k are bulk items: snapshots and sync diffs.
func bulkKind(k protocol.ChunkKind) bool { return k != protocol.KindLiveUpdate }

// queuedItem is a data item in its queue, with what sending it needs.
type queuedItem struct {
	seam.DataItem
	enqueued observer.Opt[time.Time]
	split    *protocol.Splitter // set when its first chunk is sent
	tid      uint32
}

// outbox returns ns's queue, creating it with gate (seam.Session.Outbox).
func (c *conn) outbox(ns protocol.NamespaceID, gate func() bool) *nsQueue {
	q := c.queues[ns]
	if q == nil {
		q = &nsQueue{c: c, ns: ns, gate: gate}
		c.queues[ns] = q
	}
	return q
}

// checkItem refuses an item the connection could not frame: one over its kind's
// single-frame cap without CAP_CHUNKED_UPDATE, or over the kind's chunked caps
// (docs/protocol.md#sender-rules).
func (c *conn) checkItem(ns protocol.NamespaceID, it seam.DataItem) error {
	switch {
	case !it.Kind.Known():
		return &protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeNamespace, Namespace: ns, Detail: "unknown data kind"}
	case it.Kind == protocol.KindLiveUpdate && len(it.Bytes) <= c.cfg.MaxUpdateBytes:
		return nil // one UPDATE
	case !c.negotiated.Chunked():
		// Snapshots and diffs that fit one frame travel as control frames (Send):
		// what reaches an Outbox must be chunked.
		return &protocol.Error{Code: it.Kind.UnchunkedCode(), Scope: protocol.ScopeNamespace, Namespace: ns,
			Detail: it.Kind.String() + " of " + strconv.Itoa(len(it.Bytes)) + " bytes needs CAP_CHUNKED_UPDATE"}
	}
	// Validate the transfer as the splitter will cut it (transfer id 1 stands in).
	_, err := protocol.NewSplitter(c.cfg, it.Kind, ns, 1, it.Bytes, it.Binding)
	return err
}

// enqueue is seam.Outbox.Enqueue: it queues an item the connection can frame, within the
// namespace's limits and the connection's.
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
	s := &c.sched
	if bulkKind(it.Kind) {
		q.bulk = append(q.bulk, &queuedItem{DataItem: it})
		q.bulkBytes += n
		s.queuedBulk += n
		c.addToRing(q)
		c.unpark(q)
		return nil
	}
	// Over either limit of the namespace's queue, every unsent item is dropped: the
	// namespace needs a resync.
	if len(q.items)+1 > c.cfg.MaxQueuedUpdateCount || q.bytes+n > c.cfg.MaxQueuedUpdateBytes {
		c.clearQueue(q)
		return seam.ErrQueueOverflow
	}
	c.w.collect()
	if s.queued+s.unflushed()+n > c.cfg.MaxQueuedBytesPerConnection {
		if c.shed(q, n) {
			return seam.ErrConnectionShed
		}
	}
	qi := queuedItem{DataItem: it, enqueued: c.enqueueTime()}
	q.items = append(q.items, qi)
	q.bytes += n
	s.queued += n
	c.addToRing(q)
	c.unpark(q) // the gate may read the queue (its length, its bytes)
	return nil
}

// enqueueTime is the time an item queued now is stamped with, for the observer's send-queue
// wait: one clock read per event (conn.eventNow).
func (c *conn) enqueueTime() observer.Opt[time.Time] {
	if !c.em.Enabled() {
		return observer.None[time.Time]()
	}
	if !c.eventNow.Present() {
		c.eventNow = c.em.Now()
	}
	return c.eventNow
}

// unpark gives a parked q its turns again (Outbox.Wake).
func (c *conn) unpark(q *nsQueue) {
	if q.parked {
		c.dropParked(q)
		c.addToRing(q)
	}
}

// park takes q out of the round-robin until it is woken (unpark): its gate refused.
func (c *conn) park(q *nsQueue) {
	c.removeFromRing(q)
	s := &c.sched
	q.parked, q.parkedAt = true, len(s.parked)
	s.parked = append(s.parked, q)
}

// parkAudit: see AuditParkedGates.
var parkAudit atomic.Bool

// AuditParkedGates is for tests of the layers above: while on, after every owner event that
// ends with data still queued, each connection asks the gate of every parked namespace again
// and panics if one would admit its next item — a gate that opened without Outbox.Wake,
// whose namespace would otherwise wait for an unrelated event. The gate that admits is
// called for real (its side effects happen), so only a failing test may see it do so.
func AuditParkedGates(on bool) { parkAudit.Store(on) }

// auditParked is AuditParkedGates's check.
func (c *conn) auditParked() {
	if c.closing || c.state != stReady {
		return
	}
	for _, q := range c.sched.parked {
		it, _ := q.next()
		gate := q.gate
		if it.Gate != nil {
			gate = it.Gate
		}
		if it.split == nil && gate != nil && gate() {
			panic(fmt.Sprintf("replication/ws: namespace %s: its gate opened but nothing woke its queue (Outbox.Wake)", q.ns))
		}
	}
}

// dropParked takes a parked q out of scheduler.parked.
func (c *conn) dropParked(q *nsQueue) {
	s := &c.sched
	last := len(s.parked) - 1
	moved := s.parked[last]
	s.parked[q.parkedAt], moved.parkedAt = moved, q.parkedAt
	s.parked[last] = nil
	s.parked = s.parked[:last]
	q.parked = false
}

// addToRing puts q in the round-robin, if it is neither there nor parked.
func (c *conn) addToRing(q *nsQueue) {
	if !q.inRing && !q.parked {
		q.inRing = true
		c.sched.ring = append(c.sched.ring, q)
	}
}

// maxMergeScratch bounds the merge lists a connection keeps for its next coalesce.
const maxMergeScratch = 256

// coalesce is seam.Outbox.Coalesce.
func (c *conn) coalesce(q *nsQueue, merge func([][]byte, []*yjs.Shared) ([]byte, error), sent func(seam.SentInfo)) error {
	if c.closing || q.closed {
		return seam.ErrClosed
	}
	// Every item but a transfer in progress (only the first can be one) is merged.
	first := 0
	if len(q.items) > 0 && q.items[0].split != nil {
		first = 1
	}
	if len(q.items)-first < 2 {
		return nil
	}
	ups, shared := c.sched.merging.updates[:0], c.sched.merging.shared[:0]
	total := 0
	for _, it := range q.items[first:] {
		ups = append(ups, it.Bytes)
		shared = append(shared, it.Shared)
		total += len(it.Bytes)
	}
	m, err := merge(ups, shared)
	clear(ups) // the scratch lists keep no update alive
	clear(shared)
	if cap(ups) <= maxMergeScratch && cap(shared) <= maxMergeScratch {
		c.sched.merging = mergeLists{ups[:0], shared[:0]}
	}
	if err != nil {
		return err
	}
	item := seam.DataItem{Kind: protocol.KindLiveUpdate, Bytes: m, Sent: sent}
	if err := c.checkItem(q.ns, item); err != nil {
		return err
	}
	merged := queuedItem{DataItem: item, enqueued: q.items[first].enqueued}
	clear(q.items[first+1:])
	q.items[first] = merged
	q.items = q.items[:first+1]
	q.bytes += len(m) - total
	c.sched.queued += len(m) - total
	c.unpark(q)
	return nil
}

// shed makes room for n bytes of q: whole queues of the largest namespaces (ties by
// namespace id) are dropped until the queued bytes are at most the low watermark; if the
// item still does not fit, or q itself was shed, it is refused and q's surviving queue
// dropped too. Each shed namespace other than q is told through HandleShed; shed reports
// whether q was.
func (c *conn) shed(q *nsQueue, n int) bool {
	s := &c.sched
	qShed := false
	for s.queued > c.cfg.LowWaterBytes {
		var big *nsQueue
		for _, list := range [...][]*nsQueue{s.ring, s.parked} {
			for _, r := range list {
				if big == nil || r.bytes > big.bytes || r.bytes == big.bytes && r.ns.String() < big.ns.String() {
					big = r
				}
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

// clearQueue drops q's unsent live updates (a shed, an overflow, a declared resync); its
// snapshots and sync diffs stay.
func (c *conn) clearQueue(q *nsQueue) seam.ShedInfo {
	info := seam.ShedInfo{Items: len(q.items), Bytes: q.bytes}
	if len(q.items) > 0 && q.items[0].split != nil {
		info.TransferAborted = true
		c.sched.transfers--
	}
	c.sched.queued -= q.bytes
	q.items, q.bytes = nil, 0
	if q.empty() {
		c.removeFromRing(q)
	}
	return info
}

// closeQueue drops everything q holds, its snapshots and sync diffs too (Outbox.Close).
func (c *conn) closeQueue(q *nsQueue) {
	c.clearQueue(q)
	if len(q.bulk) > 0 && q.bulk[0].split != nil {
		c.sched.transfers--
	}
	c.sched.queuedBulk -= q.bulkBytes
	q.bulk, q.bulkBytes = nil, 0
	c.removeFromRing(q)
}

// removeFromRing takes q out of the round-robin (or out of the parked queues), keeping the
// turn where it was.
func (c *conn) removeFromRing(q *nsQueue) {
	if q.parked {
		c.dropParked(q)
		return
	}
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
// one frame per namespace per turn, skipping a namespace whose gate is closed (parked, until
// it may have opened), while the connection is ready and below the high watermark. It stops
// after a whole round without a frame, and reports whether it sent anything.
func (c *conn) pump() bool {
	s := &c.sched
	if c.closing || c.state != stReady {
		return false
	}
	c.w.collect()
	if s.paused {
		return false
	}
	sent, idle := false, 0
	for len(s.ring) > 0 && idle < len(s.ring) && !s.paused && !c.closing {
		if s.next >= len(s.ring) {
			s.next = 0
		}
		q := s.ring[s.next]
		s.next++
		switch {
		case c.sendOne(q):
			sent, idle = true, 0
		case q.inRing: // a queue that left the ring (parked, emptied) was no idle turn
			idle++
		}
	}
	return sent
}

// next returns q's item to send a frame of: a transfer in progress, else the first snapshot
// or sync diff, else the first live update.
func (q *nsQueue) next() (it *queuedItem, bulk bool) {
	switch {
	case len(q.bulk) > 0 && q.bulk[0].split != nil:
		return q.bulk[0], true
	case len(q.items) > 0 && q.items[0].split != nil:
		return &q.items[0], false
	case len(q.bulk) > 0:
		return q.bulk[0], true
	}
	return &q.items[0], false
}

// sendOne sends the next frame of q (see next), if its gate allows: an UPDATE, or the next
// chunk of a transfer (UPDATE_CHUNK). A transfer starts only while fewer than
// maxConcurrentAssembliesPerConnection are in progress. The item's last frame is awaited
// for its kind's acknowledgement.
func (c *conn) sendOne(q *nsQueue) bool {
	if q.empty() {
		c.removeFromRing(q)
		return false
	}
	it, bulk := q.next()
	chunked := bulkKind(it.Kind) || len(it.Bytes) > c.cfg.MaxUpdateBytes
	if it.split == nil {
		if chunked && c.sched.transfers >= c.cfg.MaxConcurrentAssembliesPerConnection {
			return false
		}
		gate := q.gate
		if it.Gate != nil {
			gate = it.Gate
		}
		if gate != nil && !gate() {
			c.park(q)
			return false
		}
	}
	var m protocol.Message
	last := true
	payload := len(it.Bytes)
	if !chunked {
		m = &protocol.Update{NamespaceID: q.ns, Update: it.Bytes}
	} else {
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
			c.sched.transfers++
		}
		chunk, ok := it.split.Next()
		if !ok {
			// An item leaves the queue with its last chunk, so this is a broken invariant.
			c.fail(&protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeConnection, Detail: "a chunked item without chunks left"})
			return false
		}
		m = chunk
		payload = len(chunk.Bytes) + len(chunk.ReplicationID)
		last = it.split.Remaining() == 0
	}
	// Sized for the payload and the envelope, so that encoding allocates once.
	b, seq, err := c.out.AppendFrame(make([]byte, 0, frameOverhead+payload), m)
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
		c.w.wantReports(true) // the pump resumes when the writer has written enough
	}
	if !last {
		return true
	}
	if chunked {
		s.transfers--
	}
	if bulk {
		q.bulk[0] = nil
		q.bulk = q.bulk[1:]
		q.bulkBytes -= len(it.Bytes)
		s.queuedBulk -= len(it.Bytes)
	} else {
		left := *it // the item's slot in the queue is reused: what follows reads a copy
		it = &left
		q.items[0] = queuedItem{}
		if len(q.items) == 1 {
			q.items = q.items[:0] // the same array serves the next items
		} else {
			q.items = q.items[1:]
		}
		q.bytes -= len(it.Bytes)
		s.queued -= len(it.Bytes)
	}
	if q.empty() {
		c.removeFromRing(q)
	}
	info := seam.SentInfo{Sequence: seq, ChunkCount: 1, Bytes: len(it.Bytes), Tag: it.Tag}
	if chunked {
		info.Chunked, info.TransferID, info.ChunkCount = true, it.tid, it.split.ChunkCount()
	}
	c.await(seq, ackKey{q.ns, it.Kind.AckedBy()})
	c.emitSent(q, it, info)
	if it.Sent != nil {
		c.deferSent(it.Sent, info)
	}
	return true
}

// emitSent reports a data item leaving (docs/protocol.md#events): update-sent for an UPDATE
// frame (with the sequence only the connection knows), chunked-*-sent when a transfer's last
// chunk leaves.
func (c *conn) emitSent(q *nsQueue, it *queuedItem, info seam.SentInfo) {
	if !c.em.Enabled() {
		return
	}
	id, ns := c.connIDOpt(), q.eventName()
	if !info.Chunked {
		c.em.Emit(observer.UpdateSent{ConnectionID: id, NamespaceID: ns, Bytes: len(it.Bytes),
			Sequence: info.Sequence, SendQueueMs: c.em.SinceMs(it.enqueued)})
		return
	}
	total := uint32(len(it.Bytes))
	switch it.Kind {
	case protocol.KindSnapshot:
		c.em.Emit(observer.ChunkedSnapshotSent{ConnectionID: id, NamespaceID: ns, TransferID: info.TransferID, ChunkCount: info.ChunkCount, TotalBytes: total})
	case protocol.KindSyncDiff:
		c.em.Emit(observer.ChunkedSyncSent{ConnectionID: id, NamespaceID: ns, TransferID: info.TransferID, ChunkCount: info.ChunkCount, TotalBytes: total, SyncRoundID: it.Binding.SyncRoundID})
	default:
		c.em.Emit(observer.ChunkedUpdateSent{ConnectionID: id, NamespaceID: ns, TransferID: info.TransferID, ChunkCount: info.ChunkCount, TotalBytes: total})
	}
}

// flushed records bytes the writer wrote and resumes the pump below the low watermark.
func (c *conn) flushed(data, control int) {
	s := &c.sched
	s.unflushedData -= data
	s.unflushedControl -= control
	if s.paused && s.unflushed() <= c.cfg.LowWaterBytes {
		s.paused = false
		c.w.reportWanted.Store(false)
		if c.em.Enabled() && !c.closing {
			c.em.Emit(observer.SendResumed{ConnectionID: c.connIDOpt(), BufferedAmount: s.unflushed()})
		}
	}
}
