package namespace

import (
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is how the peer recovers a target whose namespace failed (a failed namespace
// waits for a new connection or a configuration change: docs/protocol.md#failed-targets):
// the failure is classified by its code's retry class in the error registry
// (docs/protocol.md#namespace-errors), recorded on the target with the operator's
// next step, and — unless retrying cannot help — tried again on a timer with backoff. A
// namespace has one lifecycle per connection, so a retry of a namespace that failed on the
// current connection rebuilds the connection (namespace recovery, as for the open,
// bootstrap and reconcile timers); every new connection, whatever made it, opens the
// failed targets again.

// Recovery says whether, and when, a failed target is replicated again.
type Recovery string

const (
	// RecoveryAutomatic: a cause that heals by itself — a remote or internal error, a
	// timeout, persistence degraded on the hub (a lost store or cluster quorum). Retried with
	// backoff from RetryBase up to RetryMax (a timer's first retry at once).
	RecoveryAutomatic Recovery = "automatic"
	// RecoveryAfterConfig: a cause an operator removes by changing a limit, a grant, the
	// generation or the namespace itself (size caps, NAMESPACE_NOT_FOUND,
	// NAMESPACE_UNAUTHORIZED). Retried with a slower backoff (ConfigRetryBase up to
	// ConfigRetryMax), and on every new connection — a restart with the new configuration
	// makes one.
	RecoveryAfterConfig Recovery = "after-config"
	// RecoveryNone: a protocol or policy violation (the registry's retry "no"): retrying
	// cannot help. Not retried by itself; opened again only when the connection is rebuilt
	// for another reason (a restart). The way out is a reset or a fix.
	RecoveryNone Recovery = "none"
)

// Backoff of the retries of failed targets: full doubling from the base, with "equal
// jitter" (a delay between half and all of the step), so that retries of one target are
// never closer than half a step and targets that failed together spread out.
const (
	RetryBase       = time.Second
	RetryMax        = time.Minute
	ConfigRetryBase = 15 * time.Second
	ConfigRetryMax  = 10 * time.Minute
)

// TargetFailure is why a target's namespace failed, and what happens next.
type TargetFailure struct {
	// Code is the namespace error code that ended it, sent by the hub (Remote) or by
	// this peer; a local open, bootstrap or reconcile timeout is NAMESPACE_TIMEOUT.
	Code   string
	Remote bool
	// Cause is the namespace-failed cause.
	Cause observer.FailedCause
	// Recovery says whether and how it is retried.
	Recovery Recovery
	// Attempts counts the failures in a row (since the target was last live).
	Attempts int
	// RetryAt is when it is tried again by itself (zero for RecoveryNone). A time in the
	// past means at the next connection.
	RetryAt time.Time
}

// Heals reports whether the failure is retried by itself.
func (f *TargetFailure) Heals() bool { return f.Recovery != RecoveryNone }

// RecoveryOf classifies a failure by its code's retry class: reconnect, recovery
// and unknown codes heal by themselves, config needs a change, no does not heal.
func RecoveryOf(code protocol.ErrorCode) Recovery {
	spec, ok := protocol.LookupError(protocol.ScopeNamespace, code)
	if !ok {
		return RecoveryAutomatic // a newer hub's code: retrying is the safe guess
	}
	switch spec.Retry {
	case protocol.RetryConfig:
		return RecoveryAfterConfig
	case protocol.RetryNo:
		return RecoveryNone
	}
	return RecoveryAutomatic
}

// retryDelay is the wait before retry number attempt (1: the first) of a failure of class
// r; rnd(n) draws in [0, n). A timer's first retry is at once: the connection is rebuilt as
// soon as an open, bootstrap or reconcile timer fails a wanted target.
func retryDelay(r Recovery, attempt int, timer bool, rnd func(int64) int64) time.Duration {
	base, top := RetryBase, RetryMax
	switch r {
	case RecoveryNone:
		return -1
	case RecoveryAfterConfig:
		base, top = ConfigRetryBase, ConfigRetryMax
	default:
		if timer && attempt <= 1 {
			return 0
		}
	}
	step := top
	if n := attempt - 1; n < 32 && base<<n < top && base<<n > 0 {
		step = base << n
	}
	half := step / 2
	return half + time.Duration(rnd(int64(half)+1))
}

// targetFailed records the failure of channel c on its target and schedules its retry. It
// runs on the connection's goroutine, when the channel has just ended failed.
func (pc *peerConn) targetFailed(c *peerChannel) {
	tc, tg := pc.tc, c.target
	code := c.endCode
	if code == "" {
		code = protocol.CodeInternalError
	}
	r := RecoveryOf(code)
	if c.noRetry {
		r = RecoveryNone
	}
	now := pc.s.Clock().Now()
	tc.mu.Lock()
	if tg.removed {
		tc.mu.Unlock()
		return
	}
	attempts := 1
	if tg.failure != nil {
		attempts = tg.failure.Attempts + 1
	}
	delay := retryDelay(r, attempts, c.endCause.Timer(), tc.rnd)
	f := &TargetFailure{Code: string(code), Remote: c.endRemote, Cause: c.endCause, Recovery: r, Attempts: attempts}
	if delay >= 0 {
		f.RetryAt = now.Add(delay)
	}
	tg.failure = f
	tg.failGen++
	gen := tg.failGen
	tc.mu.Unlock()
	if delay < 0 {
		return
	}
	// After the current call: the channel is still terminating.
	retry := func() { pc.retryDue(tg, gen) }
	if delay == 0 {
		pc.s.Post(retry)
		return
	}
	pc.s.AfterFunc(delay, retry)
}

// retryDue retries a failed target whose time has come, unless it was removed, failed again
// or recovered meanwhile: on this connection if the namespace had no lifecycle here yet,
// else on a new connection.
func (pc *peerConn) retryDue(tg *target, gen uint64) {
	tc := pc.tc
	tc.mu.Lock()
	due := !tg.removed && tg.failGen == gen && tg.failure != nil && tg.state == observer.ChannelFailed
	tc.mu.Unlock()
	if !due || pc.closed || pc.draining() {
		return
	}
	if c := pc.channels[tg.ns]; c == nil || c.target != tg {
		pc.targetAdded(tg)
		return
	}
	pc.reconnect()
}
