package namespace

import (
	"errors"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is the sync round (docs/protocol.md#reconciliation): the peer starts a round
// with its Step1 (its state vector); the hub answers with its Step2 (the diff the peer
// lacks) and its own Step1; the peer answers with its Step2; each side confirms the other's
// diff with SYNC_APPLIED once it is applied. When both diffs are applied the namespace is
// live.

// syncRound is the state of one reconciliation round.
type syncRound struct {
	active        bool
	id            uint32
	myStep1       uint32 // sequence of the Step1 this side sent (0: not yet)
	theirStep1    uint32 // sequence of the remote's Step1 (0: not yet)
	myStep2       uint32 // sequence of the Step2 this side sent, awaiting SYNC_APPLIED
	gotStep2      bool
	remoteApplied bool // localDiffAppliedByRemote: our Step2 was confirmed
	localApplied  bool // remoteDiffAppliedLocally: their Step2 applied, SYNC_APPLIED sent
	// mark is the local write count when the round started: this side's diff, computed
	// later, carries every write it counts (peer).
	mark      int64
	lossCount uint64 // the channel's lossCount when the round started
}

// beginRound starts the state of a round (both sides); the peer allocates its id when it
// sends its Step1, the hub takes it from the peer's.
func (c *channel) beginRound(id uint32) {
	c.round = syncRound{active: true, id: id, mark: c.role.localMark(), lossCount: c.lossCount}
	c.resyncPending = false
	c.setState(observer.ChannelReconciling) // UPDATEs go only live: the queue waits
}

// sendStep1 sends this side's Step1 of the current round.
func (c *channel) sendStep1(sv []byte) {
	seq, err := c.n.s.Send(&protocol.SyncStep1{NamespaceID: c.ns, SyncRoundID: c.round.id, StateVector: sv})
	if err != nil {
		c.sendFailed(err)
		return
	}
	c.round.myStep1 = seq
}

// answerStep1 computes the diff the remote lacks against its state vector and sends it as
// this side's Step2.
func (c *channel) answerStep1(id uint32, sv []byte) {
	post := c.n.s.Post
	err := c.sess.DiffAsync(sv, func(diff []byte, err error) {
		post(func() { c.diffReady(id, diff, err) })
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
	}
}

// diffReady sends the computed diff as this side's Step2.
func (c *channel) diffReady(id uint32, diff []byte, err error) {
	if c.ended() || c.closing() || !c.round.active || c.round.id != id {
		return
	}
	if err != nil {
		if errors.Is(err, registry.ErrFenced) {
			c.applyFailed(err, 0)
			return
		}
		if errors.Is(err, registry.ErrApplyFailed) {
			// The remote's state vector does not decode.
			c.sendError(protocol.CodeSyncStateViolation, c.round.theirStep1, observer.FailedProtocolViolation)
			return
		}
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
		return
	}
	if len(diff) > c.n.cfg.MaxSyncDiffBytes && c.n.chunked() {
		// Too large for one frame: a chunked transfer of kind sync-diff, which takes a
		// window slot until its SYNC_APPLIED.
		c.queueBulk(protocol.KindSyncDiff, diff, protocol.Binding{SyncRoundID: id}, func(seq uint32) bool {
			if !c.round.active || c.round.id != id {
				return false
			}
			c.round.myStep2 = seq
			return true
		})
		return
	}
	seq, err := c.n.s.Send(&protocol.SyncStep2{NamespaceID: c.ns, SyncRoundID: id, RelatedStep1Sequence: c.round.theirStep1, Update: diff})
	if err != nil {
		c.sendFailed(err)
		return
	}
	c.round.myStep2 = seq
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.SyncStep2Sent{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: len(diff), SyncRoundID: id})
	}
}

// step2 applies the remote's diff in the sequencer, then confirms it with SYNC_APPLIED.
func (c *channel) step2(f protocol.Frame, m *protocol.SyncStep2) {
	if !c.accepts(f) || c.stale(m.SyncRoundID) {
		return
	}
	r := &c.round
	if !r.active || m.SyncRoundID != r.id || r.gotStep2 || r.myStep1 == 0 || m.RelatedStep1Sequence != r.myStep1 {
		c.violation(f)
		return
	}
	r.gotStep2 = true
	c.applyDiff(r.id, f.Sequence, m.Update, nil)
}

// applyDiff applies the remote's diff of round id — a SYNC_STEP2, or a chunked one
// reassembled (in, whose last chunk has sequence seq) — and confirms it with SYNC_APPLIED
// once settled.
func (c *channel) applyDiff(id, seq uint32, diff []byte, in *inboundTransfer) {
	n := len(diff)
	if c.readOnly {
		// A read-only peer submits nothing: its diff is not taken; the round settles.
		if in != nil {
			c.transferFinished(in, nil)
		}
		c.applying++
		c.step2Applied(id, seq, registry.ApplyResult{}, nil)
		return
	}
	post := c.n.s.Post
	var obs *diffObservation
	if c.n.em.Enabled() {
		obs = &diffObservation{round: id, seq: seq, bytes: n, t0: c.n.em.Now(), chunked: in}
	}
	if obs != nil && in == nil {
		// For sync-diff-applied's effect: the state vector when the Step2 was accepted and
		// when its apply settled, read in the slots around the apply (slots run in order).
		// A capture the session cannot admit leaves obs.before nil: the event then goes
		// without its effect group. A chunked diff's event has no effect group.
		_ = c.sess.StateVectorAsync(func(sv []byte, err error) {
			if err == nil {
				obs.before = sv
			}
		})
	}
	end := c.n.s.BeginWork()
	err := c.sess.ApplyAsync(diff, func(res registry.ApplyResult, err error) {
		end()
		post(func() {
			if in != nil {
				c.transferFinished(in, err)
			}
			c.step2Applied(id, seq, res, err)
		})
	})
	if err != nil {
		end()
		if in != nil {
			c.transferFinished(in, err)
		}
		c.applyFailed(err, seq)
		return
	}
	c.applying++
	if obs == nil {
		return
	}
	c.diffObs = obs
	if in != nil {
		obs.noAfter = true // reported when the apply settles
		return
	}
	err = c.sess.StateVectorAsync(func(sv []byte, err error) {
		if err == nil {
			obs.after = sv
		}
		post(func() { c.afterCaptured(obs) })
	})
	if err != nil {
		obs.noAfter = true
	}
}

// diffObservation gathers what sync-diff-applied reports: the apply's outcome and the
// state vectors around it. The sequencer goroutine writes before and after; the owner
// goroutine reads them only after the post that follows.
type diffObservation struct {
	round         uint32
	seq           uint32
	bytes         int
	t0            observer.Opt[time.Time]
	before, after []byte // written on the sequencer goroutine, read after its post
	latency       observer.Opt[float64]
	stages        observer.Opt[observer.Stages]
	applied       bool // the apply settled successfully
	noAfter       bool // the after capture could not be admitted (or is not made: chunked)
	chunked       *inboundTransfer
}

// step2Applied confirms a settled Step2 apply with SYNC_APPLIED and reports it.
func (c *channel) step2Applied(id, seq uint32, res registry.ApplyResult, err error) {
	c.applying--
	defer c.maybeAnswerClose()
	if err == nil && res.Rearm != nil {
		defer c.role.schemaRearmed(res.Rearm) // after SYNC_APPLIED
	}
	obs := c.diffObs
	if obs != nil && obs.seq == seq {
		if err == nil && res.Degraded && c.n.degradedBypass {
			// One event per successful apply: a degraded one, from any source, is
			// degraded-bypass-applied instead of sync-diff-applied (after SYNC_APPLIED).
			defer c.n.em.Emit(observer.DegradedBypassApplied{ConnectionID: c.n.connID(), NamespaceID: c.id,
				Bytes: obs.bytes, Sequence: seq})
		} else if err == nil {
			obs.applied = true
			obs.latency = c.n.em.SinceMs(obs.t0)
			obs.stages = stagesOf(res.Stages)
		}
		if obs.noAfter {
			c.emitDiffApplied(obs)
		}
	}
	if c.ended() || c.closing() || !c.round.active || c.round.id != id {
		return
	}
	if err != nil {
		c.applyFailed(err, seq)
		return
	}
	if _, err := c.n.s.Send(&protocol.SyncApplied{NamespaceID: c.ns, SyncRoundID: id, AckedSequence: seq}); err != nil {
		return
	}
	c.round.localApplied = true
	c.roundProgress()
}

// afterCaptured reports the Step2 apply once its second state vector is read.
func (c *channel) afterCaptured(obs *diffObservation) {
	if c.diffObs == obs {
		c.diffObs = nil
	}
	c.emitDiffApplied(obs)
}

// emitDiffApplied reports a successful Step2 apply (sync-diff-applied), with the
// effect group when both state vectors were read; a chunked diff's is chunked-sync-applied.
func (c *channel) emitDiffApplied(obs *diffObservation) {
	if !obs.applied || !c.n.em.Enabled() {
		return
	}
	if in := obs.chunked; in != nil {
		c.n.em.Emit(observer.ChunkedSyncApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: obs.bytes,
			ChunkCount: in.chunks, SyncRoundID: obs.round, ApplyLatencyMs: obs.latency})
		return
	}
	ev := observer.SyncDiffApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: obs.bytes,
		ApplyLatencyMs: obs.latency, SyncRoundID: obs.round, Sequence: obs.seq, Stages: obs.stages}
	if obs.before != nil && obs.after != nil {
		ev.Effect = observer.Some(observer.NewSVEffect(obs.before, obs.after))
	}
	c.n.em.Emit(ev)
}

// syncApplied: the remote confirmed our Step2.
func (c *channel) syncApplied(f protocol.Frame, m *protocol.SyncApplied) {
	if c.ended() || c.stale(m.SyncRoundID) {
		return
	}
	r := &c.round
	if c.closing() {
		return // an acknowledgement: harmless during the close
	}
	if !r.active || m.SyncRoundID != r.id || r.myStep2 == 0 || m.AckedSequence != r.myStep2 || r.remoteApplied {
		c.violation(f)
		return
	}
	r.remoteApplied = true
	if b, ok := c.bulkAcked(m.AckedSequence); ok && c.n.em.Enabled() {
		c.n.em.Emit(observer.ChunkedSyncAcked{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: b.bytes,
			AckLatencyMs: c.n.em.SinceMs(b.sentAt)})
	}
	c.roundProgress()
}

// roundProgress ends the round once both diffs are applied (ours confirmed by the remote,
// theirs applied here): live, unless a resync arose meanwhile.
func (c *channel) roundProgress() {
	r := &c.round
	if !r.active || !r.remoteApplied || !r.localApplied {
		return
	}
	r.active = false
	stopTimer(&c.timer)
	// The remote applied this side's diff: it holds every local write counted at the
	// round's start; a loss before then is repaired by that diff.
	c.role.confirmLocal(r.mark)
	if r.lossCount == c.lossCount {
		c.lossy = false
	}
	if c.resyncPending {
		c.resyncPending = false
		c.setState(observer.ChannelNeedsResync)
		if reason := c.resyncReason; reason != "" {
			// The loss this side found during the round is declared now that the round's
			// transfers are over (see enterResync).
			c.resyncReason = ""
			c.sendResync(reason, observer.None[observer.ResyncCause]())
		}
		if len(c.window) == 0 {
			c.role.resyncReady()
		}
		return
	}
	c.setState(observer.ChannelLive)
	c.role.wentLive()
	c.pull()
	c.confirmIfIdle()
}
