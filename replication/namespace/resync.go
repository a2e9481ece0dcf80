package namespace

import (
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is resync (§9.4): when a side loses continuity — updates dropped unsent, a shed
// queue, an unacknowledged window — the namespace goes to needs-resync and the next sync
// round repairs whatever was lost.

// needResync handles a local loss of continuity (a dropped queue, a failed send, a shed):
// the unsent updates are dropped, the remote is told with RESYNC_REQUIRED, and the channel
// goes to needs-resync — or, during a round, one more round follows it.
func (c *channel) needResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure]) {
	c.enterResync(cause, failure, true)
}

// resyncRequired handles the remote's RESYNC_REQUIRED (or its ACK_TIMEOUT error).
func (c *channel) resyncRequired(f protocol.Frame) {
	if f.Type() == protocol.TypeResyncRequired && !c.accepts(f) {
		return
	}
	if c.state == observer.ChannelOpening {
		c.violation(f) // before OPEN_OK
		return
	}
	c.enterResync(observer.ResyncRemoteDeclared, observer.None[observer.SendFailure](), false)
}

// enterResync drops the unsent updates and goes to needs-resync (or, during a round,
// schedules one more), declaring the loss to the remote when declare.
func (c *channel) enterResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure], declare bool) {
	if c.ended() || c.closing() || c.sess == nil {
		return
	}
	if c.out != nil {
		c.out.Clear()
	}
	switch {
	case c.round.active:
		// The round's diffs may predate the loss: one more round follows.
		c.resyncPending = true
	case c.state == observer.ChannelLive:
		c.setState(observer.ChannelNeedsResync)
	default:
		// Before the first round, or already waiting for one: the next round's diffs are
		// computed after this point and cover the loss.
		declare = false
	}
	if declare {
		// A declaration that cannot be sent has closed the connection, which ends the channel.
		_, _ = c.n.s.Send(&protocol.ResyncRequired{NamespaceID: c.ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	}
	c.emitResync(cause, failure)
	// The round follows once the window is empty — also when an ACK timeout gave the window
	// up while the channel was already waiting in needs-resync (the given-up
	// acknowledgements never reach it again).
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.role.resyncReady()
	}
}

// emitResync reports resync-required.
func (c *channel) emitResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure]) {
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.ResyncRequired{ConnectionID: c.n.connID(), NamespaceID: c.id, Cause: cause, SendFailure: failure})
	}
}
