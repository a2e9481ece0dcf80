package ws

import (
	"log/slog"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is what the peer does after a connection ends
// (docs/protocol.md#peer-connection-states): back off and dial again — at the next of its
// hub endpoints —, or block until it is started again or its configuration changes.

// connClosed decides what follows a closed connection: stopped, blocked or backoff, by
// the reason it closed.
func (p *Peer) connClosed(gen uint64, info seam.CloseInfo) {
	if gen != p.gen {
		return
	}
	from := p.state
	defer func() { p.connID = "" }()
	if info.Remote && info.Error != "" && p.em.Enabled() {
		// The hub ended the connection with a connection ERROR: reported like one this
		// side detects, once the decision has taken effect.
		ev := observer.ConnectionFailed{Code: observer.FoldConnectionCode(string(info.Error)), WSCloseCode: int(info.Code)}
		if p.connID != "" {
			ev.ConnectionID = observer.Some(p.connID)
		}
		p.em.Emit(ev)
	}
	if p.stopping {
		p.set(observer.ConnStopped)
		return
	}
	if from == observer.ConnReady || from == observer.ConnDraining {
		// Stable ready for backoffResetAfterMs resets the attempt counter (and ends a run
		// of 1011 closes). A connection that did its work resets the counter sooner
		// (connWorking).
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
		case protocol.GoAwayReauthRequired:
			p.reauthenticate()
		case protocol.GoAwayServerShuttingDown:
			p.log.Warn("replication hub is shutting down and asked this peer to stay away; blocked until start or a configuration change", slog.String("reason", g.ReasonCode))
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
		// The binary says what to fix; this line only records the decision.
		p.log.Debug("replication connection failed for good: blocked",
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

// reauthenticate follows a GOAWAY REAUTH_REQUIRED (the hub revoked the token this
// connection presented, typically because the token was rotated): the peer dials once at
// once, with the token its TokenSource gives now, at the same endpoint, and blocks only if
// that is refused (401/403). The contract blocks at once; but a peer whose new token is
// already in place (a rotation with an overlap, or a file replaced before the hub noticed)
// would then wait for a configuration change it already had. The immediate dial goes
// through backoff with a zero delay, so the states keep the state machine's edges (draining
// → backoff → connecting), and the attempt counter does not grow.
func (p *Peer) reauthenticate() {
	p.log.Debug("replication hub asked for a new authentication: dialing again with the current token")
	p.set(observer.ConnBackoff)
	if p.em.Enabled() {
		p.em.Emit(observer.ConnectionBackoffScheduled{Attempt: p.attempt, DelayMs: 0, Reason: observer.BackoffGoAwayClosed})
	}
	p.dial()
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

// BackoffCap is the ceiling of the next reconnect delay: the protocol's min(maxBackoff,
// base·2^attempt) (docs/protocol.md#backoff), and besides never more than half of down, the
// time the peer has been without a working connection — but at least base. The second bound
// is a departure (see docs/decisions.md): with the exponential alone, a peer that failed its
// dials through a hub outage of a few seconds may draw a delay of many seconds just before
// the hub returns, and a fleet of peers then takes several times the outage to come back.
// With it, the delay a peer adds after an outage is at most half the outage, and the retries
// of a long outage still thin out to one per maxBackoff.
func BackoffCap(base, max time.Duration, attempt int, down time.Duration) time.Duration {
	c := max
	if attempt < 62 && base <= max>>attempt {
		c = base << attempt
	}
	if half := down / 2; half < c {
		c = half
	}
	if c < base {
		c = min(base, max)
	}
	return c
}

// BackoffDelay is the full jitter of docs/protocol.md#backoff: random(0, cap), in whole
// milliseconds, both ends included.
func BackoffDelay(r Rand, cap time.Duration) time.Duration {
	capMs := int64(cap / time.Millisecond)
	return time.Duration(r.Int64N(capMs+1)) * time.Millisecond
}

// failed marks a failure: the outage clock starts if it is not running, and the next dial
// goes to the next endpoint.
func (p *Peer) failed(now time.Time) {
	if p.downSince.IsZero() {
		p.downSince = now
	}
	p.urlIdx = (p.urlIdx + 1) % len(p.urls)
}

// backoff enters backoff and arms the timer that dials again. extra is a GOAWAY's
// retryAfterMs hint, to which the jitter is added.
func (p *Peer) backoff(reason observer.BackoffReason, extra time.Duration) {
	now := p.opts.Clock.Now()
	p.failed(now)
	p.set(observer.ConnBackoff)
	var delay time.Duration
	if p.slowCount >= p.opts.SlowAfter && reason == observer.BackoffConnectionBackpressure {
		// After repeated 1011 closes: a slow cadence and one warning, never blocked. The
		// delay is half to all of maxBackoffMs.
		if p.slowCount == p.opts.SlowAfter {
			p.log.Warn("replication hub keeps failing with 1011; reconnecting at the slow cadence", slog.Int("failures", p.slowCount))
		}
		half := p.cfg.MaxBackoff / 2
		delay = half + BackoffDelay(p.opts.Rand, half)
	} else {
		down := now.Sub(p.downSince)
		if p.opts.ContractBackoff {
			down = p.cfg.MaxBackoff * 2 // no bound but the protocol's
		}
		capD := BackoffCap(p.cfg.BaseBackoff, p.cfg.MaxBackoff, p.attempt, down)
		delay = extra + BackoffDelay(p.opts.Rand, capD)
	}
	p.schedule(reason, delay)
	p.attempt++
}

// retryAfter backs off for a hub that refused the upgrade because it is busy, as its
// Retry-After asked: that long plus a jitter of up to as much again, so that the refused
// peers do not all return at once. The attempt counter does not grow: the hub is there and
// paces its clients itself. The hint is bounded by maxBackoffMs.
func (p *Peer) retryAfter(hint time.Duration) {
	p.failed(p.opts.Clock.Now())
	p.set(observer.ConnBackoff)
	hint = min(hint, p.cfg.MaxBackoff)
	p.schedule(observer.BackoffDialFailed, hint+BackoffDelay(p.opts.Rand, hint))
}

// schedule reports the backoff and arms the timer that dials again after delay.
func (p *Peer) schedule(reason observer.BackoffReason, delay time.Duration) {
	if p.em.Enabled() {
		p.em.Emit(observer.ConnectionBackoffScheduled{Attempt: p.attempt, DelayMs: float64(delay) / float64(time.Millisecond), Reason: reason})
	}
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
