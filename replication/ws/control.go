package ws

import (
	"errors"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// sendNamespaceControl is seam.Session.Send: it takes the namespace messages this side may
// send on the control lane, by their message rules.
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

// sendControl encodes m with the next sequence and hands it to the writer at once, ahead of
// queued data (docs/protocol.md#per-connection). A message that does not encode consumes no
// sequence and its error is returned (the connection goes on). Unflushed control bytes are
// bounded by maxQueuedControlBytes; exhausting them is CONNECTION_BACKPRESSURE (1011), and
// sendControl returns ErrClosed, as it does after sequence exhaustion. A frame its rule says
// is acknowledged is awaited, one that answers an OPEN finishes it, and one that ends its
// namespace drops the namespace's awaited acknowledgements.
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
	c.w.collect()
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
