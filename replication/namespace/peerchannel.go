package namespace

import (
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// peerChannel is a target taken up on one connection: the shared channel, and what only the
// peer keeps of it. Like the channel, it lives on the connection's owner goroutine.
type peerChannel struct {
	channel
	pc             *peerConn
	target         *target
	declared       *registry.Identity // the local replica OPEN_NAMESPACE declared; nil: bootstrap
	openSent       bool
	closeAfterOpen string // a CLOSE reason to send as soon as OPEN_OK arrives
	gotSnapshot    bool
	snapChunks     int           // chunks of the chunked snapshot received (the bootstrap timer slides)
	snapSeq        uint32        // the BOOTSTRAP_SNAPSHOT sequence, acknowledged once imported
	opDone         chan struct{} // closed when the registry call off the connection goroutine is done
	periodic       seam.Timer    // the periodic reconciliation
	noRetry        bool          // the failure cannot heal whatever its code says (an invalid schema)
}

// step1 takes the hub's half of the round this peer started.
func (c *peerChannel) step1(f protocol.Frame, m *protocol.SyncStep1) {
	r := &c.round
	if !r.active || r.myStep1 == 0 || m.SyncRoundID != r.id || r.theirStep1 != 0 {
		c.violation(f) // the hub does not start rounds, and sends one Step1 per round
		return
	}
	r.theirStep1 = f.Sequence
	c.answerStep1(r.id, m.StateVector)
}

func (c *peerChannel) fenced(registry.Identity) {} // a peer's sessions are not fenced

// The peer receives OPEN_NAMESPACE from nobody: it owes no OPEN answer.
func (c *peerChannel) owesOpenAnswers() bool     { return false }
func (c *peerChannel) takeOpenAnswers() []uint32 { return nil }

// drainOpening: a channel waiting for OPEN_OK closes once it arrives; one whose OPEN was not
// sent yet ends when its local open returns.
func (c *peerChannel) drainOpening() {
	if c.openSent {
		c.closeAfterOpen = closeReasonDrain
	}
}

func (c *peerChannel) changed(from observer.ChannelState) {
	pc := c.pc
	pc.tc.publish(c.target, c.state, c.identity)
	if c.state == observer.ChannelFailed {
		pc.targetFailed(c)
	}
	if (from == observer.ChannelOpening || from == observer.ChannelBootstrapping) && c.state != observer.ChannelBootstrapping {
		// Opened (reconciling), failed, closed or disconnected: the next target may open.
		pc.opening--
		pc.openNext()
	}
	pc.checkWorking()
}

// wentLive arms the periodic reconciliation (docs/protocol.md#periodic-reconciliation): one
// one-shot timer, armed after a round.
func (c *peerChannel) wentLive() {
	c.stopPeriodic()
	c.periodic = c.n.s.AfterFunc(c.n.cfg.ReconcileInterval, func() {
		c.periodic = nil
		if c.state == observer.ChannelLive {
			c.pc.startRound(c)
		}
	})
}

// resyncReady starts the round a resync asked for, once the window is empty.
func (c *peerChannel) resyncReady() {
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.pc.startRound(c)
	}
}

// stopPeriodic stops the periodic reconciliation.
func (c *peerChannel) stopPeriodic() { stopTimer(&c.periodic) }

// conflicted sticks to the target until it is reset.
func (c *peerChannel) conflicted() { c.target.setConflicted() }

func (c *peerChannel) released(settled <-chan struct{}) {
	tc := c.pc.tc
	tc.mu.Lock()
	tg := c.target
	tg.waits = []<-chan struct{}{settled}
	if c.opDone != nil {
		tg.waits = append(tg.waits, c.opDone)
	}
	removed := tg.removed
	tc.mu.Unlock()
	if removed {
		tc.cleanedUp(tg)
	}
}

// schemaRearmed reports a re-arm of the replicated schema
// (docs/protocol.md#document-layout): one schema-rearm-applied per install; on the first
// failure one schema-rearm-failed, and the namespace closes itself with CLOSE_NAMESPACE
// (closed, not reopened by a reconnect). The close is behaviour and happens without an
// observer too. No clock is read and no schema text leaves the registry.
func (c *peerChannel) schemaRearmed(r *registry.SchemaRearm) {
	em := c.n.em
	if s := r.Installed; s != nil {
		if em.Enabled() {
			ev := observer.SchemaRearmApplied{ConnectionID: c.n.connID(), NamespaceID: c.id,
				SemanticFingerprint: s.Fingerprint, UpdatedAt: observer.None[string]()}
			if s.HasUpdatedAt {
				ev.UpdatedAt = observer.SchemaUpdatedAt(s.UpdatedAt)
			}
			em.Emit(ev)
		}
		return
	}
	tg := c.target
	c.pc.tc.mu.Lock()
	first := !tg.schemaFailed
	tg.schemaFailed = true
	c.pc.tc.mu.Unlock()
	if !first {
		return // the latch: a later failed outcome adds no event and no close
	}
	if em.Enabled() {
		em.Emit(observer.SchemaRearmFailed{ConnectionID: c.n.connID(), NamespaceID: c.id,
			Code: observer.SchemaRearmCode(r.Failed)})
	}
	if !c.ended() && !c.closing() {
		c.startClose(closeReasonSchema)
	}
}

// open looks for the local replica of the target's owner and sends OPEN_NAMESPACE: with its
// identity (reconcile) or without (bootstrap).
func (pc *peerConn) open(c *peerChannel) {
	pc.opening++
	c.setState(observer.ChannelOpening)
	pc.armTimer(c, observer.FailedOpenTimeout, pc.cfg.OpenTimeout)
	owner, ns, ctx, reg := c.target.owner, c.id, pc.ctx, pc.tc.reg
	if !pc.leaseOff(c, func() (*registry.Lease, error) { return reg.Open(ctx, owner, ns) },
		func(lease *registry.Lease, err error) { pc.localOpened(c, lease, err) }) {
		c.failed(protocol.CodeInternalError, observer.FailedOpenFailed, 0)
	}
}

// leaseOff runs get (a registry open or import) off the connection goroutine and hands its
// outcome to then on it; a lease the connection can no longer take is released. c.opDone
// closes once that is done. It reports false, running nothing, after the controller closed.
func (pc *peerConn) leaseOff(c *peerChannel, get func() (*registry.Lease, error), then func(*registry.Lease, error)) bool {
	done := make(chan struct{})
	c.opDone = done
	ok := pc.tc.goOff(func() {
		lease, err := get()
		if !pc.s.Post(func() { then(lease, err); close(done) }) {
			if lease != nil {
				lease.Release()
			}
			close(done)
		}
	})
	if !ok {
		close(done)
	}
	return ok
}

// localOpened sends OPEN_NAMESPACE once the local replica is open (or known to be absent).
func (pc *peerConn) localOpened(c *peerChannel, lease *registry.Lease, err error) {
	if c.state != observer.ChannelOpening || c.openSent || !pc.tc.wanted(c.target) || pc.draining() {
		if lease != nil {
			lease.Release()
		}
		if c.state == observer.ChannelOpening && !c.openSent {
			c.terminate(observer.ChannelClosed)
		}
		return
	}
	m := &protocol.OpenNamespace{NamespaceID: c.ns}
	switch {
	case errors.Is(err, registry.ErrNotFound):
		// No local replica: ask for a bootstrap.
	case err != nil:
		pc.tc.log.Warn("replication target open failed", slog.String("namespaceId", c.id), slog.String("error", err.Error()))
		c.failed(openErrorCode(err), observer.FailedOpenFailed, 0)
		return
	default:
		id := lease.Identity()
		c.lease, c.declared = lease, &id
		m.HasLocalReplica, m.ReplicationID, m.ReplicationEpoch = true, id.ReplicationID, id.Epoch
	}
	if _, err := pc.s.Send(m); err != nil {
		c.sendFailed(err)
		return
	}
	c.openSent = true
}

// openOK: the hub accepted the open (docs/protocol.md#open_ok); its mode must match what
// this peer declared.
func (c *peerChannel) openOK(f protocol.Frame, m *protocol.OpenOK) {
	pc := c.pc
	if c.ended() {
		return
	}
	consistent := m.Mode == protocol.ModeBootstrap
	if d := c.declared; d != nil {
		consistent = m.Mode == protocol.ModeReconcile && m.ReplicationID == d.ReplicationID && m.ReplicationEpoch == d.Epoch
	}
	// A second OPEN_OK finds the channel past opening: OPEN_OK leaves it at once (when the
	// CLOSE_NAMESPACE it may owe cannot be sent, the connection is closing and delivers no
	// more frames).
	if c.state != observer.ChannelOpening || !consistent {
		c.violation(f)
		return
	}
	c.identity = registry.Identity{ReplicationID: m.ReplicationID, Epoch: m.ReplicationEpoch}
	stopTimer(&c.timer)
	if c.closeAfterOpen != "" {
		c.startClose(c.closeAfterOpen)
		return
	}
	if m.Mode == protocol.ModeBootstrap {
		c.setState(observer.ChannelBootstrapping)
		pc.armBootstrapTimer(c)
		return
	}
	c.setState(observer.ChannelReconciling)
	pc.armReconcileTimer(c)
	pc.openSession(c, func() { pc.startRound(c) })
}

// openSession opens the channel's replication session on its lease, then runs then.
func (pc *peerConn) openSession(c *peerChannel, then func()) {
	opts := c.sessionOptions()
	opts.Expect = &c.identity
	post := pc.s.Post
	err := c.lease.OpenSessionAsync(opts, func(sess *registry.Session, _ registry.SessionStart, err error) {
		if !post(func() { pc.sessionOpened(c, sess, err, then) }) && sess != nil {
			sess.Close()
		}
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSessionOpenFailed)
	}
}

// sessionOpened attaches the session, or fails the namespace with the registry's refusal.
func (pc *peerConn) sessionOpened(c *peerChannel, sess *registry.Session, err error, then func()) {
	if c.ended() || c.closing() {
		if sess != nil {
			sess.Close()
		}
		return
	}
	if err != nil {
		if errors.Is(err, registry.ErrSchemaInvalid) {
			// Retrying cannot install an invalid schema: fix it on the hub, then reset.
			c.noRetry = true
		}
		c.sendError(openErrorCode(err), 0, observer.FailedSessionOpenFailed)
		return
	}
	c.attach(sess)
	then()
}

// snapshot imports the hub's snapshot as the target's replica
// (docs/protocol.md#bootstrap-steps): exclusively, under the target's owner, with the
// OPEN_OK identity.
func (c *peerChannel) snapshot(f protocol.Frame, m *protocol.BootstrapSnapshot) {
	if !c.accepts(f) {
		return
	}
	if c.state != observer.ChannelBootstrapping || c.gotSnapshot {
		c.violation(f)
		return
	}
	c.gotSnapshot = true
	switch {
	case m.ReplicationID != c.identity.ReplicationID:
		c.sendError(protocol.CodeReplicationIDMismatch, f.Sequence, observer.FailedProtocolViolation)
		return
	case m.ReplicationEpoch != c.identity.Epoch:
		c.sendError(protocol.CodeReplicationEpochMismatch, f.Sequence, observer.FailedProtocolViolation)
		return
	}
	c.importSnapshot(f.Sequence, m.Snapshot, nil)
}

// snapshotChunk: a chunked snapshot may start during the bootstrap, once; its first chunk
// must carry the OPEN_OK identity.
func (c *peerChannel) snapshotChunk(f protocol.Frame) (protocol.Binding, bool) {
	if c.state != observer.ChannelBootstrapping || c.gotSnapshot {
		c.violation(f)
		return protocol.Binding{}, false
	}
	return protocol.Binding{ReplicationID: c.identity.ReplicationID, ReplicationEpoch: c.identity.Epoch}, true
}

func (c *peerChannel) snapshotStarted() { c.gotSnapshot = true }

// snapshotAssembled imports a chunked snapshot received whole; BOOTSTRAP_ACK names its last
// chunk.
func (c *peerChannel) snapshotAssembled(t protocol.Transfer, in *inboundTransfer) {
	c.snapChunks++
	c.importSnapshot(t.AckSequence, t.Data, in)
}

// snapshotExpired: the chunked snapshot stalled for assemblyTimeoutMs. The bootstrap fails as
// if its timer fired (bootstrap-timeout, no frame), and the connection is rebuilt while the
// target is still wanted (docs/protocol.md#bootstrap).
func (c *peerChannel) snapshotExpired() {
	if c.state == observer.ChannelBootstrapping {
		c.pc.timedOut(c, observer.FailedBootstrapTimeout, c.n.cfg.AssemblyTimeout)
	}
}

// progress shows the transfer being received on the target; a chunk of the snapshot also
// counts for the bootstrap timer.
func (c *peerChannel) progress(p *TransferProgress) {
	if p != nil && p.Kind == protocol.KindSnapshot {
		c.snapChunks++
	}
	c.pc.tc.setProgress(c.target, p)
}

// importSnapshot imports snap (acknowledged as seq) through the registry, off the connection
// goroutine. The snapshot's bytes are the only copy this side holds of it until the import
// has applied them.
func (c *peerChannel) importSnapshot(seq uint32, snap []byte, in *inboundTransfer) {
	pc := c.pc
	c.snapSeq = seq
	t0 := pc.em.Now()
	owner, ns, want, ctx, reg, n := c.target.owner, c.id, c.identity, pc.ctx, pc.tc.reg, len(snap)
	pc.leaseOff(c, func() (*registry.Lease, error) { return reg.Import(ctx, owner, ns, want, snap) },
		func(lease *registry.Lease, err error) { pc.imported(c, lease, err, n, t0, in) })
}

// imported opens the session on the imported replica, acknowledges the snapshot and starts
// the first round.
func (pc *peerConn) imported(c *peerChannel, lease *registry.Lease, err error, n int, t0 observer.Opt[time.Time], in *inboundTransfer) {
	if in != nil {
		c.transferFinished(in, err)
	}
	if c.state != observer.ChannelBootstrapping {
		if lease != nil {
			lease.Release()
		}
		return
	}
	if err != nil {
		// A replica that appeared meanwhile is neither overwritten nor merged
		// (BOOTSTRAP_FAILED).
		c.sendError(openErrorCode(err), c.snapSeq, observer.FailedApplyRejected)
		return
	}
	c.lease = lease
	if pc.em.Enabled() {
		if in != nil {
			pc.em.Emit(observer.ChunkedSnapshotApplied{ConnectionID: pc.connID(), NamespaceID: c.id, Bytes: n,
				ChunkCount: in.chunks, ApplyLatencyMs: pc.em.SinceMs(t0)})
		} else {
			pc.em.Emit(observer.BootstrapImported{ConnectionID: pc.connID(), NamespaceID: c.id, Bytes: n})
		}
	}
	pc.openSession(c, func() {
		// The ACK says the import and the session are in place; a round follows to close
		// the race between the snapshot's encoding and its installation.
		if _, err := pc.s.Send(&protocol.BootstrapAck{NamespaceID: c.ns, AckedSequence: c.snapSeq}); err != nil {
			return
		}
		c.setState(observer.ChannelReconciling)
		pc.armReconcileTimer(c)
		pc.startRound(c)
	})
}

// identityChanged: the hub bumped the epoch (docs/protocol.md#identity_changed). The replica
// stays as it is; the target is conflicted until reset.
func (c *peerChannel) identityChanged() {
	pc := c.pc
	if !c.terminate(observer.ChannelConflicted) {
		return
	}
	pc.emitNsError(c.ns, string(observer.NsErrIdentityChanged), observer.DirectionReceived)
	c.emitConflicted(observer.ViaIdentityChangedFrame)
	c.target.setConflicted()
}

// armReconcileTimer arms the reconcile timeout of a round.
func (pc *peerConn) armReconcileTimer(c *peerChannel) {
	pc.armTimer(c, observer.FailedReconcileTimeout, pc.cfg.ReconcileTimeout)
}

// armBootstrapTimer arms the bootstrap timer (docs/protocol.md#bootstrap), which slides
// while a chunked snapshot moves: when it fires and chunks of the snapshot arrived since it
// was armed, it is armed again for bootstrapTimeoutMs, since a large snapshot on a slow link
// may take longer than that to arrive. A bootstrap in which nothing arrived for a whole
// bootstrapTimeoutMs times out (bootstrap-timeout); a snapshot that stalls is ended sooner
// by its assembly's sliding timeout (snapshotExpired). The import after the last chunk has
// at least bootstrapTimeoutMs.
func (pc *peerConn) armBootstrapTimer(c *peerChannel) {
	stopTimer(&c.timer)
	seen, d := c.snapChunks, pc.cfg.BootstrapTimeout
	c.timer = pc.s.AfterFunc(d, func() {
		c.timer = nil
		switch {
		case c.state != observer.ChannelBootstrapping:
		case c.snapChunks != seen:
			pc.armBootstrapTimer(c)
		default:
			pc.timedOut(c, observer.FailedBootstrapTimeout, d)
		}
	})
}

// armTimer (re)arms the channel's timer for its current state (docs/protocol.md#timeouts):
// if the channel is still in that state after d, it times out with cause.
func (pc *peerConn) armTimer(c *peerChannel, cause observer.FailedCause, d time.Duration) {
	stopTimer(&c.timer)
	state := c.state
	c.timer = pc.s.AfterFunc(d, func() {
		c.timer = nil
		if c.state == state {
			pc.timedOut(c, cause, d)
		}
	})
}

// startRound opens a round with this peer's Step1 (docs/protocol.md#round-rules). Not
// during a drain.
func (pc *peerConn) startRound(c *peerChannel) {
	if pc.draining() || c.sess == nil || c.ended() || c.closing() || c.round.active {
		return
	}
	c.stopPeriodic()
	c.beginRound(0)
	pc.armReconcileTimer(c)
	post := pc.s.Post
	err := c.sess.StateVectorAsync(func(sv []byte, err error) {
		post(func() { pc.step1Ready(c, sv, err) })
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
	}
}

// step1Ready sends the round's Step1 with the next round id of the connection.
func (pc *peerConn) step1Ready(c *peerChannel, sv []byte, err error) {
	if c.ended() || c.closing() || !c.round.active || c.round.myStep1 != 0 {
		return
	}
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
		return
	}
	if pc.lastRound == math.MaxUint32 {
		// syncRoundId never wraps on a connection: a new connection starts over.
		pc.reconnect()
		return
	}
	pc.lastRound++
	c.round.id = pc.lastRound
	c.sendStep1(sv)
}

// timedOut fails a namespace whose open, bootstrap or reconcile timer fired. While the
// target is still wanted, its recovery (targetFailed) rebuilds the connection: at once the
// first time (namespace recovery, docs/protocol.md#failed-targets), with backoff when it
// keeps timing out.
func (pc *peerConn) timedOut(c *peerChannel, cause observer.FailedCause, d time.Duration) {
	c.failed(protocol.CodeNamespaceTimeout, cause, d)
}
