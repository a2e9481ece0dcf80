package namespace

import (
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is resync (docs/protocol.md#resync): when a side loses continuity — updates
// dropped unsent, a shed queue, an unacknowledged window, a chunked live update that stalled
// — the namespace goes to needs-resync and the next sync round repairs whatever was lost.

// needResync handles a local loss of continuity (a dropped queue, a failed send, a shed):
// the unsent updates are dropped, the remote is told with RESYNC_REQUIRED, and the channel
// goes to needs-resync — or, during a round, one more round follows it.
func (c *channel) needResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure]) {
	c.enterResync(observer.Some(cause), failure, protocol.ResyncSendQueueOverflow)
}

// declareResync is needResync with the reasonCode of the declaration and no resync-required
// event when cause is "" (an expired assembly: its chunked-*-aborted event reports it).
func (c *channel) declareResync(cause observer.ResyncCause, reason string) {
	o := observer.None[observer.ResyncCause]()
	if cause != "" {
		o = observer.Some(cause)
	}
	c.enterResync(o, observer.None[observer.SendFailure](), reason)
}

// resyncRequired handles the remote's RESYNC_REQUIRED (or its ACK_TIMEOUT error). The remote
// gave up continuity and whatever it was sending: the partial assemblies of its transfers are
// discarded (for ACK_TIMEOUT, which concerns live updates, only theirs). When it gave up a
// diff of the round in progress (SYNC_TRANSFER_EXPIRED), the round is over.
func (c *channel) resyncRequired(f protocol.Frame) {
	m, declared := f.Message.(*protocol.ResyncRequired)
	if declared && !c.accepts(f) {
		return
	}
	if c.state == observer.ChannelOpening {
		c.violation(f) // before OPEN_OK
		return
	}
	if c.ended() || c.closing() || c.sess == nil {
		return
	}
	if declared && m.ReasonCode == protocol.ResyncSyncTransferExpired && c.round.active {
		c.abandonRound(false)
		c.emitResync(observer.Some(observer.ResyncRemoteDeclared), observer.None[observer.SendFailure]())
		return
	}
	brokeRound := false
	if declared {
		for _, a := range c.discardInbound(protocol.AbortResyncDeclared, true, false) {
			brokeRound = brokeRound || a.Kind == protocol.KindSyncDiff
		}
	} else {
		c.discardLiveInbound(protocol.AbortResyncDeclared)
	}
	if brokeRound && c.round.active {
		// The remote declared while its diff of this round was arriving: the round cannot
		// complete; give it up on both sides.
		c.abandonRound(true)
		return
	}
	c.enterResync(observer.Some(observer.ResyncRemoteDeclared), observer.None[observer.SendFailure](), "")
}

// discardLiveInbound drops the namespace's partial live-update assemblies only.
func (c *channel) discardLiveInbound(reason protocol.AbortReason) {
	for _, a := range c.n.asm.DiscardKind(c.ns, protocol.KindLiveUpdate, reason) {
		c.aborted(a, true, false)
	}
	c.n.assembliesChanged()
}

// enterResync drops the unsent updates and goes to needs-resync (or, during a round,
// schedules one more). reason, when not "", is the RESYNC_REQUIRED this side declares to the
// remote. During a round the declaration waits for the round's end: a RESYNC_REQUIRED makes
// the remote discard every partial assembly of the namespace, a chunked diff of the round
// included, and the round could then never complete.
func (c *channel) enterResync(cause observer.Opt[observer.ResyncCause], failure observer.Opt[observer.SendFailure], reason string) {
	if c.ended() || c.closing() || c.sess == nil {
		return
	}
	c.lost()
	if c.out != nil {
		c.out.Clear()
		c.recountReserved()
	}
	switch {
	case c.round.active:
		// The round's diffs may predate the loss: one more round follows.
		c.resyncPending = true
		if c.resyncReason == "" {
			c.resyncReason = reason
		}
		reason = ""
	case c.state == observer.ChannelLive:
		c.setState(observer.ChannelNeedsResync)
	default:
		// Before the first round, or already waiting for one: the next round's diffs are
		// computed after this point and cover the loss.
		reason = ""
	}
	// Reported before the declaration leaves: the remote may answer it at once.
	c.emitResync(cause, failure)
	if reason != "" {
		c.sendResync(reason, cause)
	}
	// The round follows once the window is empty — also when an ACK timeout gave the window
	// up while the channel was already waiting in needs-resync (the given-up
	// acknowledgements never reach it again).
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.role.resyncReady()
	}
}

// sendResync declares RESYNC_REQUIRED{reason}. On that edge this side gives up its partial
// assemblies of the namespace too (the remote's further chunks of them are dropped).
func (c *channel) sendResync(reason string, cause observer.Opt[observer.ResyncCause]) {
	// A declaration that cannot be sent has closed the connection, which ends the channel.
	_, _ = c.n.s.Send(&protocol.ResyncRequired{NamespaceID: c.ns, ReasonCode: reason})
	why := protocol.AbortResyncDeclared
	if v, ok := cause.Get(); ok && v == observer.ResyncConnectionShed {
		why = protocol.AbortShed
	}
	c.discardInbound(why, true, true)
}

// recountReserved recounts the window slots the gate reserved for items in progress, after
// the namespace's live updates were dropped (a Clear, an overflow, a shed): a live update's
// transfer cut short never reports Sent. On the owner goroutine between pump passes at most
// one item of a namespace is in progress, and only a snapshot or a diff survives the drop.
func (c *channel) recountReserved() {
	c.reserved = 0
	if c.bulkStarted {
		c.reserved = 1
	}
	c.wakeOutbox()
}

// emitResync reports resync-required.
func (c *channel) emitResync(cause observer.Opt[observer.ResyncCause], failure observer.Opt[observer.SendFailure]) {
	v, ok := cause.Get()
	if ok && c.n.em.Enabled() {
		c.n.em.Emit(observer.ResyncRequired{ConnectionID: c.n.connID(), NamespaceID: c.id, Cause: v, SendFailure: failure})
	}
}
