package namespace

import (
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Reason codes of CLOSE_NAMESPACE (§12).
const (
	closeReasonDrain  = "drain"
	closeReasonRemove = "remove"
	// closeReasonSchema: the peer closes a namespace whose replicated schema failed to
	// re-arm (§23.1 schema-rearm-failed, ADR 0018 §3).
	closeReasonSchema = "schema-rearm-failed"
)

// startClose sends CLOSE_NAMESPACE: nothing new is admitted, and the close does not wait
// for acknowledgements (§12).
func (c *channel) startClose(reason string) {
	if c.ended() || c.closeSent {
		return
	}
	if _, err := c.n.s.Send(&protocol.CloseNamespace{NamespaceID: c.ns, ReasonCode: reason}); err != nil {
		return
	}
	c.closeSent = true
	c.enterClosing()
	c.closeTimer = c.n.s.AfterFunc(c.n.cfg.CloseTimeout, func() {
		c.closeTimer = nil
		c.terminate(observer.ChannelClosed)
	})
}

func (c *channel) enterClosing() {
	c.round.active = false
	stopTimer(&c.timer)
	c.role.stopPeriodic()
	if c.out != nil {
		c.out.Clear()
	}
	c.setState(observer.ChannelClosing)
}

// closeReceived: the remote closes the namespace. Admission stops at once; the applies
// already admitted settle, and then CLOSE_OK goes (§12).
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
		c.enterClosing()
	}
	c.maybeAnswerClose()
}

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

func (c *channel) closeOK() {
	if c.ended() || !c.closeSent {
		return
	}
	c.closeOKRecv = true
	if !c.closeRecv || c.closeAnswered {
		c.terminate(observer.ChannelClosed)
	}
}
