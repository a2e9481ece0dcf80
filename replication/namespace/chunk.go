package namespace

import (
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is the receiving half of chunked transfers (docs/protocol.md#receiver-rules):
// the remote's UPDATE_CHUNK frames — a live update, the hub's snapshot, a sync round's diff
// — put back together by the connection's assembler, which checks every chunk and allocates
// a transfer's buffer once, from declared sizes it has checked against the caps. A complete
// transfer takes the path of its single-frame form (an UPDATE's apply, a bootstrap's import,
// a Step2's apply) and is acknowledged the same way, naming its last chunk. An assembly that
// stalls for assemblyTimeoutMs is discarded and ends as its kind says: a live update or a
// diff with a resync, a snapshot as a failed bootstrap. Every partial assembly thrown away
// is reported (chunked-*-aborted), unless its namespace fails: namespace-error and
// namespace-failed report that.
//
// The sending half is in the connection layer (seam.Outbox frames a DataItem lazily, one
// chunk per turn) and in send.go, hubchannel.go and round.go, which choose it.

// TransferProgress is an inbound chunked transfer in progress — a snapshot, a catch-up diff
// or a live update — for the peer's admin API.
type TransferProgress struct {
	Kind          protocol.ChunkKind
	BytesReceived int
	TotalBytes    int
}

// inboundTransfer is what the namespace layer keeps of a transfer it is receiving, beside
// the assembler's buffer: for its log lines and its settlement.
type inboundTransfer struct {
	kind    protocol.ChunkKind
	id      uint32
	total   int
	chunks  uint32
	started time.Time
}

// maxDiscarded bounds the transfer ids a channel remembers having given up
// (channel.discarded: aborted adds them, oldest dropped first, and chunk drops the late
// chunks of those transfers).
const maxDiscarded = 16

// chunked reports whether the connection negotiated CAP_CHUNKED_UPDATE.
func (n *nsConn) chunked() bool { return n.s.Negotiated().Chunked() }

// tooManyChunks reports whether n bytes of kind k are over what one chunked transfer may
// carry: the kind's cap on totalBytes, or maxChunksPerUpdate chunks of maxUpdateBytes.
func tooManyChunks(cfg *protocol.Config, k protocol.ChunkKind, n int) bool {
	return n > cfg.MaxChunkedBytes(k) || (n+cfg.MaxUpdateBytes-1)/cfg.MaxUpdateBytes > cfg.MaxChunksPerUpdate
}

// assembliesChanged publishes the number of assemblies in progress on this connection to
// the side's gauge.
func (n *nsConn) assembliesChanged() {
	now := int64(n.asm.Len())
	if d := now - n.asmCount; d != 0 {
		n.shared.Add(d)
		n.asmCount = now
	}
}

// armAssemblyTimer arms the one timer of the connection's assemblies for the earliest
// deadline, if none is armed: deadlines only move later, so an armed timer is never late.
func (n *nsConn) armAssemblyTimer() {
	if n.asmTimer != nil || n.closed {
		return
	}
	next, ok := n.asm.NextDeadline()
	if !ok {
		return
	}
	n.asmTimer = n.s.AfterFunc(max(next.Sub(n.s.Clock().Now()), 0), n.assemblyTimerFired)
}

// assemblyTimerFired discards every assembly that received no chunk for assemblyTimeoutMs
// and ends each as its kind says.
func (n *nsConn) assemblyTimerFired() {
	n.asmTimer = nil
	aborts := n.asm.Expire()
	n.assembliesChanged()
	for _, a := range aborts {
		if c := n.role.channel(a.Namespace); c != nil {
			c.assemblyExpired(a)
		}
	}
	n.armAssemblyTimer()
}

// discardAll drops every partial assembly of the connection (it closed, or drains: a
// draining connection delivers no more chunks) and reports each.
func (n *nsConn) discardAll(reason protocol.AbortReason) {
	aborts := n.asm.DiscardAll(reason)
	n.assembliesChanged()
	for _, a := range aborts {
		if c := n.role.channel(a.Namespace); c != nil {
			c.aborted(a, true, false)
		}
	}
}

// chunk takes one UPDATE_CHUNK of the remote: the first chunk of a transfer is checked
// against the namespace's state (a live update only once open and bootstrapped, a snapshot
// only during the bootstrap, a diff only as the answer to this side's Step1), and every chunk
// goes to the assembler.
func (c *channel) chunk(f protocol.Frame, m *protocol.UpdateChunk) {
	if !c.accepts(f) {
		return
	}
	if m.ChunkIndex > 0 && slices.Contains(c.discarded, m.TransferID) {
		return // the rest of a transfer this side gave up, sent before the remote learnt it
	}
	var want protocol.Binding
	if m.ChunkIndex == 0 {
		var ok bool
		if want, ok = c.firstChunk(f, m); !ok {
			return
		}
	}
	n := c.n
	t, err := n.asm.Add(m, f.Sequence, want)
	n.assembliesChanged()
	if err != nil {
		c.transferRefused(err)
		return
	}
	if m.ChunkIndex == 0 {
		c.transferStarted(t)
	}
	if !t.Complete {
		c.role.progress(&TransferProgress{Kind: t.Kind, BytesReceived: t.ReceivedBytes, TotalBytes: int(t.TotalBytes)})
		n.armAssemblyTimer()
		return
	}
	in := c.inbound[t.TransferID]
	delete(c.inbound, t.TransferID)
	c.role.progress(nil)
	switch t.Kind {
	case protocol.KindLiveUpdate:
		c.applyUpdate(t.AckSequence, t.Data, &in)
	case protocol.KindSnapshot:
		c.role.snapshotAssembled(t, &in)
	case protocol.KindSyncDiff:
		c.applyDiff(t.Binding.SyncRoundID, t.AckSequence, t.Data, &in)
	}
}

// firstChunk checks that a transfer of the chunk's kind may start now and returns the
// binding its first chunk must carry; false when it answered the chunk instead.
func (c *channel) firstChunk(f protocol.Frame, m *protocol.UpdateChunk) (protocol.Binding, bool) {
	switch m.Kind {
	case protocol.KindSnapshot:
		return c.role.snapshotChunk(f)
	case protocol.KindSyncDiff:
		r := &c.round
		if c.stale(m.SyncRoundID) {
			return protocol.Binding{}, false
		}
		if !r.active || r.myStep1 == 0 || r.gotStep2 {
			c.sendError(protocol.CodeSyncStateViolation, f.Sequence, observer.FailedProtocolViolation)
			return protocol.Binding{}, false
		}
		return protocol.Binding{SyncRoundID: r.id}, true
	}
	switch {
	case c.sess == nil || c.state == observer.ChannelBootstrapping || c.state == observer.ChannelOpening:
		c.violation(f) // OPEN_OK and the bootstrap come first
		return protocol.Binding{}, false
	case c.readOnly:
		c.sendError(protocol.CodeRoleViolation, f.Sequence, observer.FailedApplyRefused)
		return protocol.Binding{}, false
	}
	return protocol.Binding{}, true
}

// transferRefused answers a chunk the assembler refused with its namespace error: the
// kind's TOO_LARGE or VIOLATION, an identity mismatch, or SYNC_STATE_VIOLATION. The
// namespace ends; its other partial assemblies go without an event.
func (c *channel) transferRefused(err error) {
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Scope != protocol.ScopeNamespace {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
		return
	}
	c.sendError(pe.Code, pe.Sequence, observer.FailedProtocolViolation)
}

// transferStarted records a transfer whose first chunk was accepted: a snapshot or a diff is
// now under way (a second one is a violation), and the start is logged.
func (c *channel) transferStarted(t protocol.Transfer) {
	switch t.Kind {
	case protocol.KindSnapshot:
		c.role.snapshotStarted()
	case protocol.KindSyncDiff:
		c.round.gotStep2 = true
	}
	if c.inbound == nil {
		c.inbound = make(map[uint32]inboundTransfer)
	}
	c.inbound[t.TransferID] = inboundTransfer{kind: t.Kind, id: t.TransferID, total: int(t.TotalBytes),
		chunks: t.ChunkCount, started: c.n.s.Clock().Now()}
	c.n.log.Log(c.n.ctx, transferLogLevel(t.Kind), "replication transfer started", slog.String("namespaceId", c.id),
		slog.String("kind", t.Kind.String()), slog.Int("bytes", int(t.TotalBytes)), slog.Int("chunks", int(t.ChunkCount)))
}

// transferLogLevel: snapshots and diffs are logged at info, live updates at debug.
func transferLogLevel(k protocol.ChunkKind) slog.Level {
	if k == protocol.KindLiveUpdate {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// abortLogLevel: an aborted snapshot or diff is a warning, an aborted live update is
// repaired by the next round (info).
func abortLogLevel(k protocol.ChunkKind) slog.Level {
	if k == protocol.KindLiveUpdate {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

// transferFinished logs the end of an inbound transfer, applied (or refused: err).
func (c *channel) transferFinished(in *inboundTransfer, err error) {
	d := c.n.s.Clock().Now().Sub(in.started)
	attrs := []any{slog.String("namespaceId", c.id), slog.String("kind", in.kind.String()), slog.Int("bytes", in.total),
		slog.Int("chunks", int(in.chunks)), slog.Float64("durationMs", float64(d)/float64(time.Millisecond))}
	if err != nil {
		c.n.log.Warn("replication transfer refused", append(attrs, slog.String("error", err.Error()))...)
		return
	}
	c.n.log.Log(c.n.ctx, transferLogLevel(in.kind), "replication transfer finished", attrs...)
}

// discardInbound drops the namespace's partial assemblies. report: emit chunked-*-aborted
// for each (not when the namespace fails); remember: the remote may still send the rest of
// them (this side gave up first), to be dropped silently.
func (c *channel) discardInbound(reason protocol.AbortReason, report, remember bool) []protocol.Abort {
	aborts := c.n.asm.Discard(c.ns, reason)
	c.n.assembliesChanged()
	for _, a := range aborts {
		c.aborted(a, report, remember)
	}
	return aborts
}

// aborted settles one discarded partial assembly.
func (c *channel) aborted(a protocol.Abort, report, remember bool) {
	in, ok := c.inbound[a.TransferID]
	delete(c.inbound, a.TransferID)
	c.role.progress(nil)
	if remember {
		c.discarded = append(c.discarded, a.TransferID)
		if len(c.discarded) > maxDiscarded {
			c.discarded = c.discarded[1:]
		}
	}
	if !report {
		return
	}
	if ok {
		c.n.log.Log(c.n.ctx, abortLogLevel(a.Kind), "replication transfer aborted", slog.String("namespaceId", c.id),
			slog.String("kind", a.Kind.String()), slog.String("reason", string(a.Reason)),
			slog.Int("bytesReceived", a.ReceivedBytes), slog.Int("bytes", in.total))
	}
	if !c.n.em.Enabled() {
		return
	}
	reason, chunks := observer.AbortReason(a.Reason), int(a.ReceivedChunks)
	switch a.Kind {
	case protocol.KindSnapshot:
		c.n.em.Emit(observer.ChunkedSnapshotAborted{NamespaceID: c.id, TransferID: a.TransferID, Reason: reason,
			ReceivedChunks: chunks, ReceivedBytes: a.ReceivedBytes})
	case protocol.KindSyncDiff:
		c.n.em.Emit(observer.ChunkedSyncAborted{NamespaceID: c.id, TransferID: a.TransferID, Reason: reason,
			ReceivedChunks: chunks, ReceivedBytes: a.ReceivedBytes})
	default:
		c.n.em.Emit(observer.ChunkedUpdateAborted{NamespaceID: c.id, TransferID: a.TransferID, Reason: reason,
			ReceivedChunks: chunks, ReceivedBytes: a.ReceivedBytes})
	}
}

// assemblyExpired ends an assembly that stalled for assemblyTimeoutMs
// (docs/protocol.md#transfer-errors): a live update resyncs
// (RESYNC_REQUIRED{UPDATE_TRANSFER_EXPIRED}), a diff gives up its round
// (RESYNC_REQUIRED{SYNC_TRANSFER_EXPIRED}, and the peer starts another), a snapshot fails
// the bootstrap.
func (c *channel) assemblyExpired(a protocol.Abort) {
	c.aborted(a, true, true)
	if c.ended() || c.closing() {
		return
	}
	switch a.Kind {
	case protocol.KindSnapshot:
		c.role.snapshotExpired()
	case protocol.KindSyncDiff:
		if c.round.active && c.round.gotStep2 {
			c.abandonRound(true)
		}
	default:
		c.declareResync("", protocol.ResyncUpdateTransferExpired)
	}
}

// abandonRound gives up the round in progress because a chunked diff of it was thrown away
// (this side's assembly expired: declare; or the remote's did and it said so): the round
// cannot complete. This side's own diff stops, the remote's is discarded, and the channel
// waits in needs-resync for the peer's next round. The round's frames the remote sent
// before it learnt are dropped (stale).
func (c *channel) abandonRound(declare bool) {
	id := c.round.id
	c.round = syncRound{}
	c.staleRound = id
	c.resyncPending, c.resyncReason = false, ""
	c.bulkOut = bulkOut{}
	stopTimer(&c.timer)
	c.reopenOutbox()
	if declare {
		// A declaration that cannot be sent has closed the connection, which ends the channel.
		_, _ = c.n.s.Send(&protocol.ResyncRequired{NamespaceID: c.ns, ReasonCode: protocol.ResyncSyncTransferExpired})
	}
	c.discardInbound(protocol.AbortResyncDeclared, true, declare)
	c.setState(observer.ChannelNeedsResync)
	if len(c.window) == 0 {
		c.role.resyncReady()
	}
}

// stale reports whether a sync frame of round id belongs to a round this side abandoned:
// one the remote sent before it learnt.
func (c *channel) stale(id uint32) bool {
	return c.staleRound != 0 && id == c.staleRound && !(c.round.active && c.round.id == id)
}

// reopenOutbox drops everything queued for the namespace, snapshots and diffs too, and starts
// an empty queue.
func (c *channel) reopenOutbox() {
	if c.out == nil {
		return
	}
	c.out.Close()
	c.reserved, c.bulkStarted = 0, false
	c.out = c.n.s.Outbox(c.ns, c.gate)
}

// bulkOut is the snapshot or sync diff this side sent as a chunked transfer and the remote has
// not acknowledged yet (BOOTSTRAP_ACK, SYNC_APPLIED): it holds one slot of the window.
type bulkOut struct {
	pending bool // sent, awaiting its acknowledgement
	seq     uint32
	bytes   int
	sentAt  observer.Opt[time.Time]
}

// bulkGate admits a snapshot's or a diff's first chunk: whatever the state, within the
// window (the transfer takes one slot until acknowledged).
func (c *channel) bulkGate() bool {
	if len(c.window)+c.reserved+c.bulkSlots() >= c.n.cfg.MaxInFlightUpdates {
		return false
	}
	c.reserved++
	c.bulkStarted = true
	return true
}

// bulkSlots is the window slot a chunked snapshot or diff sent and not acknowledged holds.
func (c *channel) bulkSlots() int {
	if c.bulkOut.pending {
		return 1
	}
	return 0
}

// queueBulk queues a snapshot or a diff too large for one frame; ok reports whether it was
// taken (otherwise the channel has answered the failure). sent runs when its last chunk is
// handed over, with the chunk's sequence.
func (c *channel) queueBulk(k protocol.ChunkKind, b []byte, bind protocol.Binding, sent func(seq uint32) bool) bool {
	n := len(b)
	err := c.out.Enqueue(seam.DataItem{Kind: k, Bytes: b, Binding: bind, Gate: c.bulkGate, Sent: func(si seam.SentInfo) {
		if c.reserved > 0 {
			c.reserved--
		}
		c.bulkStarted = false
		if c.ended() || !sent(si.Sequence) {
			c.wakeOutbox()
			return
		}
		c.bulkOut = bulkOut{pending: true, seq: si.Sequence, bytes: n}
		if c.n.em.Enabled() {
			c.bulkOut.sentAt = c.n.em.Now()
		}
	}})
	if err != nil {
		c.sendFailed(err)
		return false
	}
	return true
}

// bulkAcked settles the chunked snapshot or diff acknowledged by seq, if it was one, and
// reports whether it was.
func (c *channel) bulkAcked(seq uint32) (b bulkOut, ok bool) {
	if !c.bulkOut.pending || c.bulkOut.seq != seq {
		return bulkOut{}, false
	}
	b, c.bulkOut = c.bulkOut, bulkOut{}
	c.wakeOutbox()
	return b, true
}

// assemblyCounter is the shared count of assemblies in progress on one side's connections.
type assemblyCounter = atomic.Int64
