package ws

import (
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is the drain (docs/protocol.md#draining): after a GOAWAY, sent or received, or
// the peer's local stop, the connection admits no new work, lets the namespace layer close
// its namespaces, and closes when they have all ended or at the deadline.

// goAway sends a GOAWAY and drains: the hub restarting, or a peer that must authenticate
// again.
func (c *conn) goAway(reason string, drainTimeout time.Duration, retryAfter time.Duration, hasRetry bool) {
	if c.closing || c.state != stReady {
		return
	}
	m := &protocol.GoAway{ReasonCode: reason, DrainTimeoutMs: uint64(drainTimeout / time.Millisecond),
		RetryAfterMs: uint64(retryAfter / time.Millisecond), HasRetryAfter: hasRetry}
	// Arm the drain, then send the GOAWAY that others observe
	// (docs/protocol.md#restart-and-shutdown).
	c.startDrain(seam.Drain{ReasonCode: reason, Deadline: c.clock.Now().Add(drainTimeout), RetryAfter: retryAfter, HasRetryAfter: hasRetry}, drainTimeout)
	// A GOAWAY that cannot be sent has closed the connection (control backpressure,
	// sequence exhaustion): there is nothing left to drain.
	_, _ = c.sendControl(m)
}

// goAwayReceived drains on the remote's GOAWAY: with its drainTimeoutMs, and telling the
// peer's controller its reason and retry hint.
func (c *conn) goAwayReceived(m *protocol.GoAway) {
	d := seam.Drain{ReasonCode: m.ReasonCode, Received: true,
		RetryAfter: time.Duration(m.RetryAfterMs) * time.Millisecond, HasRetryAfter: m.HasRetryAfter}
	timeout := time.Duration(min(m.DrainTimeoutMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
	d.Deadline = c.clock.Now().Add(timeout)
	c.goAwayRecv = &d
	c.info.GoAway = &d
	if c.side == observer.SidePeer && c.em.Enabled() {
		ev := observer.GoAwayReceived{ConnectionID: c.connIDOpt(), ReasonCode: observer.FoldGoAwayReason(m.ReasonCode), DrainTimeoutMs: m.DrainTimeoutMs}
		if m.HasRetryAfter {
			ev.RetryAfterMs = observer.Some(m.RetryAfterMs)
		}
		c.em.Emit(ev)
	}
	if c.onGoAway != nil {
		c.onGoAway(c, d)
	}
	if c.state != stReady {
		// During the handshake there is nothing to drain.
		c.closeNow(protocol.CloseNormal, seam.CloseInfo{Code: protocol.CloseNormal, Cause: seam.CauseDrained, GoAway: &d})
		return
	}
	c.startDrain(d, timeout)
}

// localDrain drains without a GOAWAY: the peer stopping (ready → draining).
func (c *conn) localDrain(timeout time.Duration) {
	if c.closing {
		return
	}
	if c.state != stReady {
		c.closeNow(protocol.CloseNormal, seam.CloseInfo{Code: protocol.CloseNormal, Cause: seam.CauseShutdown})
		return
	}
	c.startDrain(seam.Drain{Deadline: c.clock.Now().Add(timeout)}, timeout)
}

// startDrain enters draining, arms the deadline and tells the namespace layer.
func (c *conn) startDrain(d seam.Drain, timeout time.Duration) {
	if c.state == stDraining {
		return
	}
	c.drain = &d
	c.setState(stDraining)
	c.drainTimer = c.after(timeout, func() { c.endDrain() })
	c.defer_(func() {
		if !c.closing {
			c.handler.HandleDrain(d)
		}
	})
}

// quiesced ends a drain early: every namespace has ended (seam.Session.Quiesced).
func (c *conn) quiesced() {
	if c.state == stDraining && !c.closing {
		c.endDrain()
	}
}

// endDrain closes a drained connection: with 1001 on the side that sent the GOAWAY, at the
// deadline or once quiesced, and with 1000 on the side that was asked to go.
func (c *conn) endDrain() {
	code := protocol.CloseGoingAway
	if c.drain != nil && (c.drain.Received || c.drain.ReasonCode == "") {
		code = protocol.CloseNormal
	}
	c.closeNow(code, seam.CloseInfo{Code: code, Cause: seam.CauseDrained, GoAway: c.goAwayRecv})
}
