package ws

import (
	"log/slog"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is what the peer does after a connection ends (§15.1): back off and dial
// again, or block until it is started again or its configuration changes.

// connClosed decides what follows a closed connection: stopped, blocked or backoff, by
// the reason it closed.
func (p *Peer) connClosed(gen uint64, info seam.CloseInfo) {
	if gen != p.gen {
		return
	}
	from := p.state
	defer func() { p.connID = "" }()
	if p.stopping {
		p.set(observer.ConnStopped)
		return
	}
	if from == observer.ConnReady || from == observer.ConnDraining {
		// The attempt counter resets only after backoffResetAfterMs of stable ready.
		if p.opts.Clock.Now().Sub(p.readyAt) >= p.cfg.BackoffResetAfter {
			p.attempt, p.slowCount = 0, 0
		}
	}
	if info.Cause == seam.CauseReconnect {
		p.backoff(observer.BackoffNamespaceRecovery, 0)
		return
	}
	if g := info.GoAway; g != nil {
		switch g.ReasonCode {
		case protocol.GoAwayServerRestarting:
			if g.HasRetryAfter {
				p.backoff(observer.BackoffGoAwayRetryHint, g.RetryAfter)
			} else {
				p.backoff(observer.BackoffGoAwayClosed, 0)
			}
		case protocol.GoAwayServerShuttingDown, protocol.GoAwayReauthRequired:
			p.log.Warn("replication hub asked this peer to stay away; blocked until start or a configuration change", slog.String("reason", g.ReasonCode))
			p.set(observer.ConnBlocked)
		default:
			p.backoff(observer.BackoffGoAwayClosed, 0)
		}
		return
	}
	switch info.Cause {
	case seam.CauseHelloTimeout:
		p.backoff(observer.BackoffHelloTimeout, 0)
		return
	case seam.CausePongTimeout:
		p.backoff(observer.BackoffPongTimeout, 0)
		return
	}
	if permanent(info) {
		p.log.Warn("replication connection failed permanently; blocked until start or a configuration change",
			slog.String("code", string(info.Error)), slog.Int("wsCloseCode", int(info.Code)))
		p.set(observer.ConnBlocked)
		return
	}
	if info.Code == protocol.CloseInternal {
		p.slowCount++
		p.backoff(observer.BackoffConnectionBackpressure, 0)
		return
	}
	p.backoff(observer.BackoffSocketClosed, 0)
}

// permanent reports a close that retrying cannot cure, which blocks the peer: a connection
// error whose registry retry is "no" or "config" (FRAME_TOO_LARGE's 1009 included) and,
// without an error, the close codes 1002, 1008 and 1009. 1011 and transport losses back off.
func permanent(info seam.CloseInfo) bool {
	if info.Error != "" {
		if spec, ok := protocol.LookupError(protocol.ScopeConnection, info.Error); ok {
			return spec.Retry == protocol.RetryNo || spec.Retry == protocol.RetryConfig
		}
		return false
	}
	switch info.Code {
	case protocol.CloseProtocolError, protocol.ClosePolicy, protocol.CloseTooBig:
		return true
	}
	return false
}

// BackoffDelay is the full-jitter delay of §15.1: random(0, min(maxBackoff,
// base·2^attempt)), in whole milliseconds, both ends included.
func BackoffDelay(r Rand, base, max time.Duration, attempt int) time.Duration {
	capMs := int64(max / time.Millisecond)
	baseMs := int64(base / time.Millisecond)
	if attempt < 62 && baseMs <= capMs>>attempt {
		capMs = baseMs << attempt
	}
	return time.Duration(r.Int64N(capMs+1)) * time.Millisecond
}

// backoff enters backoff and arms the timer that dials again. extra is a GOAWAY's
// retryAfterMs hint, to which the jitter is added.
func (p *Peer) backoff(reason observer.BackoffReason, extra time.Duration) {
	p.set(observer.ConnBackoff)
	var delay time.Duration
	if p.slowCount >= p.opts.SlowAfter && reason == observer.BackoffConnectionBackpressure {
		// After repeated 1011 closes: a slow cadence and one warning, never blocked. The
		// delay is half to all of maxBackoffMs.
		if p.slowCount == p.opts.SlowAfter {
			p.log.Warn("replication hub keeps failing with 1011; reconnecting at the slow cadence", slog.Int("failures", p.slowCount))
		}
		half := p.cfg.MaxBackoff / 2
		delay = half + BackoffDelay(p.opts.Rand, half, half, 0)
	} else {
		delay = extra + BackoffDelay(p.opts.Rand, p.cfg.BaseBackoff, p.cfg.MaxBackoff, p.attempt)
	}
	if p.em.Enabled() {
		p.em.Emit(observer.ConnectionBackoffScheduled{Attempt: p.attempt, DelayMs: float64(delay) / float64(time.Millisecond), Reason: reason})
	}
	p.attempt++
	p.timerGen++
	tg := p.timerGen
	p.timer = p.opts.Clock.AfterFunc(delay, func() {
		p.post(func() {
			if tg == p.timerGen && p.state == observer.ConnBackoff {
				p.timer = nil
				p.dial()
			}
		})
	})
}
