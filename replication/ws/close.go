package ws

import (
	"context"
	"log/slog"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is the close decision: one place where a connection ends, for every reason,
// on the owner goroutine.

// fail closes the connection for a connection protocol error.
func (c *conn) fail(e *protocol.Error) { c.failWith(e, seam.CauseProtocol) }

// failWith sends a best-effort connection ERROR and closes with the close code the error
// registry gives (docs/protocol.md#close-codes). The ERROR is always attempted: WebSocket
// message boundaries keep the framing trustworthy after any error inside a frame.
func (c *conn) failWith(e *protocol.Error, cause seam.CloseCause) {
	if c.closing {
		return
	}
	code := e.CloseCode()
	_, registered := protocol.LookupError(protocol.ScopeConnection, e.Code)
	var errFrame []byte
	if registered {
		m, err := protocol.NewErrorMessage(protocol.ScopeConnection, e.Code, protocol.NamespaceID{}, safeMessage(e.Code))
		if err == nil {
			if e.HasHeader {
				m.WithRelatedSequence(e.Sequence)
			}
			// Encoded with a placeholder sequence: the writer stamps the one that follows the
			// last frame it wrote.
			errFrame, err = c.out.Codec().AppendFrame(nil, 1, m)
		}
		if err != nil {
			// A registered code always builds a valid ERROR; should it not, the close goes
			// ahead without one.
			errFrame = nil
			c.log.LogAttrs(context.Background(), slog.LevelError, "replication connection error frame not encoded",
				slog.String("code", string(e.Code)), slog.String("error", err.Error()))
		}
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "replication connection failed",
		slog.String("side", string(c.side)), slog.String("code", string(e.Code)), slog.String("detail", e.Detail))
	c.teardown(code, errFrame, seam.CloseInfo{Code: code, Error: e.Code, Cause: cause}, false)
	// Reported once the decision has taken effect (docs/protocol.md#delivery-and-clocks).
	if c.em.Enabled() {
		c.em.Emit(observer.ConnectionFailed{ConnectionID: c.connIDOpt(), Code: observer.FoldConnectionCode(string(e.Code)), WSCloseCode: int(code)})
	}
}

// safeMessage is the ERROR's safeMessage: the code, and nothing about the connection.
func safeMessage(code protocol.ErrorCode) string {
	return "connection error " + string(code)
}

// closeNow closes without an ERROR frame: code 0 means the transport is already gone.
func (c *conn) closeNow(code protocol.CloseCode, info seam.CloseInfo) {
	if c.closing {
		return
	}
	if info.Code == 0 {
		info.Code = code
	}
	c.teardown(code, nil, info, info.Cause == seam.CauseDrained)
}

// teardown is the close decision. In order (the connection is invalidated before its
// transport closes, as docs/protocol.md#liveness has it): the connection's epoch ends (no
// timer, pong or inbound frame acts after this point), unsent frames are dropped (unless a
// completed drain flushes what was already handed to the writer), the namespace layer is
// told, and the writer sends errFrame (if any) and closes the transport.
func (c *conn) teardown(code protocol.CloseCode, errFrame []byte, info seam.CloseInfo, flush bool) {
	c.closing = true
	info.Handshook = c.info.Handshook
	if info.GoAway == nil {
		info.GoAway = c.goAwayRecv
	}
	c.info = info
	close(c.stopRead)
	for t := range c.timers {
		t.Stop()
	}
	c.pinger.stop()
	c.setState(stClosed)
	c.w.requestClose(errFrame, code, flush)
	// Bound the close: a writer stuck on a peer that reads nothing is cut off.
	c.closeTimer = c.clock.AfterFunc(c.cfg.CloseTimeout, func() { c.wcancel(); c.ioCancel() })
	for _, q := range c.queues {
		q.items = nil
		q.bytes = 0
		q.inRing, q.parked = false, false
	}
	c.sched = scheduler{}
	if h := c.handler; h != nil {
		// Deferred: the close may be decided inside a handler callback (seam.Session.Fail).
		c.defer_(func() { h.HandleClosed(info) })
	}
	if c.onClosed != nil {
		c.onClosed(c, info)
	}
}

// sequenceExhausted closes a connection whose sending direction used every uint32
// sequence: OUTBOUND_SEQUENCE_EXHAUSTED, a local code with no wire frame
// (docs/protocol.md#sequence-numbers).
func (c *conn) sequenceExhausted() {
	code := protocol.CloseInternal
	c.teardown(code, nil, seam.CloseInfo{Code: code, Error: protocol.CodeOutboundSequenceExhausted, Cause: seam.CauseProtocol}, false)
	if c.em.Enabled() {
		c.em.Emit(observer.ConnectionFailed{ConnectionID: c.connIDOpt(), Code: observer.ConnErrOutboundSequenceExhausted, WSCloseCode: int(code)})
	}
}
