package namespace

import (
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
)

// update applies the remote's UPDATE (docs/protocol.md#sending-and-relaying,
// docs/protocol.md#the-ack-window) in the namespace's write sequencer and
// acknowledges it once the apply has settled. UPDATEs come only once the channel is open
// and bootstrapped, within the sender's window, and from a remote that may submit.
func (c *channel) update(f protocol.Frame, m *protocol.Update) {
	if !c.accepts(f) {
		return
	}
	switch {
	case c.sess == nil || c.state == observer.ChannelBootstrapping || c.state == observer.ChannelOpening:
		// OPEN_OK and the bootstrap come first; the remote sends UPDATEs only live.
		c.violation(f)
		return
	case c.readOnly:
		c.sendError(protocol.CodeRoleViolation, f.Sequence, observer.FailedApplyRefused)
		return
	}
	c.applyUpdate(f.Sequence, m.Update, nil)
}

// applyUpdate applies a live update — an UPDATE, or a chunked one reassembled (in, whose
// last chunk has sequence seq) — in the sequencer and acknowledges it once settled.
func (c *channel) applyUpdate(seq uint32, u []byte, in *inboundTransfer) {
	if c.receiving >= c.n.cfg.MaxInFlightUpdates {
		// More unacknowledged UPDATEs than the window allows a sender.
		c.sendError(protocol.CodeNamespaceStateViolation, seq, observer.FailedProtocolViolation)
		return
	}
	n := len(u)
	t0 := c.n.em.Now()
	end := c.n.s.BeginWork()
	s := c.n.s // read here: the callback runs on the sequencer goroutine (a method value would cost an allocation per update)
	err := c.sess.ApplyAsync(u, func(res registry.ApplyResult, err error) {
		end()
		s.Post(func() { c.updateApplied(seq, n, t0, res, err, in) })
	})
	if err != nil {
		end()
		if in != nil {
			c.transferFinished(in, err)
		}
		c.applyFailed(err, seq)
		return
	}
	c.receiving++
	c.applying++
}

// updateApplied acknowledges and reports a settled apply.
func (c *channel) updateApplied(seq uint32, n int, t0 observer.Opt[time.Time], res registry.ApplyResult, err error, in *inboundTransfer) {
	c.receiving--
	c.applying--
	defer c.maybeAnswerClose()
	if in != nil {
		c.transferFinished(in, err)
	}
	if err == nil && res.Rearm != nil {
		defer c.role.schemaRearmed(res.Rearm) // after the ACK and update-applied
	}
	if err != nil {
		if !c.ended() && !c.closeSent {
			c.applyFailed(err, seq)
		}
		return
	}
	// After this side sent CLOSE_NAMESPACE nothing more is acknowledged: the close does not
	// wait for acknowledgements, and the next round repairs. The apply is reported all the
	// same: one event per successful apply.
	if !c.ended() && !c.closeSent {
		// An ACK that cannot be sent has closed the connection, which ends the channel.
		_, _ = c.n.s.Send(&protocol.UpdateAck{NamespaceID: c.ns, AckedSequence: seq})
	}
	if !c.n.em.Enabled() {
		return
	}
	switch {
	case res.Degraded && c.n.degradedBypass:
		// A hub update applied to memory while the store cannot save
		// (docs/protocol.md#degraded-bypass), chunked or not.
		c.n.em.Emit(observer.DegradedBypassApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: n, Sequence: seq})
	case in != nil:
		c.n.em.Emit(observer.ChunkedUpdateApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: n,
			ChunkCount: in.chunks, ApplyLatencyMs: c.n.em.SinceMs(t0)})
	default:
		c.n.em.Emit(observer.UpdateApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: n,
			ApplyLatencyMs: c.n.em.SinceMs(t0), Sequence: seq, Stages: stagesOf(res.Stages)})
	}
}

// stagesOf converts the registry's apply stages for the observer.
func stagesOf(s *registry.Stages) observer.Opt[observer.Stages] {
	if s == nil {
		return observer.None[observer.Stages]()
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return observer.Some(observer.Stages{QueueWaitMs: ms(s.QueueWait), ProtectedCheckMs: ms(s.ProtectedCheck),
		LiveApplyMs: ms(s.LiveApply), DirtyNotifyMs: ms(s.DirtyNotify)})
}
