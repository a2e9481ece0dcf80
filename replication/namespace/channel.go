package namespace

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// channel is one namespace on one connection: its state machine (the peer's namespace
// states or the hub's nine, docs/protocol.md#namespace-states), its registry lease and
// replication session, its outbound window and queue, its sync round and its close
// handshake. hubChannel and peerChannel embed it and add what only their side keeps
// (channelRole).
//
// Its fields belong to the connection's owner goroutine, except pullScheduled, which the
// registry's sequencer goroutine sets (notify), and pullFn, which it reads (set once, before
// the first session exists).
type channel struct {
	n     *nsConn
	role  channelRole // the hubChannel or peerChannel this channel is part of
	ns    protocol.NamespaceID
	id    string
	state observer.ChannelState

	lease    *registry.Lease
	sess     *registry.Session
	identity registry.Identity // the identity OPEN_OK announced
	// readOnly: the remote may not submit, so its UPDATEs are refused and its diffs not
	// applied. The hub sets it from the peer's grant; the peer's remote may always.
	readOnly bool

	// Outbound live updates: the queue of unsent updates (its gate is the window), the
	// UPDATEs sent and not yet acknowledged, oldest first, and one timer for the oldest
	// one's ackTimeoutMs.
	out         seam.Outbox
	window      []inflight
	reserved    int  // window slots the gate gave to items not yet reported sent
	bulkStarted bool // a chunked snapshot or diff of this side is in progress (its slot reserved)
	bulkOut     bulkOut
	ackTimer    seam.Timer
	// queuedMerged is the size of the merged update waiting in the queue, if any (coalesce).
	queuedMerged int
	// ackRTT is the smoothed time from an UPDATE leaving to its acknowledgement, once one
	// was acknowledged (ackRTTKnown): it sets how many small UPDATEs may be in flight
	// before the rest wait to leave merged (mergeAfterInFlight).
	ackRTT      time.Duration
	ackRTTKnown bool

	receiving int // inbound UPDATEs admitted and not yet acknowledged
	applying  int // applies admitted to the sequencer and not yet settled

	// Inbound chunked transfers: those in progress (the assembler holds their bytes), and
	// the ids of those this side gave up while the remote may still send their chunks.
	inbound   map[uint32]inboundTransfer
	discarded []uint32

	round         syncRound
	resyncPending bool   // a resync arose during the round: one more round follows
	resyncReason  string // ... and this side declares it with this reasonCode when the round ends
	staleRound    uint32 // a round this side gave up: the remote's frames of it are dropped

	pullScheduled atomic.Bool         // a pull of the session's fan-out is posted
	pullFn        func()              // c.pull, made once (sessionOptions): notify posts it without allocating
	sentUpdateFn  func(seam.SentInfo) // c.sentUpdate, made once (enqueue): every queued update's Sent

	// The close handshake.
	closeSent, closeRecv, closeAnswered, closeOKRecv bool
	closeRecvSeq                                     uint32
	closeTimer                                       seam.Timer

	diffObs *diffObservation // the Step2 apply being observed (observer only)

	presence *PresenceLink // set while the namespace is open for presence (presence.go)

	timer seam.Timer // the state's timeout: hub: bootstrap; peer: open, bootstrap or reconcile

	// Why the channel ended failed: the namespace error code sent or received (a local
	// timer's is NAMESPACE_TIMEOUT), whether the remote sent it, and the namespace-failed
	// cause. Set just before the channel terminates, so the role sees them in changed.
	endCode   protocol.ErrorCode
	endRemote bool
	endCause  observer.FailedCause

	// Local writes in flight (peer): the target's count of local write bytes read before the
	// last pull that queued updates (every local write counted by then is in those updates
	// or earlier ones), and whether an update may have been lost since (a dropped queue, a
	// given-up window): acknowledgements then confirm nothing until a round that started
	// after the loss completes.
	lastMark  int64
	lossy     bool
	lossCount uint64
}

// init makes c the channel of ns on n, in state, with role (the hubChannel or peerChannel
// that embeds it).
func (c *channel) init(n *nsConn, ns protocol.NamespaceID, state observer.ChannelState, role channelRole) {
	c.n, c.ns, c.id, c.state, c.role = n, ns, ns.String(), state, role
}

// ended: a terminal state (or the peer's disconnected): nothing more happens on this
// connection.
func (c *channel) ended() bool {
	switch c.state {
	case observer.ChannelClosed, observer.ChannelFailed, observer.ChannelConflicted, observer.ChannelDisconnected:
		return true
	}
	return false
}

// closing: a close handshake is under way.
func (c *channel) closing() bool { return c.state == observer.ChannelClosing }

// quiet: nothing of the channel is open on the wire (a drain may end).
func (c *channel) quiet() bool { return c.ended() || c.state == observer.ChannelTargeted }

// setState moves the channel to state to, reports it and tells the role.
func (c *channel) setState(to observer.ChannelState) {
	from := c.state
	if from == to {
		return
	}
	c.state = to
	c.wakeOutbox()
	c.presenceChanged()
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.ChannelStateChanged{ConnectionID: c.n.connID(), NamespaceID: c.id, From: from, To: to})
	}
	c.role.changed(from)
}

// terminate moves the channel to an end state and gives back what it holds: timers, its
// queue, its session and its lease. Admitted applies still settle in the registry. It
// reports whether the channel was not already ended.
func (c *channel) terminate(to observer.ChannelState) bool {
	if c.ended() {
		return false
	}
	c.stopTimers()
	// The namespace's partial assemblies go: reported for a close or a fence; a failure is
	// reported by namespace-error and namespace-failed instead.
	switch to {
	case observer.ChannelClosed:
		c.discardInbound(protocol.AbortChannelTeardown, true, false)
	case observer.ChannelConflicted:
		c.discardInbound(protocol.AbortEpochFence, true, false)
	case observer.ChannelDisconnected:
		c.discardInbound(protocol.AbortConnectionTeardown, true, false)
	default:
		c.discardInbound(protocol.AbortChannelTeardown, false, false)
	}
	c.setState(to)
	c.releaseAll()
	c.n.checkQuiesced()
	return true
}

// releaseAll gives back the queue, the session and the lease.
func (c *channel) releaseAll() {
	if c.out != nil {
		c.out.Close()
		c.out = nil
	}
	c.window, c.reserved, c.bulkStarted, c.bulkOut = nil, 0, false, bulkOut{}
	c.role.progress(nil)
	settled := nothingToSettle
	if c.sess != nil {
		c.sess.Close()
		settled = c.sess.Settled()
		c.sess = nil
	}
	if c.lease != nil {
		c.lease.Release()
		c.lease = nil
	}
	c.role.released(settled)
}

// nothingToSettle is the settled signal of a channel that had no session: already closed.
var nothingToSettle = func() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// stopTimers stops every timer of the channel.
func (c *channel) stopTimers() {
	stopTimer(&c.timer)
	c.role.stopPeriodic()
	stopTimer(&c.ackTimer)
	stopTimer(&c.closeTimer)
}

// stopTimer stops *t, if armed, and clears it.
func stopTimer(t *seam.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// failed ends the channel in failed with a local cause (no wire frame) and reports it; code
// is the namespace error code the failure maps to (NAMESPACE_TIMEOUT for a timer).
func (c *channel) failed(code protocol.ErrorCode, cause observer.FailedCause, timeout time.Duration) {
	if c.ended() {
		return
	}
	c.setEnd(code, false, cause)
	if !c.terminate(observer.ChannelFailed) {
		return
	}
	c.emitFailed(cause, timeout)
}

// setEnd records why the channel is about to end (see endCode).
func (c *channel) setEnd(code protocol.ErrorCode, remote bool, cause observer.FailedCause) {
	c.endCode, c.endRemote, c.endCause = code, remote, cause
}

// lost records that an update of this side may have been dropped unsent or unacknowledged:
// acknowledgements no longer prove that every earlier local write reached the remote.
func (c *channel) lost() {
	c.lossy = true
	c.lossCount++
}

// emitFailed reports namespace-failed.
func (c *channel) emitFailed(cause observer.FailedCause, timeout time.Duration) {
	if c.n.em.Enabled() {
		ev := observer.NamespaceFailed{ConnectionID: c.n.connID(), NamespaceID: c.id, Cause: cause}
		if timeout > 0 {
			ev.TimeoutMs = observer.Some(uint64(timeout / time.Millisecond))
		}
		c.n.em.Emit(ev)
	}
}

// emitConflicted reports identity-conflicted.
func (c *channel) emitConflicted(via observer.ConflictVia) {
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.IdentityConflicted{ConnectionID: c.n.connID(), NamespaceID: c.id, Via: via})
	}
}

// sendError answers with a namespace ERROR of code (about the frame with sequence rel, if
// not 0) and takes the channel to the terminal state the error registry gives the code
// (docs/protocol.md#namespace-errors). cause is the namespace-failed cause when that state
// is failed. On the hub, an opening channel answers each waiting OPEN_NAMESPACE with it
// instead: each gets its own answer.
func (c *channel) sendError(code protocol.ErrorCode, rel uint32, cause observer.FailedCause) {
	if c.ended() {
		return
	}
	rels := []uint32{rel}
	if open := c.role.takeOpenAnswers(); len(open) > 0 {
		rels = open
	}
	sent := 0
	for _, r := range rels {
		if c.n.sendError(c.ns, code, r) {
			sent++
		}
	}
	if sent == 0 {
		// The connection is closing: HandleClosed ends the channel.
		return
	}
	to := terminalOf(code)
	c.setEnd(code, false, cause)
	c.terminate(to)
	for range sent {
		c.n.emitNsError(c.ns, string(code), observer.DirectionSent)
	}
	c.reportEnd(to, cause, observer.ViaOpenMismatch)
}

// sendFailed handles a control frame the connection refused: a namespace size cap (a diff
// over maxSyncDiffBytes without chunking is SYNC_DIFF_TOO_LARGE) fails the namespace with
// that code; a closed connection ends it anyway.
func (c *channel) sendFailed(err error) {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && pe.Scope == protocol.ScopeNamespace:
		c.sendError(pe.Code, 0, observer.FailedSendFailed)
	case errors.Is(err, seam.ErrClosed), errors.Is(err, seam.ErrDraining):
		// The connection is closing or draining: its end or the drain's close ends the
		// channel.
	default:
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSendFailed)
	}
}

// reportEnd emits namespace-failed or identity-conflicted for an end state.
func (c *channel) reportEnd(to observer.ChannelState, cause observer.FailedCause, via observer.ConflictVia) {
	switch to {
	case observer.ChannelFailed:
		c.emitFailed(cause, 0)
	case observer.ChannelConflicted:
		c.emitConflicted(via)
		c.role.conflicted()
	}
}

// terminalOf is the channel state a fatal namespace error leaves, by the error registry.
func terminalOf(code protocol.ErrorCode) observer.ChannelState {
	spec, ok := protocol.LookupError(protocol.ScopeNamespace, code)
	if !ok {
		return observer.ChannelFailed
	}
	switch spec.Terminal {
	case protocol.TerminalConflicted:
		return observer.ChannelConflicted
	case protocol.TerminalClosed:
		return observer.ChannelClosed
	}
	return observer.ChannelFailed
}

// violation answers a frame that is not allowed now with its type's violation code.
func (c *channel) violation(f protocol.Frame) {
	c.sendError(f.Type().Rule().Violation, f.Sequence, observer.FailedProtocolViolation)
}

// accepts decides what happens to a frame that starts or continues work, by the close
// handshake (docs/protocol.md#closing-a-namespace): after this side sent CLOSE_NAMESPACE the
// remote may still send what it sent before it learnt (dropped silently); after the remote
// sent one, it must send nothing new (a violation). Ended channels drop everything.
func (c *channel) accepts(f protocol.Frame) bool {
	switch {
	case c.ended():
		return false
	case c.closeRecv:
		c.violation(f)
		return false
	case c.closeSent:
		return false
	}
	return true
}
