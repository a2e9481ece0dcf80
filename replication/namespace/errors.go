package namespace

import (
	"errors"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is how the namespace layer answers errors: the remote's namespace ERRORs, and
// the registry's refusals turned into namespace errors (docs/protocol.md#namespace-errors).

// remoteError handles the remote's namespace ERROR: a fatal one ends the channel in the
// state the error registry gives; a non-fatal one (ACK_TIMEOUT) asks for a resync.
func (c *channel) remoteError(f protocol.Frame, m *protocol.ErrorMessage) {
	switch {
	case c.ended():
		return
	case c.role.owesOpenAnswers():
		// The hub still owes the peer its OPEN answer: an ERROR now breaks the open.
		c.n.emitNsError(c.ns, string(m.Code), observer.DirectionReceived)
		c.violation(f)
		return
	}
	spec, known := m.Spec()
	if (known && !spec.Fatal) || (!known && !m.Fatal) {
		c.n.emitNsError(c.ns, string(m.Code), observer.DirectionReceived)
		// ACK_TIMEOUT: the remote stopped waiting for our acknowledgements and needs a new
		// round.
		if known && c.sess != nil && !c.closing() {
			c.resyncRequired(f)
		}
		return
	}
	to := observer.ChannelFailed
	if known {
		to = terminalOf(m.Code)
	}
	c.setEnd(m.Code, true, observer.FailedRemoteError)
	c.terminate(to)
	c.n.emitNsError(c.ns, string(m.Code), observer.DirectionReceived)
	c.reportEnd(to, observer.FailedRemoteError, observer.ViaOpenMismatch)
	if m.Code == protocol.CodeNamespaceDeleted {
		if pch, ok := c.role.(*peerChannel); ok {
			pch.pc.tc.hubDeleted(pch.target)
		}
	}
}

// deletedCode is the code that tells the peer its namespace was deleted: NAMESPACE_DELETED
// where the connection selected the namespace-deletion extension, else the contract's
// NAMESPACE_NOT_FOUND (docs/protocol.md#namespace-deletion).
func (n *nsConn) deletedCode() protocol.ErrorCode {
	if n.s.Negotiated().NamespaceDeleted() {
		return protocol.CodeNamespaceDeleted
	}
	return protocol.CodeNamespaceNotFound
}

// applyFailed answers an apply (an UPDATE or a Step2 diff) the registry refused: a fenced
// session, a refused write (protected meta, a read-only session, a degraded store), an
// update that does not apply.
func (c *channel) applyFailed(err error, rel uint32) {
	switch {
	case errors.Is(err, registry.ErrFenced):
		if c.lease != nil {
			c.role.fenced(c.lease.Identity())
		}
		return
	case errors.Is(err, registry.ErrProtected), errors.Is(err, registry.ErrRoleViolation), errors.Is(err, registry.ErrDegraded):
		c.sendError(protocol.ErrorCode(registry.CodeOf(err)), rel, observer.FailedApplyRefused)
	case errors.Is(err, registry.ErrDeleted):
		c.sendError(c.n.deletedCode(), rel, observer.FailedApplyRefused)
	case errors.Is(err, registry.ErrApplyFailed):
		c.sendError(protocol.CodeApplyFailed, rel, observer.FailedApplyRejected)
	default:
		c.sendError(protocol.CodeInternalError, rel, observer.FailedApplyRejected)
	}
}

// openErrorCode answers a namespace open, a session open or a bootstrap import the registry
// refused: an identity mismatch or a refused import keeps its code, a store that cannot
// answer now (a hub cluster without quorum, or whose log is not reachable) is
// PERSISTENCE_DEGRADED — the peer retries once it recovers
// (docs/protocol.md#degraded-persistence) — and anything else is INTERNAL_ERROR.
func openErrorCode(err error) protocol.ErrorCode {
	switch {
	case errors.Is(err, registry.ErrIDMismatch):
		return protocol.CodeReplicationIDMismatch
	case errors.Is(err, registry.ErrEpochMismatch):
		return protocol.CodeReplicationEpochMismatch
	case errors.Is(err, registry.ErrBootstrapFailed):
		return protocol.CodeBootstrapFailed
	case errors.Is(err, registry.ErrDegraded):
		return protocol.CodePersistenceDegraded
	}
	return protocol.CodeInternalError
}
