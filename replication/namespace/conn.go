package namespace

import (
	"context"
	"log/slog"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is the part of a connection's namespace layer that both sides share: the
// routing of namespace frames to channels, and the connection events (a rejected frame, a
// shed queue, a drain, the close) applied to every channel.

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

	// snapshotChunk checks that a chunked snapshot may start now and returns the binding its
	// first chunk must carry (the peer during its bootstrap; never the hub).
	snapshotChunk(f protocol.Frame) (protocol.Binding, bool)
	// snapshotStarted: a chunked snapshot's first chunk was accepted.
	snapshotStarted()
	// snapshotAssembled imports a chunked snapshot received whole (peer).
	snapshotAssembled(t protocol.Transfer, in *inboundTransfer)
	// snapshotExpired ends a bootstrap whose chunked snapshot stalled (peer).
	snapshotExpired()
	// progress publishes the inbound transfer in progress, nil when there is none (peer: its
	// admin API shows it).
	progress(p *TransferProgress)

	// localMark reads the count of the namespace's local write bytes (peer; 0 on the hub,
	// which keeps no ledger) and confirmLocal records that the remote holds those counted
	// up to mark (localwrites.go).
	localMark() int64
	confirmLocal(mark int64)
}

// nsConn is the per-connection part both sides share. Like everything of a connection's
// namespace layer, it lives on the connection's owner goroutine: its fields are touched
// only from Handler methods, posted functions and timer callbacks.
type nsConn struct {
	s        seam.Session
	cfg      *protocol.Config
	em       *observer.Emitter
	log      *slog.Logger
	role     connRole
	closed   bool // HandleClosed was called
	quiesced bool // seam.Session.Quiesced was called
	// remote is the remote instance's id, the peer of the channels' replication sessions.
	remote string
	// presence relays the presence extension's frames (nil: the node relays no presence).
	presence PresenceRelay
	// degradedBypass: an apply to a degraded store is reported as degraded-bypass-applied
	// (the peer applying hub updates in memory while its store cannot save,
	// docs/protocol.md#degraded-bypass), not as an ordinary apply.
	degradedBypass bool

	// The remote's chunked transfers on this connection (its one inbound direction): the
	// assembler, its one timer for the earliest assembly deadline, and how many assemblies
	// this connection counts in the side's shared gauge.
	asm      *protocol.Assembler
	asmTimer seam.Timer
	asmCount int64
	shared   *assemblyCounter

	// ctx bounds the registry calls made off the owner goroutine for this connection; it
	// is cancelled when the connection closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// newNSConn is the shared part of a connection whose remote instance is remote; shared counts
// the assemblies in progress on all the side's connections.
func newNSConn(s seam.Session, role connRole, log *slog.Logger, remote string, shared *assemblyCounter, presence PresenceRelay) nsConn {
	ctx, cancel := context.WithCancel(context.Background())
	return nsConn{s: s, cfg: s.Config(), em: s.Emitter(), log: log, role: role, remote: remote, ctx: ctx, cancel: cancel,
		asm: protocol.NewAssembler(s.Config(), s.Clock()), shared: shared, presence: presence}
}

// connID is the connectionId of namespace events.
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

// route handles the namespace frames both sides receive. The frames only one side receives
// (by their direction in the message registry) are routed by that side's HandleFrame.
func (n *nsConn) route(f protocol.Frame) {
	if m, ok := f.Message.(*protocol.Presence); ok {
		n.presenceReceived(m)
		return
	}
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
		if c.accepts(f) && !c.stale(m.SyncRoundID) {
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
	case *protocol.UpdateChunk:
		c.chunk(f, m)
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

// rejected handles a frame over a namespace size cap: its namespace fails with the cap's
// code.
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

// shed: the connection dropped ns's unsent data to relieve backpressure; the namespace
// needs a resync.
func (n *nsConn) shed(ns protocol.NamespaceID) {
	if c := n.role.channel(ns); c != nil && c.sess != nil && !c.ended() {
		c.recountReserved()
		c.needResync(observer.ResyncConnectionShed, observer.None[observer.SendFailure]())
	}
}

// drain closes the open channels with a CLOSE handshake (docs/protocol.md#draining): nothing
// new starts on a draining connection.
func (n *nsConn) drain() {
	// A draining connection delivers no more chunks: no transfer in progress completes.
	n.discardAll(protocol.AbortConnectionTeardown)
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

// allQuiet reports whether every channel is in a state a drain waits for: nothing open on
// the wire.
func (n *nsConn) allQuiet() bool {
	quiet := true
	n.role.each(func(c *channel) { quiet = quiet && c.quiet() })
	return quiet
}

// checkQuiesced ends a drain once every channel is quiet.
func (n *nsConn) checkQuiesced() {
	if n.closed || n.quiesced || !n.draining() || !n.allQuiet() {
		return
	}
	n.quiesced = true
	n.s.Quiesced()
}

// connectionClosed ends every channel with the connection: each session stops, admitted
// applies finish, each lease is released.
func (n *nsConn) connectionClosed(to func(c *channel) observer.ChannelState) {
	n.discardAll(protocol.AbortConnectionTeardown)
	n.closed = true
	stopTimer(&n.asmTimer)
	n.cancel()
	n.role.each(func(c *channel) { c.terminate(to(c)) })
}

// sendError sends a namespace ERROR, with relatedSequence rel when not 0; the caller
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

// emitNsError reports a namespace error sent or received.
func (n *nsConn) emitNsError(ns protocol.NamespaceID, code string, dir observer.Direction) {
	if n.em.Enabled() {
		c := observer.FoldNamespaceCode(code)
		n.em.Emit(observer.NamespaceError{ConnectionID: n.connID(), NamespaceID: ns.String(), Code: c,
			Direction: dir, TerminalState: c.TerminalState()})
	}
}
