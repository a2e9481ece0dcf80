package ws

import (
	"context"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// liveness runs WebSocket ping/pong on a ready connection (§17, §18): a ping every
// pingIntervalMs, and a pong timeout of pongTimeoutMs. Only the transport's Ping returning
// nil (a pong echoing the outstanding ping's payload) clears the timeout. Its fields are the
// owner goroutine's; each Ping runs in a short-lived goroutine of its own that posts its
// result back.
type liveness struct {
	c         *conn
	running   bool // a Ping call is out
	gen       uint64
	pingTimer *timer
	pongTimer *timer
	planned   observer.Opt[time.Time]
	cancel    context.CancelFunc
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
	l.pongTimer = c.after(c.cfg.PongTimeout, l.timedOut)
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
