package namespace

import (
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is the close handshake of a namespace (docs/protocol.md#closing-a-namespace):
// one side sends CLOSE_NAMESPACE, the other lets the applies it admitted settle and answers
// CLOSE_OK; crossed closes are both answered, and closeTimeoutMs without an answer ends the
// channel anyway.

// Reason codes of CLOSE_NAMESPACE.
const (
	closeReasonDrain  = "drain"
	closeReasonRemove = "remove"
	// closeReasonSchema: the peer closes a namespace whose replicated schema failed to
	// re-arm (schema-rearm-failed).
	closeReasonSchema = "schema-rearm-failed"
)

// startClose sends CLOSE_NAMESPACE: nothing new is admitted, and the close does not wait
// for acknowledgements.
func (c *channel) startClose(reason string) {
	if c.ended() || c.closeSent {
		return
	}
	if _, err := c.n.s.Send(&protocol.CloseNamespace{NamespaceID: c.ns, ReasonCode: reason}); err != nil {
		return
	}
	c.closeSent = true
	c.enterClosing(reason)
	c.closeTimer = c.n.s.AfterFunc(c.n.cfg.CloseTimeout, func() {
		c.closeTimer = nil
		c.terminate(observer.ChannelClosed)
	})
}

// enterClosing stops everything that would start work and enters closing: what this side
// was sending stops, the rest of a transfer in progress included, and the remote's partial
// transfers are discarded (a drain's with the connection: its chunks are no longer
// delivered).
func (c *channel) enterClosing(reason string) {
	c.round.active = false
	stopTimer(&c.timer)
	c.role.stopPeriodic()
	if c.out != nil {
		c.out.Close()
		c.out = nil
	}
	c.reserved, c.bulkStarted, c.bulkOut = 0, false, bulkOut{}
	why := protocol.AbortChannelTeardown
	if reason == closeReasonDrain {
		why = protocol.AbortConnectionTeardown
	}
	c.discardInbound(why, true, false)
	c.setState(observer.ChannelClosing)
}

// closeReceived: the remote closes the namespace. Admission stops at once; the applies
// already admitted settle, and then CLOSE_OK goes.
func (c *channel) closeReceived(f protocol.Frame) {
	switch {
	case c.ended():
		return
	case c.closeRecv || c.state == observer.ChannelOpening:
		c.violation(f)
		return
	}
	c.closeRecv = true
	c.closeRecvSeq = f.Sequence
	if !c.closing() {
		reason := ""
		if m, ok := f.Message.(*protocol.CloseNamespace); ok {
			reason = m.ReasonCode
		}
		c.enterClosing(reason)
	}
	c.maybeAnswerClose()
}

// maybeAnswerClose sends CLOSE_OK once the remote's close has arrived and every admitted
// apply has settled.
func (c *channel) maybeAnswerClose() {
	if !c.closeRecv || c.closeAnswered || c.applying > 0 || c.ended() {
		return
	}
	c.closeAnswered = true
	if _, err := c.n.s.Send(&protocol.CloseOK{NamespaceID: c.ns, AckedSequence: c.closeRecvSeq}); err != nil {
		return
	}
	if !c.closeSent || c.closeOKRecv {
		c.terminate(observer.ChannelClosed)
	}
}

// closeOK: the remote answered this side's close.
func (c *channel) closeOK() {
	if c.ended() || !c.closeSent {
		return
	}
	c.closeOKRecv = true
	if !c.closeRecv || c.closeAnswered {
		c.terminate(observer.ChannelClosed)
	}
}
