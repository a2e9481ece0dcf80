package namespace

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/yjs"
)

// This file is the part of the namespace layer both sides share: one channel per namespace
// per connection, with its registry lease and replication session, its sync rounds (§9),
// its live updates and windows (§10, §17), its close handshake (§12) and its namespace
// errors (§13.2). The hub (hubns.go) and the peer (peerns.go) add opening, bootstrap and
// who starts rounds. Every method runs on the connection's owner goroutine; the registry
// answers through Session.Post.

// Reason codes of CLOSE_NAMESPACE (§12).
const (
	closeReasonDrain  = "drain"
	closeReasonRemove = "remove"
	// closeReasonSchema: the peer closes a namespace whose replicated schema failed to
	// re-arm (§23.1 schema-rearm-failed, ADR 0018 §3).
	closeReasonSchema = "schema-rearm-failed"
)

// connRole is what differs between the hub's and the peer's namespace layer on one
// connection: which channels there are, and how a frame for an unknown namespace is
// answered.
type connRole interface {
	// channel returns ns's channel on this connection, or nil.
	channel(ns protocol.NamespaceID) *channel
	// addressable returns ns's channel if the remote may address frames to it (on the peer,
	// only once OPEN_NAMESPACE was sent for it), or nil.
	addressable(ns protocol.NamespaceID) *channel
	// each calls f for every channel of the connection.
	each(f func(c *channel))
	// unknown answers a frame (of type t, with sequence seq) for a namespace the remote may
	// not address.
	unknown(t protocol.MessageType, seq uint32, ns protocol.NamespaceID)
}

// channelRole is what differs between a hub channel and a peer channel: the hooks the
// shared state machine calls at the points where the two sides behave differently.
type channelRole interface {
	// step1 takes a SYNC_STEP1 (the hub answers a new round, the peer the hub's half of its
	// own).
	step1(f protocol.Frame, m *protocol.SyncStep1)
	// fenced handles an epoch bump that fenced the channel's session (hub).
	fenced(id registry.Identity)
	// changed is told every state change after it took effect.
	changed(from observer.ChannelState)
	// wentLive: a round completed and the channel is live.
	wentLive()
	// resyncReady: the channel is in needs-resync (the peer starts a round once its window
	// is empty).
	resyncReady()
	// stopPeriodic stops starting rounds by itself (a drain, a close).
	stopPeriodic()
	// drainOpening handles a drain while the channel is opening.
	drainOpening()
	// owesOpenAnswers reports whether OPEN_NAMESPACE requests still wait for their answer
	// (hub, while opening).
	owesOpenAnswers() bool
	// takeOpenAnswers returns the sequences of the OPEN_NAMESPACE requests still waiting for
	// their answer, and forgets them: an error ending the channel answers each.
	takeOpenAnswers() []uint32
	// conflicted: the channel ended conflicted.
	conflicted()
	// released: the channel ended its life on this connection and gave back its session
	// and lease; settled closes when the session's admitted operations have settled.
	released(settled <-chan struct{})
	// schemaRearmed: a settled apply re-armed the namespace's schema (peer; a hub apply
	// never reports one). It runs in the apply's settlement continuation.
	schemaRearmed(r *registry.SchemaRearm)
}

// nsConn is the per-connection part both sides share.
type nsConn struct {
	s        seam.Session
	cfg      *protocol.Config
	em       *observer.Emitter
	log      *slog.Logger
	role     connRole
	closed   bool // HandleClosed was called
	quiesced bool // Session.Quiesced was called
	// remote is the remote instance's id, the peer of the channels' replication sessions.
	remote string
	// degradedBypass: an apply to a degraded store is reported as degraded-bypass-applied
	// (the peer applying hub updates in memory, §20), not as an ordinary apply.
	degradedBypass bool

	// ctx bounds the registry calls made off the owner goroutine for this connection; it
	// is cancelled when the connection closes.
	ctx    context.Context
	cancel context.CancelFunc
}

func newNSConn(s seam.Session, role connRole, log *slog.Logger, remote string) nsConn {
	ctx, cancel := context.WithCancel(context.Background())
	return nsConn{s: s, cfg: s.Config(), em: s.Emitter(), log: log, role: role, remote: remote, ctx: ctx, cancel: cancel}
}

// connID is the connectionId of namespace-domain events (§23.3).
func (n *nsConn) connID() observer.Opt[string] {
	if id := n.s.ConnectionID(); id != "" {
		return observer.Some(id)
	}
	return observer.None[string]()
}

func (n *nsConn) draining() bool {
	_, ok := n.s.Draining()
	return ok
}

// sendError sends a namespace ERROR (§13), with relatedSequence rel when not 0; the caller
// reports it (emitNsError) once its decision took effect. It returns false when the
// connection could not take the frame.
func (n *nsConn) sendError(ns protocol.NamespaceID, code protocol.ErrorCode, rel uint32) bool {
	m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, code, ns, "namespace error "+string(code))
	if err != nil {
		return false
	}
	if rel != 0 {
		m.WithRelatedSequence(rel)
	}
	if _, err := n.s.Send(m); err != nil {
		return false
	}
	return true
}

func (n *nsConn) emitNsError(ns protocol.NamespaceID, code string, dir observer.Direction) {
	if n.em.Enabled() {
		c := observer.FoldNamespaceCode(code)
		n.em.Emit(observer.NamespaceError{ConnectionID: n.connID(), NamespaceID: ns.String(), Code: c,
			Direction: dir, TerminalState: c.TerminalState()})
	}
}

// allQuiet reports whether every channel is in a state a drain waits for (§6.3): nothing
// open on the wire.
func (n *nsConn) allQuiet() bool {
	quiet := true
	n.role.each(func(c *channel) { quiet = quiet && c.quiet() })
	return quiet
}

// checkQuiesced ends a drain once every channel is quiet (§6.3).
func (n *nsConn) checkQuiesced() {
	if n.closed || n.quiesced || !n.draining() || !n.allQuiet() {
		return
	}
	n.quiesced = true
	n.s.Quiesced()
}

// route handles the namespace frames both sides receive. The frames only one side receives
// (by their direction in the message registry) are routed by that side's HandleFrame.
func (n *nsConn) route(f protocol.Frame) {
	c := n.addressed(f)
	if c == nil {
		return
	}
	switch m := f.Message.(type) {
	case *protocol.ErrorMessage:
		c.remoteError(f, m)
	case *protocol.CloseNamespace:
		c.closeReceived(f)
	case *protocol.CloseOK:
		c.closeOK()
	case *protocol.SyncStep1:
		if c.accepts(f) {
			c.role.step1(f, m)
		}
	case *protocol.SyncStep2:
		c.step2(f, m)
	case *protocol.SyncApplied:
		c.syncApplied(f, m)
	case *protocol.ResyncRequired:
		c.resyncRequired(f)
	case *protocol.Update:
		c.update(f, m)
	case *protocol.UpdateAck:
		c.updateAck(m)
	default:
		// UPDATE_CHUNK: this layer runs the v1 generation and takes no chunk.
		n.role.unknown(f.Type(), f.Sequence, c.ns)
	}
}

// addressed returns the channel a namespace frame is for. A frame for a namespace the
// remote may not address is answered (an ERROR is not: it needs no answer) and nil
// returned.
func (n *nsConn) addressed(f protocol.Frame) *channel {
	m, ok := f.Message.(protocol.NamespaceMessage)
	if !ok {
		return nil // the connection delivers namespace frames only
	}
	if c := n.role.addressable(m.Namespace()); c != nil {
		return c
	}
	if _, isErr := m.(*protocol.ErrorMessage); !isErr {
		n.role.unknown(f.Type(), f.Sequence, m.Namespace())
	}
	return nil
}

// rejected handles a frame that failed a namespace size cap (GUIDE §5).
func (n *nsConn) rejected(e *protocol.Error) {
	c := n.role.channel(e.Namespace)
	if c == nil {
		n.role.unknown(e.Type, e.Sequence, e.Namespace)
		return
	}
	if c.ended() {
		return
	}
	c.sendError(e.Code, e.Sequence, observer.FailedProtocolViolation)
}

// shed: the connection dropped ns's unsent data to relieve backpressure (§17).
func (n *nsConn) shed(ns protocol.NamespaceID) {
	if c := n.role.channel(ns); c != nil && c.sess != nil && !c.ended() {
		c.needResync(observer.ResyncConnectionShed, observer.None[observer.SendFailure]())
	}
}

// drain closes the open channels (§6.3: only natural CLOSE handshakes from now on).
func (n *nsConn) drain() {
	n.role.each(func(c *channel) {
		c.role.stopPeriodic()
		switch {
		case c.ended() || c.closing() || c.state == observer.ChannelTargeted:
		case c.state == observer.ChannelOpening:
			c.role.drainOpening()
		default:
			c.startClose(closeReasonDrain)
		}
	})
	n.checkQuiesced()
}

// connectionClosed ends every channel with the connection (§16: the session stops, admitted
// applies drain, the lease is released).
func (n *nsConn) connectionClosed(to func(c *channel) observer.ChannelState) {
	n.closed = true
	n.cancel()
	n.role.each(func(c *channel) { c.terminate(to(c)) })
}

// ---- the channel ------------------------------------------------------------------------

// channel is one namespace on one connection: the §16 state machine (peer) or the hub's
// nine states, the registry lease and replication session, the outbound window and queue,
// and the sync round.
type channel struct {
	n     *nsConn
	role  channelRole // the hubChannel or peerChannel this channel is part of
	ns    protocol.NamespaceID
	id    string
	state observer.ChannelState

	lease    *registry.Lease
	sess     *registry.Session
	identity registry.Identity // the identity OPEN_OK announced
	// readOnly: the remote may not submit (§19), so its UPDATEs are refused and its diffs
	// not applied. The hub sets it from the peer's grant; the peer's remote may always.
	readOnly bool

	// Outbound live updates (§10, §17): the queue of unsent updates (its gate is the
	// window), the UPDATEs sent and not yet acknowledged, oldest first, and one timer for
	// the oldest one's ackTimeoutMs.
	out      seam.Outbox
	window   []inflight
	reserved int // window slots the gate gave to items not yet reported sent
	ackTimer seam.Timer

	receiving int // inbound UPDATEs admitted and not yet acknowledged (§10.2)
	applying  int // applies admitted to the sequencer and not yet settled (§12)

	round         syncRound
	resyncPending bool // a resync arose during the round: one more round follows (§9.4)

	pullScheduled atomic.Bool // a pull of the session's fan-out is posted

	// Close handshake (§12).
	closeSent, closeRecv, closeAnswered, closeOKRecv bool
	closeRecvSeq                                     uint32
	closeTimer                                       seam.Timer

	diffObs *diffObservation // the Step2 apply being observed (observer only)

	timer seam.Timer // hub: bootstrap; peer: open, bootstrap or reconcile (§18)
}

// inflight is one UPDATE sent and not yet acknowledged.
type inflight struct {
	seq      uint32
	bytes    int
	deadline time.Time               // sent + ackTimeoutMs
	sentAt   observer.Opt[time.Time] // for update-acked's ackLatencyMs
}

// syncRound is the state of one reconciliation round (§9.1–§9.3).
type syncRound struct {
	active        bool
	id            uint32
	myStep1       uint32 // sequence of the Step1 this side sent (0: not yet)
	theirStep1    uint32 // sequence of the remote's Step1 (0: not yet)
	myStep2       uint32 // sequence of the Step2 this side sent, awaiting SYNC_APPLIED
	gotStep2      bool
	remoteApplied bool // localDiffAppliedByRemote: our Step2 was confirmed
	localApplied  bool // remoteDiffAppliedLocally: their Step2 applied, SYNC_APPLIED sent
}

// init makes c the channel of ns on n, in state, with role (the hubChannel or peerChannel
// that embeds it).
func (c *channel) init(n *nsConn, ns protocol.NamespaceID, state observer.ChannelState, role channelRole) {
	c.n, c.ns, c.id, c.state, c.role = n, ns, ns.String(), state, role
}

// ---- states -----------------------------------------------------------------------------

// ended: a terminal state (or the peer's disconnected): nothing more happens on this
// connection.
func (c *channel) ended() bool {
	switch c.state {
	case observer.ChannelClosed, observer.ChannelFailed, observer.ChannelConflicted, observer.ChannelDisconnected:
		return true
	}
	return false
}

func (c *channel) closing() bool { return c.state == observer.ChannelClosing }

// quiet: nothing of the channel is open on the wire (a drain may end, §6.3).
func (c *channel) quiet() bool { return c.ended() || c.state == observer.ChannelTargeted }

func (c *channel) setState(to observer.ChannelState) {
	from := c.state
	if from == to {
		return
	}
	c.state = to
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.ChannelStateChanged{ConnectionID: c.n.connID(), NamespaceID: c.id, From: from, To: to})
	}
	c.role.changed(from)
}

// terminate moves the channel to an end state and gives back what it holds: timers, its
// queue, its session and its lease. Admitted applies still settle in the registry (§12,
// §16). It reports whether the channel was not already ended.
func (c *channel) terminate(to observer.ChannelState) bool {
	if c.ended() {
		return false
	}
	c.stopTimers()
	c.setState(to)
	c.releaseAll()
	c.n.checkQuiesced()
	return true
}

func (c *channel) releaseAll() {
	if c.out != nil {
		c.out.Close()
		c.out = nil
	}
	c.window, c.reserved = nil, 0
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

// failed ends the channel in failed with a local cause (no wire frame) and reports it.
func (c *channel) failed(cause observer.FailedCause, timeout time.Duration) {
	if !c.terminate(observer.ChannelFailed) {
		return
	}
	c.emitFailed(cause, timeout)
}

func (c *channel) emitFailed(cause observer.FailedCause, timeout time.Duration) {
	if c.n.em.Enabled() {
		ev := observer.NamespaceFailed{ConnectionID: c.n.connID(), NamespaceID: c.id, Cause: cause}
		if timeout > 0 {
			ev.TimeoutMs = observer.Some(uint64(timeout / time.Millisecond))
		}
		c.n.em.Emit(ev)
	}
}

func (c *channel) emitConflicted(via observer.ConflictVia) {
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.IdentityConflicted{ConnectionID: c.n.connID(), NamespaceID: c.id, Via: via})
	}
}

// sendError answers with a namespace ERROR of code (about the frame with sequence rel, if
// not 0) and takes the channel to the terminal state the registry gives the code (§13.2).
// cause is the namespace-failed cause when that state is failed. On the hub, an opening
// channel answers each waiting OPEN_NAMESPACE with it instead (§7.1: each gets its answer).
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
	c.terminate(to)
	for range sent {
		c.n.emitNsError(c.ns, string(code), observer.DirectionSent)
	}
	c.reportEnd(to, cause, observer.ViaOpenMismatch)
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

// terminalOf is the channel state a fatal namespace error leaves (§13.2).
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
// handshake: after this side sent CLOSE_NAMESPACE the remote may still send what it sent
// before it learnt (dropped silently); after the remote sent one, it must send nothing new
// (a violation, §16 "未接纳 frame视为 closing violation"). Ended channels drop everything.
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

// ---- remote errors (§13) --------------------------------------------------------------

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
		// round (§13.2 retryable resync, terminal state needs-resync).
		if known && c.sess != nil && !c.closing() {
			c.resyncRequired(f)
		}
		return
	}
	to := observer.ChannelFailed
	if known {
		to = terminalOf(m.Code)
	}
	c.terminate(to)
	c.n.emitNsError(c.ns, string(m.Code), observer.DirectionReceived)
	c.reportEnd(to, observer.FailedRemoteError, observer.ViaOpenMismatch)
}

// ---- registry errors ---------------------------------------------------------------------

// applyFailed answers an apply (UPDATE or Step2 diff) the registry refused (§10.1, §20).
func (c *channel) applyFailed(err error, rel uint32) {
	switch {
	case errors.Is(err, registry.ErrFenced):
		if c.lease != nil {
			c.role.fenced(c.lease.Identity())
		}
		return
	case errors.Is(err, registry.ErrProtected), errors.Is(err, registry.ErrRoleViolation), errors.Is(err, registry.ErrDegraded):
		c.sendError(protocol.ErrorCode(registry.CodeOf(err)), rel, observer.FailedApplyRefused)
	case errors.Is(err, registry.ErrApplyFailed):
		c.sendError(protocol.CodeApplyFailed, rel, observer.FailedApplyRejected)
	default:
		c.sendError(protocol.CodeInternalError, rel, observer.FailedApplyRejected)
	}
}

// openErrorCode answers a session open or a bootstrap import the registry refused: an
// identity mismatch (§7.1, §8.1) or a refused import (§8.1) keeps its code, anything else is
// INTERNAL_ERROR.
func openErrorCode(err error) protocol.ErrorCode {
	switch {
	case errors.Is(err, registry.ErrIDMismatch):
		return protocol.CodeReplicationIDMismatch
	case errors.Is(err, registry.ErrEpochMismatch):
		return protocol.CodeReplicationEpochMismatch
	case errors.Is(err, registry.ErrBootstrapFailed):
		return protocol.CodeBootstrapFailed
	}
	return protocol.CodeInternalError
}

// ---- the replication session and its fan-out (§10.1) -------------------------------------

// sessionOptions are the options of the channel's replication session.
func (c *channel) sessionOptions() registry.SessionOptions {
	return registry.SessionOptions{
		Peer:                 c.n.remote,
		ReadOnly:             c.readOnly,
		MaxQueuedUpdateBytes: c.n.cfg.MaxQueuedUpdateBytes,
		MaxQueuedUpdateCount: c.n.cfg.MaxQueuedUpdateCount,
		// The window, plus a Step2 apply and the state-vector and diff reads of a round
		// with their observer captures.
		MaxInFlight: c.n.cfg.MaxInFlightUpdates + 8,
		Notify:      c.notify,
	}
}

// notify runs on the registry's sequencer goroutine: it posts one pull at a time.
func (c *channel) notify() {
	if c.pullScheduled.CompareAndSwap(false, true) {
		c.n.s.Post(c.pull)
	}
}

// attach installs the channel's replication session and its outbound queue.
func (c *channel) attach(sess *registry.Session) {
	c.sess = sess
	c.out = c.n.s.Outbox(c.ns, c.gate)
	c.pull() // what the fan-out queued before the session reached us
}

// pull takes what the runtime's observer fanned out to the session (§10.1: everything
// applied to the namespace except what came from this session) and queues it for sending.
func (c *channel) pull() {
	c.pullScheduled.Store(false)
	if c.sess == nil || c.ended() {
		return
	}
	p := c.sess.Poll()
	switch {
	case p.Fenced != nil:
		c.role.fenced(*p.Fenced)
		return
	case p.Failed:
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
		return
	case p.Closed:
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSessionMissing)
		return
	}
	if p.NeedsResync {
		c.needResync(observer.ResyncSessionFanoutOverflow, observer.None[observer.SendFailure]())
	}
	if c.state == observer.ChannelNeedsResync || c.closing() || c.out == nil {
		// The next round's diffs are computed later and cover these (§9.4, §17).
		return
	}
	for _, u := range p.Updates {
		if !c.enqueue(u) {
			break
		}
	}
	c.coalesce()
}

// canSend: UPDATEs go only while live (§10.1) and within the window of maxInFlightUpdates
// unacknowledged UPDATEs (§10.2).
func (c *channel) canSend() bool {
	return c.state == observer.ChannelLive && len(c.window)+c.reserved < c.n.cfg.MaxInFlightUpdates
}

// gate is the Outbox gate. An item it admits is framed at once, but the connection reports
// it (Sent) only after its pump pass, so the gate reserves the item's window slot until then.
func (c *channel) gate() bool {
	if !c.canSend() {
		return false
	}
	c.reserved++
	return true
}

// enqueue queues one update; false when the queue was dropped (the channel needs a
// resync) or cannot take more.
func (c *channel) enqueue(u []byte) bool {
	if len(u) > c.n.cfg.MaxUpdateBytes {
		return c.tooLarge(len(u))
	}
	err := c.out.Enqueue(seam.DataItem{Kind: protocol.KindLiveUpdate, Bytes: u, Sent: c.sentFunc(len(u))})
	switch {
	case err == nil:
		return true
	case errors.Is(err, seam.ErrQueueOverflow):
		c.needResync(observer.ResyncQueueOverflow, observer.None[observer.SendFailure]())
	case errors.Is(err, seam.ErrConnectionShed):
		c.needResync(observer.ResyncConnectionShed, observer.None[observer.SendFailure]())
	case errors.Is(err, seam.ErrDraining), errors.Is(err, seam.ErrClosed):
	case c.state == observer.ChannelLive:
		c.needResync(observer.ResyncSendFailed, c.sendFailure(observer.SendFrameRejected, len(u)))
	case c.round.active:
		c.resyncPending = true
	}
	return false
}

// tooLarge handles an update over maxUpdateBytes: without chunking it cannot be sent
// (§10.1, §23.1 issue #231). In live, with an empty queue, the send fails and a resync is
// declared; with updates queued, it is dropped alone (update-dropped) and the next
// reconciliation repairs it. Outside live it never reaches the send path: the round in
// progress is followed by another.
func (c *channel) tooLarge(n int) bool {
	if c.state != observer.ChannelLive {
		if c.round.active {
			c.resyncPending = true
		}
		return true
	}
	items, _ := c.out.Len()
	if items == 0 {
		c.needResync(observer.ResyncSendFailed, c.sendFailure(observer.SendUpdateTooLarge, n))
		return false
	}
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.UpdateDropped{ConnectionID: c.n.connID(), NamespaceID: c.id,
			Reason: observer.DropUpdateTooLarge, QueueSample: c.queueSample(n, observer.ChannelLive)})
	}
	return true
}

// sendFailure samples the send path for resync-required{send-failed} (§23.1 issue #231),
// before the queue is dropped. Only built when an observer listens.
func (c *channel) sendFailure(reason observer.SendFailureReason, n int) observer.Opt[observer.SendFailure] {
	if !c.n.em.Enabled() {
		return observer.None[observer.SendFailure]()
	}
	return observer.Some(observer.SendFailure{Reason: reason, QueueSample: c.queueSample(n, observer.ChannelNeedsResync)})
}

func (c *channel) queueSample(n int, state observer.ChannelState) observer.QueueSample {
	items, bytes := 0, 0
	if c.out != nil {
		items, bytes = c.out.Len()
	}
	st := c.n.s.Stats()
	conn := observer.ConnReady
	if c.n.draining() {
		conn = observer.ConnDraining
	}
	return observer.QueueSample{UpdateBytes: n, MaxUpdateBytes: c.n.cfg.MaxUpdateBytes, QueuedUpdateCount: items,
		QueuedUpdateBytes: bytes, InFlightCount: len(c.window), ChannelState: state, ConnectionState: conn,
		BufferedAmount: observer.Some(st.UnflushedData + st.UnflushedControl)}
}

// coalesce merges the unsent updates into one while they cannot leave (§10.1: unsent,
// unsequenced updates may be merged with Y.mergeUpdates, never after).
func (c *channel) coalesce() {
	if c.out == nil || c.canSend() {
		return
	}
	if items, _ := c.out.Len(); items < 2 {
		return
	}
	merged := 0
	err := c.out.Coalesce(func(us [][]byte) ([]byte, error) {
		m, err := yjs.MergeUpdates(us)
		merged = len(m)
		return m, err
	}, func(si seam.SentInfo) { c.sent(si, merged) })
	var tooLarge *protocol.Error
	switch {
	case err == nil, errors.Is(err, seam.ErrClosed):
	case errors.As(err, &tooLarge):
		// The merge would not fit one frame: the updates stay as they are and leave one by
		// one.
	default:
		// The session's own updates did not merge: they stay queued as they are, and the
		// failure is worth a look.
		c.n.log.Warn("replication could not merge queued updates", slog.String("namespaceId", c.id), slog.String("error", err.Error()))
	}
}

func (c *channel) sentFunc(n int) func(seam.SentInfo) {
	return func(si seam.SentInfo) { c.sent(si, n) }
}

// sent records an UPDATE in the window and arms the ACK timer for the oldest one (§10.2,
// §18: ackTimeoutMs from the frame's sent time).
func (c *channel) sent(si seam.SentInfo, n int) {
	if c.reserved > 0 {
		c.reserved--
	}
	if c.ended() {
		return
	}
	in := inflight{seq: si.Sequence, bytes: n, deadline: c.n.s.Clock().Now().Add(c.n.cfg.AckTimeout)}
	if c.n.em.Enabled() {
		in.sentAt = c.n.em.Now()
	}
	c.window = append(c.window, in)
	if c.ackTimer == nil {
		c.armAckTimer()
	}
	c.coalesce() // the window may be full now: what waits can be merged
}

func (c *channel) armAckTimer() {
	if len(c.window) == 0 {
		c.ackTimer = nil
		return
	}
	d := c.window[0].deadline.Sub(c.n.s.Clock().Now())
	c.ackTimer = c.n.s.AfterFunc(max(d, 0), c.ackTimerFired)
}

func (c *channel) ackTimerFired() {
	c.ackTimer = nil
	if len(c.window) == 0 || c.ended() {
		return
	}
	if c.n.s.Clock().Now().Before(c.window[0].deadline) {
		c.armAckTimer() // the oldest was acknowledged; wait for the next one
		return
	}
	c.ackTimeout()
}

// ackTimeout: an UPDATE went unacknowledged for ackTimeoutMs. It is not sent again: the
// window is given up and the namespace needs a new round (§17, §18), which this side
// declares with the non-fatal ACK_TIMEOUT error (§13.2: retryable resync).
func (c *channel) ackTimeout() {
	rel := c.window[0].seq
	c.window = nil
	if c.n.sendError(c.ns, protocol.CodeAckTimeout, rel) {
		c.n.emitNsError(c.ns, string(protocol.CodeAckTimeout), observer.DirectionSent)
	}
	c.enterResync(observer.ResyncAckTimeout, observer.None[observer.SendFailure](), false)
}

// updateAck settles an UPDATE (§10.2). The connection has checked that it names one.
func (c *channel) updateAck(m *protocol.UpdateAck) {
	if c.ended() {
		return
	}
	for i, in := range c.window {
		if in.seq != m.AckedSequence {
			continue
		}
		c.window = append(c.window[:i], c.window[i+1:]...)
		if c.n.em.Enabled() {
			c.n.em.Emit(observer.UpdateAcked{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: in.bytes,
				AckLatencyMs: c.n.em.SinceMs(in.sentAt), Sequence: m.AckedSequence})
		}
		break
	}
	// An acknowledgement of an UPDATE given up after an ACK timeout changes nothing.
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.role.resyncReady()
	}
}

// ---- inbound updates (§10.1, §10.2, §20) -----------------------------------------------------

func (c *channel) update(f protocol.Frame, m *protocol.Update) {
	if !c.accepts(f) {
		return
	}
	switch {
	case c.sess == nil || c.state == observer.ChannelBootstrapping || c.state == observer.ChannelOpening:
		// OPEN_OK and the bootstrap come first (§7.2); the remote sends UPDATEs only live.
		c.violation(f)
		return
	case c.readOnly:
		c.sendError(protocol.CodeRoleViolation, f.Sequence, observer.FailedApplyRefused)
		return
	case c.receiving >= c.n.cfg.MaxInFlightUpdates:
		// More unacknowledged UPDATEs than the window allows a sender (§10.2).
		c.violation(f)
		return
	}
	seq, n := f.Sequence, len(m.Update)
	t0 := c.n.em.Now()
	end := c.n.s.BeginWork()
	post := c.n.s.Post
	err := c.sess.ApplyAsync(m.Update, func(res registry.ApplyResult, err error) {
		end()
		post(func() { c.updateApplied(seq, n, t0, res, err) })
	})
	if err != nil {
		end()
		c.applyFailed(err, seq)
		return
	}
	c.receiving++
	c.applying++
}

func (c *channel) updateApplied(seq uint32, n int, t0 observer.Opt[time.Time], res registry.ApplyResult, err error) {
	c.receiving--
	c.applying--
	defer c.maybeAnswerClose()
	if err == nil && res.Rearm != nil {
		defer c.role.schemaRearmed(res.Rearm) // after the ACK and update-applied
	}
	if err != nil {
		if !c.ended() && !c.closeSent {
			c.applyFailed(err, seq)
		}
		return
	}
	// After this side sent CLOSE_NAMESPACE nothing more is acknowledged (§12: the close
	// does not wait for acknowledgements; the next round repairs). The apply is reported
	// all the same: one event per successful apply (§23.1).
	if !c.ended() && !c.closeSent {
		// An ACK that cannot be sent has closed the connection, which ends the channel.
		_, _ = c.n.s.Send(&protocol.UpdateAck{NamespaceID: c.ns, AckedSequence: seq})
	}
	if !c.n.em.Enabled() {
		return
	}
	if res.Degraded && c.n.degradedBypass {
		// §20, §23.5: a hub update applied to memory while persistence is degraded.
		c.n.em.Emit(observer.DegradedBypassApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: n, Sequence: seq})
		return
	}
	c.n.em.Emit(observer.UpdateApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: n,
		ApplyLatencyMs: c.n.em.SinceMs(t0), Sequence: seq, Stages: stagesOf(res.Stages)})
}

func stagesOf(s *registry.Stages) observer.Opt[observer.Stages] {
	if s == nil {
		return observer.None[observer.Stages]()
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return observer.Some(observer.Stages{QueueWaitMs: ms(s.QueueWait), ProtectedCheckMs: ms(s.ProtectedCheck),
		LiveApplyMs: ms(s.LiveApply), DirtyNotifyMs: ms(s.DirtyNotify)})
}

// ---- resync (§9.4, §17) --------------------------------------------------------------------

// needResync handles a local loss of continuity (a dropped queue, a failed send, a shed):
// the unsent updates are dropped, the remote is told with RESYNC_REQUIRED, and the channel
// goes to needs-resync — or, during a round, one more round follows it.
func (c *channel) needResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure]) {
	c.enterResync(cause, failure, true)
}

// resyncRequired handles the remote's RESYNC_REQUIRED (or its ACK_TIMEOUT error).
func (c *channel) resyncRequired(f protocol.Frame) {
	if f.Type() == protocol.TypeResyncRequired && !c.accepts(f) {
		return
	}
	if c.state == observer.ChannelOpening {
		c.violation(f) // before OPEN_OK (§7.2)
		return
	}
	c.enterResync(observer.ResyncRemoteDeclared, observer.None[observer.SendFailure](), false)
}

func (c *channel) enterResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure], declare bool) {
	if c.ended() || c.closing() || c.sess == nil {
		return
	}
	if c.out != nil {
		c.out.Clear()
	}
	switch {
	case c.round.active:
		// The round's diffs may predate the loss: one more round follows (§9.4).
		c.resyncPending = true
	case c.state == observer.ChannelLive:
		c.setState(observer.ChannelNeedsResync)
	default:
		// Before the first round, or already waiting for one: the next round's diffs are
		// computed after this point and cover the loss.
		declare = false
	}
	if declare {
		// A declaration that cannot be sent has closed the connection, which ends the channel.
		_, _ = c.n.s.Send(&protocol.ResyncRequired{NamespaceID: c.ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	}
	c.emitResync(cause, failure)
	// §9.4: the round follows once the window is empty — also when an ACK timeout gave the
	// window up while the channel was already waiting in needs-resync (the given-up
	// acknowledgements never reach it again).
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.role.resyncReady()
	}
}

func (c *channel) emitResync(cause observer.ResyncCause, failure observer.Opt[observer.SendFailure]) {
	if c.n.em.Enabled() {
		c.n.em.Emit(observer.ResyncRequired{ConnectionID: c.n.connID(), NamespaceID: c.id, Cause: cause, SendFailure: failure})
	}
}

// ---- sync rounds (§9) ----------------------------------------------------------------------

// beginRound starts the state of a round (both sides); the peer allocates its id when it
// sends its Step1, the hub takes it from the peer's.
func (c *channel) beginRound(id uint32) {
	c.round = syncRound{active: true, id: id}
	c.resyncPending = false
	c.setState(observer.ChannelReconciling) // UPDATEs go only live (§10.1): the queue waits
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
// this side's Step2 (§9.2).
func (c *channel) answerStep1(id uint32, sv []byte) {
	post := c.n.s.Post
	err := c.sess.DiffAsync(sv, func(diff []byte, err error) {
		post(func() { c.diffReady(id, diff, err) })
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
	}
}

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

// sendFailed handles a control frame the connection refused: a namespace size cap (a diff
// over maxSyncDiffBytes without chunking is SYNC_DIFF_TOO_LARGE, §9.2) fails the namespace
// with that code; a closed connection ends it anyway.
func (c *channel) sendFailed(err error) {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && pe.Scope == protocol.ScopeNamespace:
		c.sendError(pe.Code, 0, observer.FailedSendFailed)
	case errors.Is(err, seam.ErrClosed):
	default:
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSendFailed)
	}
}

// step2 applies the remote's diff in the sequencer, then confirms it with SYNC_APPLIED
// (§9.2, §9.3).
func (c *channel) step2(f protocol.Frame, m *protocol.SyncStep2) {
	if !c.accepts(f) {
		return
	}
	r := &c.round
	if !r.active || m.SyncRoundID != r.id || r.gotStep2 || r.myStep1 == 0 || m.RelatedStep1Sequence != r.myStep1 {
		c.violation(f)
		return
	}
	r.gotStep2 = true
	seq, n, id := f.Sequence, len(m.Update), r.id
	if c.readOnly {
		// A read-only peer submits nothing (§19): its diff is not taken; the round settles.
		c.applying++
		c.step2Applied(id, seq, registry.ApplyResult{}, nil)
		return
	}
	post := c.n.s.Post
	var obs *diffObservation
	if c.n.em.Enabled() {
		// §23.1 issue #239: the state vector when the Step2 was accepted and when its
		// apply settled, read in the slots around the apply (slots run in order).
		obs = &diffObservation{round: id, seq: seq, bytes: n, t0: c.n.em.Now()}
		// A capture the session cannot admit leaves obs.before nil: the event then goes
		// without its effect group.
		_ = c.sess.StateVectorAsync(func(sv []byte, err error) {
			if err == nil {
				obs.before = sv
			}
		})
	}
	end := c.n.s.BeginWork()
	err := c.sess.ApplyAsync(m.Update, func(res registry.ApplyResult, err error) {
		end()
		post(func() { c.step2Applied(id, seq, res, err) })
	})
	if err != nil {
		end()
		c.applyFailed(err, seq)
		return
	}
	c.applying++
	if obs != nil {
		c.diffObs = obs
		err := c.sess.StateVectorAsync(func(sv []byte, err error) {
			if err == nil {
				obs.after = sv
			}
			post(func() { c.afterCaptured(obs) })
		})
		if err != nil {
			obs.noAfter = true
		}
	}
}

// diffObservation gathers what sync-diff-applied reports: the apply's outcome and the
// state vectors around it.
type diffObservation struct {
	round         uint32
	seq           uint32
	bytes         int
	t0            observer.Opt[time.Time]
	before, after []byte // written on the sequencer goroutine, read after its post
	latency       observer.Opt[float64]
	stages        observer.Opt[observer.Stages]
	applied       bool // the apply settled successfully
	noAfter       bool // the after capture could not be admitted
}

func (c *channel) step2Applied(id, seq uint32, res registry.ApplyResult, err error) {
	c.applying--
	defer c.maybeAnswerClose()
	if err == nil && res.Rearm != nil {
		defer c.role.schemaRearmed(res.Rearm) // after SYNC_APPLIED
	}
	obs := c.diffObs
	if obs != nil && obs.seq == seq {
		if err == nil && res.Degraded && c.n.degradedBypass {
			// §23.1, §23.5: one event per successful apply; a degraded one, from any source,
			// is degraded-bypass-applied instead of sync-diff-applied (after SYNC_APPLIED).
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

func (c *channel) afterCaptured(obs *diffObservation) {
	if c.diffObs == obs {
		c.diffObs = nil
	}
	c.emitDiffApplied(obs)
}

// emitDiffApplied reports a successful Step2 apply (sync-diff-applied, §23.1), with the
// effect group when both state vectors were read (or degraded-bypass-applied, §23.5).
func (c *channel) emitDiffApplied(obs *diffObservation) {
	if !obs.applied || !c.n.em.Enabled() {
		return
	}
	ev := observer.SyncDiffApplied{ConnectionID: c.n.connID(), NamespaceID: c.id, Bytes: obs.bytes,
		ApplyLatencyMs: obs.latency, SyncRoundID: obs.round, Sequence: obs.seq, Stages: obs.stages}
	if obs.before != nil && obs.after != nil {
		ev.Effect = observer.Some(observer.NewSVEffect(obs.before, obs.after))
	}
	c.n.em.Emit(ev)
}

// syncApplied: the remote confirmed our Step2 (§9.3).
func (c *channel) syncApplied(f protocol.Frame, m *protocol.SyncApplied) {
	if c.ended() {
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
	c.roundProgress()
}

// roundProgress ends the round once both diffs are applied (§9.3: localDiffAppliedByRemote
// and remoteDiffAppliedLocally): live, unless a resync arose meanwhile (§9.4).
func (c *channel) roundProgress() {
	r := &c.round
	if !r.active || !r.remoteApplied || !r.localApplied {
		return
	}
	r.active = false
	stopTimer(&c.timer)
	if c.resyncPending {
		c.resyncPending = false
		c.setState(observer.ChannelNeedsResync)
		if len(c.window) == 0 {
			c.role.resyncReady()
		}
		return
	}
	c.setState(observer.ChannelLive)
	c.role.wentLive()
	c.pull()
}

// ---- close (§12) --------------------------------------------------------------------------

// startClose sends CLOSE_NAMESPACE: nothing new is admitted, and the close does not wait
// for acknowledgements (§12).
func (c *channel) startClose(reason string) {
	if c.ended() || c.closeSent {
		return
	}
	if _, err := c.n.s.Send(&protocol.CloseNamespace{NamespaceID: c.ns, ReasonCode: reason}); err != nil {
		return
	}
	c.closeSent = true
	c.enterClosing()
	c.closeTimer = c.n.s.AfterFunc(c.n.cfg.CloseTimeout, func() {
		c.closeTimer = nil
		c.terminate(observer.ChannelClosed)
	})
}

func (c *channel) enterClosing() {
	c.round.active = false
	stopTimer(&c.timer)
	c.role.stopPeriodic()
	if c.out != nil {
		c.out.Clear()
	}
	c.setState(observer.ChannelClosing)
}

// closeReceived: the remote closes the namespace. Admission stops at once; the applies
// already admitted settle, and then CLOSE_OK goes (§12).
func (c *channel) closeReceived(f protocol.Frame) {
	switch {
	case c.ended():
		return
	case c.closeRecv || c.state == observer.ChannelOpening:
		c.violation(f)
		return
	}
	c.closeRecv = true
	c.closeRecvSeq = f.Sequence
	if !c.closing() {
		c.enterClosing()
	}
	c.maybeAnswerClose()
}

func (c *channel) maybeAnswerClose() {
	if !c.closeRecv || c.closeAnswered || c.applying > 0 || c.ended() {
		return
	}
	c.closeAnswered = true
	if _, err := c.n.s.Send(&protocol.CloseOK{NamespaceID: c.ns, AckedSequence: c.closeRecvSeq}); err != nil {
		return
	}
	if !c.closeSent || c.closeOKRecv {
		c.terminate(observer.ChannelClosed)
	}
}

func (c *channel) closeOK() {
	if c.ended() || !c.closeSent {
		return
	}
	c.closeOKRecv = true
	if !c.closeRecv || c.closeAnswered {
		c.terminate(observer.ChannelClosed)
	}
}
