package ws

import (
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// goAway sends a GOAWAY and drains (hub: restart, reauthentication).
func (c *conn) goAway(reason string, drainTimeout time.Duration, retryAfter time.Duration, hasRetry bool) {
	if c.closing || c.state != stReady {
		return
	}
	m := &protocol.GoAway{ReasonCode: reason, DrainTimeoutMs: uint64(drainTimeout / time.Millisecond),
		RetryAfterMs: uint64(retryAfter / time.Millisecond), HasRetryAfter: hasRetry}
	// §21: arm the drain, then send the observable GOAWAY.
	c.startDrain(seam.Drain{ReasonCode: reason, Deadline: c.clock.Now().Add(drainTimeout), RetryAfter: retryAfter, HasRetryAfter: hasRetry}, drainTimeout)
	// A GOAWAY that cannot be sent has closed the connection (control backpressure,
	// sequence exhaustion): there is nothing left to drain.
	_, _ = c.sendControl(m)
}

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

// localDrain drains without GOAWAY (the peer's local stop, §15.1 ready → draining).
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

func (c *conn) quiesced() {
	if c.state == stDraining && !c.closing {
		c.endDrain()
	}
}

// endDrain closes a drained connection: 1001 for the GOAWAY sender at the deadline or when
// quiesced (§6.3), 1000 for the side that was asked to go.
func (c *conn) endDrain() {
	code := protocol.CloseGoingAway
	if c.drain != nil && (c.drain.Received || c.drain.ReasonCode == "") {
		code = protocol.CloseNormal
	}
	c.closeNow(code, seam.CloseInfo{Code: code, Cause: seam.CauseDrained, GoAway: c.goAwayRecv})
}
