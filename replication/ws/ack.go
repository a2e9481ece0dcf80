package ws

import (
	"slices"

	"github.com/nomicore/nomicore/replication/protocol"
)

// This file correlates acknowledgements with the frames they acknowledge
// (docs/protocol.md#the-ack-window). The connection remembers each frame it sent that its
// message rule says is acknowledged by sequence (protocol.MessageRule.AckedBy; for chunked
// data, the kind's), and checks every acknowledgement that arrives against them, so the
// namespace layer only ever sees valid ones.

// ackKey is what a frame awaiting its acknowledgement must be acknowledged with.
type ackKey struct {
	ns  protocol.NamespaceID
	ack protocol.MessageType
}

// await records a frame sent that expects an acknowledgement; unawait forgets it.
func (c *conn) await(seq uint32, k ackKey) {
	c.awaiting[seq] = k
	if k.ack == protocol.TypeUpdateAck {
		c.inFlight++
		c.flow(k.ns).sent++
	}
}

// unawait forgets the frame seq.
func (c *conn) unawait(seq uint32) {
	if k, ok := c.awaiting[seq]; ok {
		delete(c.awaiting, seq)
		if k.ack == protocol.TypeUpdateAck {
			c.inFlight--
		}
	}
}

// checkAck verifies an inbound acknowledgement: its ackedSequence must name a frame this
// side sent and still awaits, of the type and namespace it acknowledges; anything else
// closes the connection with ACK_STATE_VIOLATION. It reports whether the frame goes on to
// the namespace layer (every frame that is not an acknowledgement does).
func (c *conn) checkAck(f protocol.Frame) bool {
	a, isAck := f.Message.(protocol.Acknowledgement)
	if !isAck {
		c.forgetOnTerminal(f.Message, false)
		return true
	}
	seq, ns := a.Acknowledges(), a.Namespace()
	want, ok := c.awaiting[seq]
	if late, isLate := c.late[seq]; !ok && isLate && late.ack == f.Type() && late.ns == ns {
		// Sent by the remote before it learnt that this side ended the namespace: valid,
		// and of no further interest to the namespace layer.
		delete(c.late, seq)
		return false
	}
	if !ok || want.ack != f.Type() || want.ns != ns {
		c.fail(frameErr(protocol.CodeAckStateViolation, f, "ackedSequence names no unacknowledged frame of this type and namespace"))
		return false
	}
	c.unawait(seq)
	if want.ack == protocol.TypeUpdateAck {
		c.flow(ns).acked++
	}
	c.forgetOnTerminal(f.Message, false)
	return true
}

// flow returns the counters of ns, creating them.
func (c *conn) flow(ns protocol.NamespaceID) *flowCount {
	fc := c.flows[ns]
	if fc == nil {
		fc = &flowCount{}
		c.flows[ns] = fc
	}
	return fc
}

// maxLateAcks bounds the acknowledgements a connection still accepts after giving up on
// them. An acknowledgement older than the newest maxLateAcks given up is an
// ACK_STATE_VIOLATION like any unknown one.
const maxLateAcks = 1024

// forgetOnTerminal drops the acknowledgements a namespace will no longer send once a frame
// that ends it has passed in either direction (protocol.EndsNamespace: a normal close does
// not wait for lost acknowledgements: docs/protocol.md#closing-a-namespace), and the UPDATE
// acknowledgements this side stopped waiting for when it declared ACK_TIMEOUT (nothing is
// resent; the next round repairs). When this side sent the ending frame, the remote may have
// acknowledged before it received it: those acknowledgements are still valid, so each is
// accepted once (and not delivered) instead of being an ACK_STATE_VIOLATION — within a
// bound, so that a remote that never acknowledges cannot grow this bookkeeping without
// limit.
//
// One acknowledgement outlives a CLOSE_OK this side sends: in crossed closes (both sides
// sent CLOSE_NAMESPACE) the remote's CLOSE_OK answering this side's close is what the
// namespace layer waits for to end the namespace, so it stays awaited and is delivered.
func (c *conn) forgetOnTerminal(m protocol.Message, sent bool) {
	ns, ends := protocol.EndsNamespace(m)
	onlyUpdates := false
	if !ends {
		e, ok := m.(*protocol.ErrorMessage)
		if !sent || !ok || e.Scope != protocol.ScopeNamespace || e.Code != protocol.CodeAckTimeout {
			return
		}
		ns, onlyUpdates = e.NamespaceID, true
	}
	if ends {
		delete(c.flows, ns) // the namespace is over on this connection: so are its counters
	}
	_, answersClose := m.(*protocol.CloseOK)
	keepClose := sent && answersClose
	var given []uint32
	for seq, k := range c.awaiting {
		if keepClose && k.ack == protocol.TypeCloseOK {
			continue
		}
		if k.ns == ns && (!onlyUpdates || k.ack == protocol.TypeUpdateAck) {
			c.unawait(seq)
			if sent {
				given = append(given, seq)
				c.late[seq] = k
			}
		}
	}
	slices.Sort(given) // map order is random; keep lateOrder oldest first
	c.lateOrder = append(c.lateOrder, given...)
	for len(c.lateOrder) > maxLateAcks {
		delete(c.late, c.lateOrder[0])
		c.lateOrder = c.lateOrder[1:]
	}
}
