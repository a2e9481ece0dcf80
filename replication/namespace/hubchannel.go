package namespace

import (
	"errors"
	"log/slog"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
)

// hubChannel is a namespace the peer opened on one connection: the shared channel, and what
// only the hub keeps of it.
type hubChannel struct {
	channel
	hc          *hubConn
	openReq     protocol.OpenNamespace // the first OPEN_NAMESPACE
	openWaiting []uint32               // OPEN_NAMESPACE sequences waiting for the shared open
	grant       auth.NamespaceGrant
	mode        protocol.OpenMode
	snapSeq     uint32 // the BOOTSTRAP_SNAPSHOT sequence
	lastRound   uint32 // the highest syncRoundId the peer started on this namespace
}

// newHubChannel is a channel in opening for ns.
func newHubChannel(hc *hubConn, ns protocol.NamespaceID) *hubChannel {
	c := &hubChannel{hc: hc}
	c.init(&hc.nsConn, ns, observer.ChannelOpening, c)
	return c
}

// open takes the peer's OPEN_NAMESPACE (docs/protocol.md#hub-checks): a new channel,
// authorized, then opened in the registry off the connection goroutine.
func (hc *hubConn) open(f protocol.Frame, m *protocol.OpenNamespace) {
	if c := hc.channels[m.NamespaceID]; c != nil {
		hc.reopen(c, f, m)
		return
	}
	c := newHubChannel(hc, m.NamespaceID)
	hc.channels[m.NamespaceID] = c
	hc.h.track(c)
	c.openReq = *m
	c.openWaiting = []uint32{f.Sequence}
	// Authorization first: a refusal says nothing about the namespace.
	grant, ok := hc.s.Authorize(m.NamespaceID)
	if !ok || !grant.Read {
		c.sendError(protocol.CodeNamespaceUnauthorized, 0, observer.FailedOpenFailed)
		return
	}
	c.grant = grant
	c.readOnly = !grant.Submit
	hc.startOpen(c)
}

// reopen answers an OPEN_NAMESPACE for a namespace this connection already has: while
// opening or open it shares the operation and gets its own answer; after the end it is
// NAMESPACE_REOPEN_REQUIRES_RECONNECT, since a connection carries one lifecycle per
// namespace.
func (hc *hubConn) reopen(c *hubChannel, f protocol.Frame, m *protocol.OpenNamespace) {
	same := m.HasLocalReplica == c.openReq.HasLocalReplica && m.ReplicationID == c.openReq.ReplicationID &&
		m.ReplicationEpoch == c.openReq.ReplicationEpoch
	switch {
	case c.ended() || c.closing():
		if hc.sendError(c.ns, protocol.CodeNamespaceReopenRequiresReconnect, f.Sequence) {
			c.terminate(observer.ChannelClosed)
			hc.emitNsError(c.ns, string(protocol.CodeNamespaceReopenRequiresReconnect), observer.DirectionSent)
		}
	case !same:
		// One namespace, one lifecycle: a second OPEN must declare what the first did.
		c.openWaiting = append(c.openWaiting, f.Sequence)
		if c.state == observer.ChannelOpening {
			c.sendError(protocol.CodeNamespaceStateViolation, 0, observer.FailedProtocolViolation)
		} else {
			c.openWaiting = nil
			c.violation(f)
		}
	case c.state == observer.ChannelOpening:
		c.openWaiting = append(c.openWaiting, f.Sequence)
	default:
		// An OPEN_OK that cannot be sent has closed the connection, which ends the channel.
		_, _ = hc.s.Send(&protocol.OpenOK{NamespaceID: c.ns, Mode: c.mode, ReplicationID: c.identity.ReplicationID, ReplicationEpoch: c.identity.Epoch})
	}
}

// startOpen opens the namespace in the registry for the grant's owner, off the connection
// goroutine (a first open loads the document from the store).
func (hc *hubConn) startOpen(c *hubChannel) {
	end := hc.s.BeginWork()
	owner, ns, ctx, reg, hasReplica := c.grant.Owner, c.id, hc.ctx, hc.h.reg, c.openReq.HasLocalReplica
	go func() {
		defer end()
		lease, err := reg.Open(ctx, owner, ns)
		if errors.Is(err, registry.ErrNotFound) && (hc.h.ownerMismatch != nil || hc.h.missing != nil) {
			other, ok, oerr := reg.OwnerOf(ctx, ns)
			switch {
			case ok && other != owner && hc.h.ownerMismatch != nil:
				hc.h.ownerMismatch(hc.s.PeerInstanceID(), ns, owner, other)
			case !ok && oerr == nil && hc.h.missing != nil:
				hc.h.missing(hc.s.PeerInstanceID(), ns, hasReplica)
			}
		}
		if !hc.s.Post(func() { hc.opened(c, lease, err) }) && lease != nil {
			lease.Release()
		}
	}()
}

// opened takes the registry's open, then opens the replication session: comparing the
// identities for a reconciliation, encoding the snapshot for a bootstrap.
func (hc *hubConn) opened(c *hubChannel, lease *registry.Lease, err error) {
	if c.state != observer.ChannelOpening {
		if lease != nil {
			lease.Release()
		}
		return
	}
	switch {
	case errors.Is(err, registry.ErrNotFound):
		c.sendError(protocol.CodeNamespaceNotFound, 0, observer.FailedOpenFailed)
		return
	case errors.Is(err, registry.ErrDeleted):
		c.sendError(hc.deletedCode(), 0, observer.FailedOpenFailed)
		return
	case err != nil:
		hc.h.log.Warn("replication namespace open failed", slog.String("namespaceId", c.id), slog.String("error", err.Error()))
		c.sendError(openErrorCode(err), 0, observer.FailedOpenFailed)
		return
	case hc.draining():
		lease.Release()
		c.sendError(protocol.CodeNamespaceReopenRequiresReconnect, 0, observer.FailedOpenFailed)
		return
	}
	c.lease = lease
	opts := c.sessionOptions()
	c.mode = protocol.ModeBootstrap
	if c.openReq.HasLocalReplica {
		// The identity is compared in the slot that opens the session.
		c.mode = protocol.ModeReconcile
		opts.Expect = &registry.Identity{ReplicationID: c.openReq.ReplicationID, Epoch: c.openReq.ReplicationEpoch}
	} else {
		// The snapshot is encoded in the same slot, so the session's update stream starts
		// exactly after it.
		opts.Snapshot = true
	}
	post := hc.s.Post
	err = lease.OpenSessionAsync(opts, func(sess *registry.Session, st registry.SessionStart, err error) {
		if !post(func() { hc.sessionOpened(c, sess, st, err) }) && sess != nil {
			sess.Close()
		}
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSessionOpenFailed)
	}
}

// sessionOpened answers every waiting OPEN with OPEN_OK and then reconciles, or sends the
// snapshot and waits for BOOTSTRAP_ACK within bootstrapTimeoutMs.
func (hc *hubConn) sessionOpened(c *hubChannel, sess *registry.Session, st registry.SessionStart, err error) {
	if c.state != observer.ChannelOpening {
		if sess != nil {
			sess.Close()
		}
		return
	}
	switch {
	case err != nil:
		// A mismatch ends conflicted, so the cause concerns only a failed end.
		c.sendError(openErrorCode(err), 0, observer.FailedSessionOpenFailed)
		return
	case hc.draining():
		sess.Close()
		c.sendError(protocol.CodeNamespaceReopenRequiresReconnect, 0, observer.FailedOpenFailed)
		return
	case c.mode == protocol.ModeBootstrap && len(st.Snapshot) > hc.cfg.MaxBootstrapBytes && !hc.chunked():
		// Without CAP_CHUNKED_UPDATE the snapshot cannot travel.
		sess.Close()
		c.sendError(protocol.CodeBootstrapTooLarge, 0, observer.FailedSendFailed)
		return
	case c.mode == protocol.ModeBootstrap && tooManyChunks(hc.cfg, protocol.KindSnapshot, len(st.Snapshot)):
		// Over the chunked snapshot caps too.
		sess.Close()
		c.sendError(protocol.CodeSnapshotTransferTooLarge, 0, observer.FailedSendFailed)
		return
	}
	c.identity = st.Identity
	for range c.openWaiting {
		if _, err := hc.s.Send(&protocol.OpenOK{NamespaceID: c.ns, Mode: c.mode, ReplicationID: st.Identity.ReplicationID, ReplicationEpoch: st.Identity.Epoch}); err != nil {
			sess.Close()
			return
		}
	}
	c.openWaiting = nil
	c.attach(sess)
	if c.mode == protocol.ModeReconcile {
		c.setState(observer.ChannelReconciling) // the peer's Step1 opens the round
		return
	}
	if len(st.Snapshot) > hc.cfg.MaxBootstrapBytes {
		// A chunked snapshot (docs/protocol.md#bootstrap-steps): one chunk per turn of the
		// data lane, sliced as it goes; its last chunk is what BOOTSTRAP_ACK names.
		bind := protocol.Binding{ReplicationID: st.Identity.ReplicationID, ReplicationEpoch: st.Identity.Epoch}
		if !c.queueBulk(protocol.KindSnapshot, st.Snapshot, bind, func(seq uint32) bool {
			if c.state != observer.ChannelBootstrapping {
				return false
			}
			c.snapSeq = seq
			c.armBootstrapTimer() // the peer has bootstrapTimeoutMs from the last chunk
			return true
		}) {
			return
		}
	} else {
		seq, err := hc.s.Send(&protocol.BootstrapSnapshot{NamespaceID: c.ns, ReplicationID: st.Identity.ReplicationID,
			ReplicationEpoch: st.Identity.Epoch, Snapshot: st.Snapshot})
		if err != nil {
			c.sendFailed(err)
			return
		}
		c.snapSeq = seq
		if hc.em.Enabled() {
			hc.em.Emit(observer.BootstrapSnapshotSent{ConnectionID: hc.connID(), NamespaceID: c.id, Bytes: len(st.Snapshot)})
		}
	}
	c.setState(observer.ChannelBootstrapping)
	c.armBootstrapTimer()
}

// armBootstrapTimer (re)arms the bootstrap timer (docs/protocol.md#bootstrap): the peer has
// bootstrapTimeoutMs to acknowledge the snapshot, or the namespace fails (bootstrap-timeout,
// no wire frame). While a chunked snapshot is being sent (its first chunk has left, its last
// not yet) the timer does not end the bootstrap but is armed again, and its last chunk arms
// it afresh: a large snapshot on a slow link may take longer than bootstrapTimeoutMs to
// leave. This layer sees only the first and the last chunk leave, not the ones between; a
// transfer that stops moving is ended by the connection's liveness (nothing moves on it) or
// by the peer, whose assembly times out and rebuilds the connection. A single-frame
// snapshot, or a chunked one not started, times out as queued.
func (c *hubChannel) armBootstrapTimer() {
	stopTimer(&c.timer)
	d := c.n.cfg.BootstrapTimeout
	c.timer = c.n.s.AfterFunc(d, func() {
		c.timer = nil
		switch {
		case c.state != observer.ChannelBootstrapping:
		case c.snapSeq == 0 && c.bulkStarted:
			c.armBootstrapTimer() // the snapshot is still leaving
		default:
			c.failed(protocol.CodeNamespaceTimeout, observer.FailedBootstrapTimeout, d)
		}
	})
}

// bootstrapAck: the peer imported the snapshot and opened its session
// (docs/protocol.md#bootstrap_ack); its Step1 follows.
func (c *hubChannel) bootstrapAck(f protocol.Frame, m *protocol.BootstrapAck) {
	switch {
	case c.ended() || c.closing():
		return
	case c.state != observer.ChannelBootstrapping || c.snapSeq == 0 || m.AckedSequence != c.snapSeq:
		c.violation(f)
		return
	}
	stopTimer(&c.timer)
	if b, ok := c.bulkAcked(m.AckedSequence); ok && c.n.em.Enabled() {
		c.n.em.Emit(observer.ChunkedSnapshotAcked{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: b.bytes,
			AckLatencyMs: c.n.em.SinceMs(b.sentAt)})
	}
	c.setState(observer.ChannelReconciling)
}

// step1 answers the peer's Step1, which opens a round: the hub's Step2 (the diff
// the peer lacks) and the hub's own Step1.
func (c *hubChannel) step1(f protocol.Frame, m *protocol.SyncStep1) {
	switch c.state {
	case observer.ChannelOpening, observer.ChannelBootstrapping:
		c.violation(f) // before OPEN_OK or the BOOTSTRAP_ACK
		return
	}
	if c.round.active || m.SyncRoundID <= c.lastRound {
		c.violation(f) // a second Step1 in the round, or a round id that does not increase
		return
	}
	c.lastRound = m.SyncRoundID
	c.beginRound(m.SyncRoundID)
	c.round.theirStep1 = f.Sequence
	id := m.SyncRoundID
	c.answerStep1(id, m.StateVector)
	post := c.n.s.Post
	err := c.sess.StateVectorAsync(func(sv []byte, err error) {
		post(func() {
			if c.ended() || c.closing() || !c.round.active || c.round.id != id {
				return
			}
			if err != nil {
				c.applyFailed(err, 0)
				return
			}
			c.sendStep1(sv)
		})
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
	}
}

// fenced: an epoch bump fenced the session (docs/protocol.md#identity-fencing):
// IDENTITY_CHANGED, and the channel ends conflicted.
func (c *hubChannel) fenced(id registry.Identity) {
	if c.ended() {
		return
	}
	if _, err := c.n.s.Send(&protocol.IdentityChanged{NamespaceID: c.ns, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch}); err != nil {
		return
	}
	c.terminate(observer.ChannelConflicted)
	c.n.emitNsError(c.ns, string(observer.NsErrIdentityChanged), observer.DirectionSent)
	c.emitConflicted(observer.ViaFence)
}

// owesOpenAnswers: OPENs wait for the shared open to finish.
func (c *hubChannel) owesOpenAnswers() bool { return len(c.openWaiting) > 0 }

// takeOpenAnswers hands the waiting OPENs to an error that answers them all.
func (c *hubChannel) takeOpenAnswers() []uint32 {
	open := c.openWaiting
	c.openWaiting = nil
	return open
}

// changed keeps the admin API's view of the channel current.
func (c *hubChannel) changed(observer.ChannelState) { c.hc.h.track(c) }

// drainOpening: an open under way is answered NAMESPACE_REOPEN_REQUIRES_RECONNECT when it
// completes.
func (c *hubChannel) drainOpening() {}

// The hub never starts a round (the peer does) and keeps nothing once a channel ends.
func (c *hubChannel) wentLive()                {}
func (c *hubChannel) resyncReady()             {}
func (c *hubChannel) stopPeriodic()            {}
func (c *hubChannel) conflicted()              {}
func (c *hubChannel) released(<-chan struct{}) {}

// schemaRearmed: never on the hub — its protected check refuses every peer change to meta.
func (c *hubChannel) schemaRearmed(*registry.SchemaRearm) {}

// snapshotChunk: snapshots go from the hub to the peer only.
func (c *hubChannel) snapshotChunk(f protocol.Frame) (protocol.Binding, bool) {
	c.violation(f)
	return protocol.Binding{}, false
}

// The hub takes no snapshot, and shows no inbound progress.
func (c *hubChannel) snapshotStarted()                                      {}
func (c *hubChannel) snapshotAssembled(protocol.Transfer, *inboundTransfer) {}
func (c *hubChannel) snapshotExpired()                                      {}
func (c *hubChannel) progress(*TransferProgress)                            {}

// The hub keeps no ledger of local writes: it is where they replicate to.
func (c *hubChannel) localMark() int64   { return 0 }
func (c *hubChannel) confirmLocal(int64) {}
