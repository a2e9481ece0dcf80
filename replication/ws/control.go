package ws

import (
	"errors"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

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
