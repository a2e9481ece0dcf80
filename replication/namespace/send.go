package namespace

import (
	"errors"
	"log/slog"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/yjs"
)

// This file is the outbound half of live updates (docs/protocol.md#live-updates): what the
// namespace's document changes reach this channel through its replication session's fan-out,
// wait in the connection's Outbox behind the channel's window, leave as UPDATEs and are
// acknowledged, or are given up at the ACK timeout.

// inflight is one UPDATE sent and not yet acknowledged.
type inflight struct {
	seq     uint32
	bytes   int
	sent    time.Time               // when it left (the session's clock); see ackDeadline
	sentAt  observer.Opt[time.Time] // for update-acked's ackLatencyMs
	chunked bool                    // sent as a chunked transfer: seq is its last chunk's
	mark    int64                   // the local write count its acknowledgement confirms (see lastMark)
}

// sessionOptions are the options of the channel's replication session.
func (c *channel) sessionOptions() registry.SessionOptions {
	if c.pullFn == nil {
		c.pullFn = c.pull // once, before the first session exists (notify reads it)
	}
	return registry.SessionOptions{
		Peer:                 c.n.remote,
		ReadOnly:             c.readOnly,
		MaxQueuedUpdateBytes: c.n.cfg.MaxQueuedUpdateBytes,
		MaxQueuedUpdateCount: c.n.cfg.MaxQueuedUpdateCount,
		// The window, plus a Step2 apply and the state-vector and diff reads of a round
		// with their observer captures.
		MaxInFlight: c.n.cfg.MaxInFlightUpdates + 8,
		Notify:      c.notify,
	}
}

// notify runs on the registry's sequencer goroutine: it posts one pull at a time.
func (c *channel) notify() {
	if c.pullScheduled.CompareAndSwap(false, true) {
		c.n.s.Post(c.pullFn)
	}
}

// attach installs the channel's replication session and its outbound queue.
func (c *channel) attach(sess *registry.Session) {
	c.sess = sess
	c.out = c.n.s.Outbox(c.ns, c.gate)
	c.pull() // what the fan-out queued before the session reached us
}

// pull takes what the runtime's document observer fanned out to the session — everything
// applied to the namespace except what came from this session — and queues it for sending.
func (c *channel) pull() {
	c.pullScheduled.Store(false)
	if c.sess == nil || c.ended() {
		return
	}
	// Read before the poll: every local write counted by now has been fanned out already.
	mark := c.role.localMark()
	p := c.sess.Poll()
	switch {
	case p.Deleted:
		c.sendError(c.n.deletedCode(), 0, observer.FailedSessionMissing)
		return
	case p.Fenced != nil:
		c.role.fenced(*p.Fenced)
		return
	case p.Failed:
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
		return
	case p.Closed:
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSessionMissing)
		return
	}
	if p.NeedsResync {
		c.needResync(observer.ResyncSessionFanoutOverflow, observer.None[observer.SendFailure]())
	}
	if c.state == observer.ChannelNeedsResync || c.closing() || c.out == nil {
		// The next round's diffs are computed later and cover these.
		return
	}
	for _, u := range p.Updates {
		if !c.enqueue(u, mark) {
			break
		}
	}
	c.coalesce(false)
}

// canSend: UPDATEs go only while live, and within the window of maxInFlightUpdates
// unacknowledged UPDATEs (docs/protocol.md#the-ack-window); a chunked transfer, of any kind,
// takes one slot.
func (c *channel) canSend() bool {
	return c.state == observer.ChannelLive && len(c.window)+c.reserved+c.bulkSlots() < c.n.cfg.MaxInFlightUpdates
}

// holdForMerge: once mergeAfterInFlight UPDATEs are unacknowledged, small updates wait for
// an acknowledgement and leave merged (coalesce) instead of filling the rest of the window
// one by one; larger ones use the whole window.
func (c *channel) holdForMerge() bool {
	if len(c.window)+c.reserved < c.mergeAfterInFlight() || c.out == nil {
		return false
	}
	items, bytes := c.out.Len()
	return items > 0 && bytes <= coalesceMaxAvgBytes*items
}

// coalesceQuickAck: while UPDATEs are acknowledged within less than this (smoothed), small
// updates wait behind a single one in flight. The wait is about one round trip, short enough
// not to be noticed; it only happens when updates come faster than one per round trip, and
// it sends each receiver fewer, larger UPDATEs (fewer frames to write, read and acknowledge
// on both sides). On a slower link, waiting a round trip would show: coalesceInFlight go
// out first. A variable for tests of the slow case.
var coalesceQuickAck = 25 * time.Millisecond

// mergeAfterInFlight is how many UPDATEs of small updates may be unacknowledged before
// the rest wait to leave merged: one while acknowledgements come back within less than
// coalesceQuickAck, else (or before the first) coalesceInFlight. When it drops to one with
// more in flight, what waits leaves once those are acknowledged.
func (c *channel) mergeAfterInFlight() int {
	if c.ackRTTKnown && c.ackRTT < coalesceQuickAck {
		return 1
	}
	return coalesceInFlight
}

// sampleAckRTT folds the round trip of one acknowledged UPDATE into ackRTT: a moving
// average in which the newest sample weighs an eighth (as TCP smooths its round-trip time).
func (c *channel) sampleAckRTT(rtt time.Duration) {
	if !c.ackRTTKnown {
		c.ackRTT, c.ackRTTKnown = rtt, true
		return
	}
	c.ackRTT += (rtt - c.ackRTT) / 8
}

// room: an UPDATE may leave now.
func (c *channel) room() bool { return c.canSend() && !c.holdForMerge() }

// gate is the Outbox gate. An item it admits is framed at once, but the connection reports
// it (Sent) only after its pump pass, so the gate reserves the item's window slot until then.
// Once it refuses, the connection asks again only after wakeOutbox (or a change of the
// queue), so whatever may open it — a slot freed, the state changed — calls wakeOutbox.
func (c *channel) gate() bool {
	if !c.room() {
		return false
	}
	c.reserved++
	return true
}

// wakeOutbox tells the connection that the gates may admit what they refused (seam
// Outbox.Wake): a window slot was freed, or the state changed.
func (c *channel) wakeOutbox() {
	if c.out != nil {
		c.out.Wake()
	}
}

// enqueue queues one update, pulled after the local write count read mark; false when the
// queue was dropped (the channel needs a resync) or cannot take more. An update over
// maxUpdateBytes is sent chunked (docs/protocol.md#sender-rules) when the connection
// negotiated it, up to maxChunkedUpdateBytes.
func (c *channel) enqueue(u *yjs.Shared, mark int64) bool {
	n := len(u.Bytes())
	if n > c.maxUpdate() {
		return c.tooLarge(n)
	}
	if c.sentUpdateFn == nil {
		c.sentUpdateFn = c.sentUpdate // once: every queued update shares it
	}
	err := c.out.Enqueue(seam.DataItem{Kind: protocol.KindLiveUpdate, Bytes: u.Bytes(), Sent: c.sentUpdateFn, Tag: mark, Shared: u})
	if err == nil {
		c.lastMark = max(c.lastMark, mark)
		return true
	}
	return c.enqueueFailed(err, n)
}

// enqueueFailed handles an update of n bytes the Outbox refused (enqueue); false when the
// queue was dropped or cannot take more.
func (c *channel) enqueueFailed(err error, n int) bool {
	var pe *protocol.Error
	switch {
	case errors.Is(err, seam.ErrQueueOverflow):
		c.recountReserved()
		c.needResync(observer.ResyncQueueOverflow, observer.None[observer.SendFailure]())
	case errors.Is(err, seam.ErrConnectionShed):
		c.recountReserved()
		c.needResync(observer.ResyncConnectionShed, observer.None[observer.SendFailure]())
	case errors.As(err, &pe) && pe.Code == protocol.CodeUpdateTransferTooLarge:
		return c.tooLarge(n) // more chunks than maxChunksPerUpdate
	case errors.Is(err, seam.ErrDraining), errors.Is(err, seam.ErrClosed):
	case c.state == observer.ChannelLive:
		c.needResync(observer.ResyncSendFailed, c.sendFailure(observer.SendFrameRejected, n))
	case c.round.active:
		c.lost()
		c.resyncPending = true
	}
	return false
}

// maxUpdate is the largest live update the connection can send: maxUpdateBytes, or with
// chunked transfers maxChunkedUpdateBytes.
func (c *channel) maxUpdate() int {
	if c.n.chunked() {
		return c.n.cfg.MaxChunkedUpdateBytes
	}
	return c.n.cfg.MaxUpdateBytes
}

// tooLarge handles an update over the largest the connection can send (maxUpdate).
// In live, with an empty queue, the send fails and a resync is declared (resync-required
// with its send-failed sample); with updates queued, it is dropped alone
// (update-dropped) and the next reconciliation repairs it. Outside live it never reaches
// the send path: the round in progress is followed by another.
func (c *channel) tooLarge(n int) bool {
	c.lost()
	if c.state != observer.ChannelLive {
		if c.round.active {
			c.resyncPending = true
		}
		return true
	}
	items, _ := c.out.Len()
	if items == 0 {
		c.needResync(observer.ResyncSendFailed, c.sendFailure(observer.SendUpdateTooLarge, n))
		return false
	}
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.UpdateDropped{ConnectionID: c.n.connID(), NamespaceID: c.id,
			Reason: observer.DropUpdateTooLarge, QueueSample: c.queueSample(n, observer.ChannelLive)})
	}
	return true
}

// sendFailure samples the send path for resync-required's send-failed detail, before the
// queue is dropped. Only built when an observer listens.
func (c *channel) sendFailure(reason observer.SendFailureReason, n int) observer.Opt[observer.SendFailure] {
	if !c.n.em.Enabled() {
		return observer.None[observer.SendFailure]()
	}
	return observer.Some(observer.SendFailure{Reason: reason, QueueSample: c.queueSample(n, observer.ChannelNeedsResync)})
}

// queueSample describes the send path for the observer.
func (c *channel) queueSample(n int, state observer.ChannelState) observer.QueueSample {
	items, bytes := 0, 0
	if c.out != nil {
		items, bytes = c.out.Len()
	}
	st := c.n.s.Stats()
	conn := observer.ConnReady
	if c.n.draining() {
		conn = observer.ConnDraining
	}
	return observer.QueueSample{UpdateBytes: n, MaxUpdateBytes: c.maxUpdate(), QueuedUpdateCount: items,
		QueuedUpdateBytes: bytes, InFlightCount: len(c.window), ChannelState: state, ConnectionState: conn,
		BufferedAmount: observer.Some(st.UnflushedData + st.UnflushedControl)}
}

// Coalescing thresholds, chosen with BenchmarkCoalesce: merging costs about 0.7 µs per
// small update and 2–3 µs per 1 KiB one, about 2 ns a byte above that, while each frame it
// saves costs the hub 3–5 µs (the frame written, its UPDATE_ACK read and checked) and the
// remote an apply and an acknowledgement.
const (
	// coalesceMaxAvgBytes: updates larger than this on average leave one by one — merging
	// them costs more than the frames it saves.
	coalesceMaxAvgBytes = 1 << 10
	// coalesceInFlight: how many UPDATEs of small updates may be unacknowledged before the
	// rest wait to leave merged (holdForMerge), unless acknowledgements come back quickly.
	coalesceInFlight = 4
	// coalesceBacklogShare: while the window is full, queued updates are merged only when
	// they reach this share of maxQueuedUpdateCount (so the queue never overflows on its
	// count), and then only when the updates not yet merged are at least as large as the
	// merged one ahead of them — so that each byte is merged a bounded number of times.
	coalesceBacklogShare = 4
)

// mergeUpdates is yjs.MergeShared; tests count its calls.
var mergeUpdates = yjs.MergeShared

// coalesce merges the unsent updates into one (docs/protocol.md#sending-and-relaying:
// updates that have no sequence yet may be merged with yjs.MergeUpdates, never after), when
// it pays:
//   - outside live (a round in progress) they wait, merged, and leave together once it
//     ends;
//   - while the window is full they wait unmerged — merging at every new update would
//     merge the growing merged update again and again — until an acknowledgement opens a
//     slot: then (opened) whatever waited leaves as one UPDATE, if the updates are small
//     enough for merging to cost less than the frames it saves (coalesceMaxAvgBytes). In
//     between they are merged only to keep the queue's count bounded
//     (coalesceBacklogShare);
//   - while the window has room, updates leave one by one as they come.
func (c *channel) coalesce(opened bool) {
	if c.out == nil {
		return
	}
	items, bytes := c.out.Len()
	if items == 0 {
		c.queuedMerged = 0
	}
	if items < 2 {
		return
	}
	switch {
	case c.state != observer.ChannelLive:
	case c.room():
		if !opened || bytes > coalesceMaxAvgBytes*items {
			return
		}
	default:
		limit := c.n.cfg.MaxQueuedUpdateCount
		pressed := items >= max(2, limit/coalesceBacklogShare) && bytes-c.queuedMerged >= c.queuedMerged
		if !pressed && items < max(2, limit/2) {
			return
		}
	}
	merged, mark := 0, c.lastMark // the merge holds the newest queued updates
	err := c.out.Coalesce(func(us [][]byte, shared []*yjs.Shared) ([]byte, error) {
		m, err := mergeUpdates(us, shared)
		merged = len(m)
		return m, err
	}, func(si seam.SentInfo) {
		c.queuedMerged = 0
		c.sent(si, merged, mark)
	})
	var tooLarge *protocol.Error
	switch {
	case err == nil:
		c.queuedMerged = merged
	case errors.Is(err, seam.ErrClosed):
	case errors.As(err, &tooLarge):
		// The merge would not fit one frame: the updates stay as they are and leave one by
		// one.
	default:
		// The session's own updates did not merge: they stay queued as they are, and the
		// failure is worth a look.
		c.n.log.Warn("replication could not merge queued updates", slog.String("namespaceId", c.id), slog.String("error", err.Error()))
	}
}

// sentUpdate is the Sent callback of a queued update: its Tag is the local write count
// pulled after (enqueue).
func (c *channel) sentUpdate(si seam.SentInfo) { c.sent(si, si.Bytes, si.Tag) }

// sent records an UPDATE in the window and arms the ACK timer for the oldest one:
// ackTimeoutMs from the frame's sent time.
func (c *channel) sent(si seam.SentInfo, n int, mark int64) {
	if c.reserved > 0 {
		c.reserved--
	}
	if c.ended() {
		c.wakeOutbox()
		return
	}
	in := inflight{seq: si.Sequence, bytes: n, sent: c.n.s.Clock().Now(), chunked: si.Chunked, mark: mark}
	if c.n.em.Enabled() {
		in.sentAt = c.n.em.Now()
	}
	c.window = append(c.window, in)
	if c.ackTimer == nil {
		c.armAckTimer()
	}
}

// ackDeadline is when in times out unacknowledged: ackTimeoutMs after it was sent.
func (c *channel) ackDeadline(in inflight) time.Time { return in.sent.Add(c.n.cfg.AckTimeout) }

// armAckTimer arms the ACK timer for the oldest UPDATE in the window.
func (c *channel) armAckTimer() {
	if len(c.window) == 0 {
		c.ackTimer = nil
		return
	}
	d := c.ackDeadline(c.window[0]).Sub(c.n.s.Clock().Now())
	c.ackTimer = c.n.s.AfterFunc(max(d, 0), c.ackTimerFired)
}

// ackTimerFired times out the oldest UPDATE, or re-arms for the next one if it was
// acknowledged meanwhile.
func (c *channel) ackTimerFired() {
	c.ackTimer = nil
	if len(c.window) == 0 || c.ended() {
		return
	}
	if c.n.s.Clock().Now().Before(c.ackDeadline(c.window[0])) {
		c.armAckTimer() // the oldest was acknowledged; wait for the next one
		return
	}
	c.ackTimeout()
}

// ackTimeout: an UPDATE went unacknowledged for ackTimeoutMs
// (docs/protocol.md#the-ack-window). It is not sent again: the window is given up and the
// namespace needs a new round, which this side declares with the non-fatal ACK_TIMEOUT
// error.
func (c *channel) ackTimeout() {
	rel := c.window[0].seq
	c.window = nil
	c.wakeOutbox()
	c.lost()
	if c.n.sendError(c.ns, protocol.CodeAckTimeout, rel) {
		c.n.emitNsError(c.ns, string(protocol.CodeAckTimeout), observer.DirectionSent)
	}
	c.enterResync(observer.Some(observer.ResyncAckTimeout), observer.None[observer.SendFailure](), "")
}

// updateAck settles an UPDATE. The connection has checked that it names one.
func (c *channel) updateAck(m *protocol.UpdateAck) {
	if c.ended() {
		return
	}
	for i, in := range c.window {
		if in.seq != m.AckedSequence {
			continue
		}
		c.window = append(c.window[:i], c.window[i+1:]...)
		if !in.chunked {
			c.sampleAckRTT(c.n.s.Clock().Now().Sub(in.sent))
		}
		c.wakeOutbox()
		if i == 0 && !c.lossy {
			// Every earlier update was acknowledged: the hub holds the local writes this
			// one's pull had counted.
			c.role.confirmLocal(in.mark)
		}
		switch {
		case !c.n.em.Enabled():
		case in.chunked:
			c.n.em.Emit(observer.ChunkedUpdateAcked{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: in.bytes,
				AckLatencyMs: c.n.em.SinceMs(in.sentAt)})
		default:
			c.n.em.Emit(observer.UpdateAcked{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: in.bytes,
				AckLatencyMs: c.n.em.SinceMs(in.sentAt), Sequence: m.AckedSequence})
		}
		break
	}
	// An acknowledgement of an UPDATE given up after an ACK timeout changes nothing.
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.role.resyncReady()
	}
	c.coalesce(true) // a slot is free: what waited leaves as one UPDATE
	c.confirmIfIdle()
}

// confirmIfIdle confirms every local write counted so far when the live channel has nothing
// left of them: no update queued, being sent, in flight or waiting to be pulled, and none
// lost since the last round.
func (c *channel) confirmIfIdle() {
	// Read first: a write counted by now has set pullScheduled before, unless a pull has
	// taken its update already (see the ledger in localwrites.go).
	mark := c.role.localMark()
	if c.state != observer.ChannelLive || c.lossy || c.round.active || c.sess == nil || len(c.window) > 0 ||
		c.reserved > 0 || c.pullScheduled.Load() {
		return
	}
	if c.out != nil {
		if items, _ := c.out.Len(); items > 0 {
			return
		}
	}
	c.role.confirmLocal(mark)
}
