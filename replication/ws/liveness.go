package ws

import (
	"context"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// liveness runs WebSocket ping/pong on a ready connection (docs/protocol.md#liveness): a
// ping every pingIntervalMs, and a pong timeout of pongTimeoutMs. Only the transport's Ping
// returning nil (a pong echoing the outstanding ping's payload) clears the timeout. Its
// fields are the owner goroutine's; each Ping runs in a short-lived goroutine of its own
// that posts its result back.
//
// A pong travels behind whatever data was written before it, in both directions: on a
// slow link that is busy (100 KB/s with megabytes queued) it can take longer than
// pongTimeoutMs although the link is delivering all along. So when the pong timeout fires
// and bytes have moved on the connection since the ping left (or since the last such
// check), the link is alive and the timeout is armed again for another pongTimeoutMs; only
// a window in which nothing moved at all closes the connection. Moved means read from the
// remote, taken by the socket, or — on Linux, over TCP — acknowledged by the remote's TCP
// (movedBytes). The last matters once the last bytes have been written: the kernel's send
// buffer, which Linux grows to megabytes on a fast-to-fill slow link, may hold many pong
// timeouts' worth of data that nothing else would show leaving. A link buffering more than
// pongTimeoutMs of data beyond the sender's socket (in a router or a userspace proxy) still
// shows nothing while that drains, and can time out.
//
// An idle link moves nothing but the ping, so there the rule is the contract's as written;
// a stall (nothing read, nothing taken, nothing acknowledged) is detected within
// pingIntervalMs + pongTimeoutMs, or 2 × pongTimeoutMs after the last byte moved when a ping
// was already out. See docs/decisions.md, "Liveness on slow links".
type liveness struct {
	c         *conn
	running   bool // a Ping call is out
	gen       uint64
	pingTimer *timer
	pongTimer *timer
	planned   observer.Opt[time.Time]
	cancel    context.CancelFunc
	moved     int64 // c.movedBytes() when the ping left or the timeout was last extended
}

// arm schedules the next ping.
func (l *liveness) arm() {
	c := l.c
	// The planned time is read only for event-loop-delay-sampled, so only with an observer.
	l.planned = c.em.Now()
	if p, ok := l.planned.Get(); ok {
		l.planned = observer.Some(p.Add(c.cfg.PingInterval))
	}
	l.pingTimer = c.after(c.cfg.PingInterval, l.fire)
}

// fire sends a ping unless one is still out, and arms the pong timeout for it.
func (l *liveness) fire() {
	c := l.c
	if p, ok := l.planned.Get(); ok && c.em.Enabled() {
		if d, ok := c.em.SinceMs(observer.Some(p)).Get(); ok {
			c.em.Emit(observer.EventLoopDelaySampled{ConnectionID: c.connIDOpt(), DelayMs: d})
		}
	}
	l.arm()
	if l.running {
		return
	}
	l.gen++
	gen := l.gen
	ctx, cancel := context.WithCancel(c.ioCtx)
	l.cancel, l.running = cancel, true
	l.moved = c.movedBytes()
	l.pongTimer = c.after(c.cfg.PongTimeout, l.pongDue)
	sent := c.clock.Now()
	go func() {
		err := c.t.Ping(ctx)
		c.post(func() {
			l.running = false
			cancel()
			if err == nil && gen == l.gen && !c.closing {
				l.pongTimer.Stop()
				c.pub.pingRTT.Store(max(int64(c.clock.Now().Sub(sent)), 1))
			}
		})
	}()
}

// pongDue runs when the pong is pongTimeoutMs late: a link that moved bytes meanwhile gets
// another pongTimeoutMs; one that moved nothing has timed out.
func (l *liveness) pongDue() {
	c := l.c
	if m := c.movedBytes(); m != l.moved && !c.closing {
		l.moved = m
		l.pongTimer = c.after(c.cfg.PongTimeout, l.pongDue)
		return
	}
	l.timedOut()
}

// movedBytes is the connection's measure of progress; it changes whenever something moved.
// It counts every byte this connection has read or written — the transport's count of
// socket bytes when it keeps one (it sees a large frame move piece by piece), plus whole
// messages read and, on a transport that keeps no count, frames handed to it — and the
// bytes the remote's TCP has acknowledged, when the transport can tell: written bytes
// still in the kernel's send buffer count when they are delivered, not only when the
// socket took them.
func (c *conn) movedBytes() int64 {
	n := c.progress.Load()
	if p, ok := c.t.(interface{ socketBytes() int64 }); ok {
		n += p.socketBytes()
	}
	if p, ok := c.t.(interface{ ackedBytes() int64 }); ok {
		n += p.ackedBytes()
	}
	return n
}

// timedOut handles a pong timeout as a temporary failure: liveness stops first, then the
// connection's epoch ends, then the transport closes with 1001.
func (l *liveness) timedOut() {
	c := l.c
	if c.closing {
		return
	}
	l.stop()
	code := protocol.CloseGoingAway
	c.teardown(code, nil, seam.CloseInfo{Code: code, Error: protocol.CodePongTimeout, Cause: seam.CausePongTimeout}, false)
	if c.em.Enabled() {
		c.em.Emit(observer.ConnectionFailed{ConnectionID: c.connIDOpt(), Code: observer.ConnErrPongTimeout, WSCloseCode: int(code)})
	}
}

// stop cancels the ping out, if any, and both timers.
func (l *liveness) stop() {
	l.gen++
	if l.cancel != nil {
		l.cancel()
	}
	l.pingTimer.Stop()
	l.pongTimer.Stop()
}
