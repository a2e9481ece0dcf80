package ws

import (
	"errors"
	"time"

	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Handler is the namespace layer of one connection: the seam between this package and the
// namespace channels (OPEN, bootstrap, sync, live, close). A Handler is created by the
// NamespaceFactory of the hub or peer when the connection becomes ready (HELLO_ACK sent or
// accepted) and receives every namespace-scope input of that connection until HandleClosed.
//
// Every method is called on the connection's owner goroutine, one at a time, never
// re-entrantly: a Handler needs no locks for state it touches only from these calls, from
// functions passed to Session.Post, and from Session.AfterFunc callbacks. A method must not
// block: work that waits (the registry's write sequencer, storage) runs elsewhere and
// reports back with Session.Post.
type Handler interface {
	// HandleFrame receives one inbound namespace-scope frame (types 0x10–0x42, and ERROR of
	// namespace scope). The connection has already checked the envelope, the sequence, the
	// payload (GUIDE §5), the message's direction (§5), HELLO-first (§6), OPEN admission
	// (GUIDE §6), the drain filter (§6.3: OPEN_NAMESPACE, UPDATE, UPDATE_CHUNK, SYNC_STEP1
	// and RESYNC_REQUIRED are not delivered while draining), and, for UPDATE_ACK,
	// BOOTSTRAP_ACK, SYNC_APPLIED and CLOSE_OK, that ackedSequence names an unacknowledged
	// frame this side sent of the matching type and namespace (§10.2 ACK_STATE_VIOLATION).
	// UPDATE_CHUNK frames are delivered as they come; the namespace layer assembles them
	// (protocol.Assembler). Byte fields alias a buffer that is never reused: the handler may
	// keep them.
	HandleFrame(f protocol.Frame)
	// HandleRejected receives an inbound frame that failed a namespace-scope size cap
	// (UPDATE_TOO_LARGE, SYNC_DIFF_TOO_LARGE, BOOTSTRAP_TOO_LARGE: GUIDE §5). The frame
	// consumed its sequence; the namespace fails (§13.2) and the connection goes on.
	HandleRejected(err *protocol.Error)
	// HandleDrain reports that the connection started draining (§6.3, §15): a GOAWAY was
	// sent or received, or the peer is stopping. New data items are refused from now on.
	// The namespace layer closes its channels and calls Session.Quiesced when all are
	// terminal; otherwise the connection closes at d.Deadline.
	HandleDrain(d Drain)
	// HandleShed reports that the connection shed ns's unsent data queue to relieve
	// backpressure (§17, cause connection-shed): the namespace needs a resync.
	HandleShed(ns protocol.NamespaceID, info ShedInfo)
	// HandleRevoked reports that the authenticator revoked the peer's authorization for
	// r.Namespaces (hub only, §19): end those namespaces with a terminal namespace ERROR
	// (NAMESPACE_UNAUTHORIZED) and clean up.
	HandleRevoked(r Revocation)
	// HandleClosed is the last call: the connection is closed (its epoch is invalidated
	// before this call and no frame is written after it). Session methods other than Post
	// now fail with ErrClosed; functions already posted still run, on the owner goroutine,
	// until it exits. Admitted work must still be drained: hold Session.BeginWork for it.
	HandleClosed(info CloseInfo)
}

// NamespaceFactory creates the namespace layer of a connection that just became ready.
type NamespaceFactory func(s *Session) Handler

// Drain describes a draining connection (§6.3, §15).
type Drain struct {
	// ReasonCode is the GOAWAY reasonCode, or "" for a peer's local stop.
	ReasonCode string
	// Received is true when the remote sent the GOAWAY, false when this side did (or, with
	// ReasonCode "", when the peer is stopping).
	Received bool
	// Deadline is when the connection closes if the namespaces have not all reached a
	// terminal state (the GOAWAY drainTimeoutMs, measured from sending or receiving it).
	Deadline time.Time
	// RetryAfter is the GOAWAY retryAfterMs hint, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// ShedInfo says what a shed dropped.
type ShedInfo struct {
	Items int // unsent data items dropped
	Bytes int // their bytes
	// TransferAborted is true when a chunked transfer had sent some of its chunks: the rest
	// will not be sent, and the receiver discards the partial assembly on resync (§10.3).
	TransferAborted bool
}

// CloseInfo says why a connection closed.
type CloseInfo struct {
	// Code is the WebSocket close code sent or received.
	Code protocol.CloseCode
	// Error is the connection error that ended the connection: one of §13.1, or a §23.2
	// local code (PONG_TIMEOUT, OUTBOUND_SEQUENCE_EXHAUSTED); "" for an orderly end.
	Error protocol.ErrorCode
	// Remote is true when the remote endpoint ended the connection (its ERROR frame or its
	// close), false when this side decided.
	Remote bool
	// Cause classifies a local decision or a lost transport.
	Cause CloseCause
	// GoAway is the GOAWAY received before the close, if any.
	GoAway    *Drain
	Handshook bool // the handshake had completed
}

// CloseCause classifies why a connection closed.
type CloseCause string

// Close causes.
const (
	CauseProtocol      CloseCause = "protocol"        // a connection-scope protocol error (CloseInfo.Error)
	CauseRemoteClose   CloseCause = "remote-close"    // the remote closed (with or without an ERROR first)
	CauseTransport     CloseCause = "transport"       // the socket failed without a close frame
	CauseHelloTimeout  CloseCause = "hello-timeout"   // §18 helloTimeoutMs
	CausePongTimeout   CloseCause = "pong-timeout"    // §18 pong timeout
	CauseDrained       CloseCause = "drained"         // a drain ended (quiesced or deadline)
	CauseShutdown      CloseCause = "shutdown"        // hub service shutdown (§21), or peer stop
	CauseReconnect     CloseCause = "reconnect"       // the namespace layer asked for a new connection
	CauseBackpressure  CloseCause = "backpressure"    // control reserve exhausted (§17)
	CauseEarlyFrames   CloseCause = "early-frames"    // admission limit (GUIDE §6)
	CauseFrameTooLarge CloseCause = "frame-too-large" // GUIDE §5 check 1
)

// Session errors.
var (
	// ErrClosed: the connection is closed.
	ErrClosed = errors.New("ws: connection closed")
	// ErrDraining: the connection is draining and admits no new data (§6.3).
	ErrDraining = errors.New("ws: connection draining")
	// ErrQueueOverflow: the namespace's unsent queue exceeded maxQueuedUpdateBytes or
	// maxQueuedUpdateCount; every unsent item of the namespace was dropped (§17). The
	// namespace needs a resync (cause queue-overflow).
	ErrQueueOverflow = errors.New("ws: namespace send queue overflow")
	// ErrConnectionShed: the connection's queued bytes exceeded maxQueuedBytesPerConnection
	// and this namespace's queue was shed (§17); the item was not queued. The namespace
	// needs a resync (cause connection-shed).
	ErrConnectionShed = errors.New("ws: namespace queue shed by connection backpressure")
	// ErrNotAllowed: the message may not be sent this way (wrong direction, a connection
	// message, or data that must go through an Outbox).
	ErrNotAllowed = errors.New("ws: message not allowed on this path")
)

// Session is the namespace layer's handle on one ready connection. Except for Post and
// BeginWork, its methods must be called on the connection's owner goroutine: from Handler
// methods, posted functions and AfterFunc callbacks.
type Session struct {
	c *conn
}

// Side is the side of this end of the connection.
func (s *Session) Side() observer.Side { return s.c.side }

// ConnectionID is the hub-generated connection id (§6.2), for observability only.
func (s *Session) ConnectionID() string { return s.c.connID }

// PeerInstanceID is the peer's instance id: on the hub the trusted identity of the upgrade
// (§2), never the HELLO's claim alone.
func (s *Session) PeerInstanceID() string { return s.c.peerID }

// HubInstanceID is the hub's instance id.
func (s *Session) HubInstanceID() string { return s.c.hubID }

// Negotiated is the handshake's outcome: protocol version and capabilities (§6).
func (s *Session) Negotiated() protocol.Negotiated { return s.c.negotiated }

// Config is the connection's validated configuration. Do not modify it.
func (s *Session) Config() *protocol.Config { return s.c.cfg }

// Clock is the connection's injected clock.
func (s *Session) Clock() clock.Clock { return s.c.clock }

// Emitter is the connection's observer emitter (side stamped). Namespace-domain events
// should carry observer.Some(s.ConnectionID()).
func (s *Session) Emitter() *observer.Emitter { return s.c.em }

// Authorize asks the hub's authenticator whether the peer may replicate ns (§19). It is
// false on the peer side.
func (s *Session) Authorize(ns protocol.NamespaceID) (Grant, bool) {
	if s.c.auth == nil {
		return Grant{}, false
	}
	return s.c.auth.AuthorizeNamespace(s.c.peerID, ns)
}

// Closed reports whether the connection is closed.
func (s *Session) Closed() bool { return s.c.closing }

// Draining reports the drain in progress, if any.
func (s *Session) Draining() (Drain, bool) {
	if s.c.drain == nil {
		return Drain{}, false
	}
	return *s.c.drain, true
}

// Send sends a namespace-scope control frame at once, ahead of queued data (§17), and
// returns the sequence it was stamped with (for ACK correlation). It accepts every
// namespace message this side may send except UPDATE and UPDATE_CHUNK (use an Outbox), and
// namespace-scope ERROR frames (build them with protocol.NewErrorMessage). BOOTSTRAP_SNAPSHOT
// and SYNC_STEP2 travel here when they fit one frame. Control frames count against
// maxQueuedControlBytes while unflushed; exhausting it closes the connection with
// CONNECTION_BACKPRESSURE (1011), and Send returns ErrClosed.
func (s *Session) Send(m protocol.NamespaceMessage) (uint32, error) {
	return s.c.sendNamespaceControl(m)
}

// Outbox returns ns's data queue on this connection, creating it with gate on first use.
// gate, called on the owner goroutine before the first frame of each item, reports whether
// the namespace's in-flight window has room (§10.2, §17); nil means always. A later call
// returns the same Outbox (gate unchanged).
func (s *Session) Outbox(ns protocol.NamespaceID, gate func() bool) *Outbox {
	return s.c.outbox(ns, gate)
}

// AfterFunc runs f on the owner goroutine after d, measured by the injected clock, unless
// stopped first or the connection closes. The timer belongs to the connection.
func (s *Session) AfterFunc(d time.Duration, f func()) *Timer { return s.c.after(d, f) }

// Post runs f on the owner goroutine, after the current callback. It may be called from
// any goroutine and never blocks. It returns false, and f never runs, once the owner
// goroutine has exited. The inbox is unbounded by structure and bounded by admission: post
// at most one completion per piece of work the connection admitted (frames, windows).
func (s *Session) Post(f func()) bool { return s.c.post(f) }

// BeginWork marks admitted work (an apply in the sequencer) that must drain before the
// hub's Shutdown returns (§21); call end exactly once when it settles. It may be called
// from any goroutine.
func (s *Session) BeginWork() (end func()) { return s.c.beginWork() }

// Fail closes the connection with a connection-scope error of §13.1 (for example
// ACK_STATE_VIOLATION found by the namespace layer): a best-effort ERROR frame, then the
// registry's close code.
func (s *Session) Fail(code protocol.ErrorCode, detail string) {
	s.c.fail(&protocol.Error{Code: code, Scope: protocol.ScopeConnection, Detail: detail})
}

// Quiesced tells a draining connection that every namespace channel is terminal: the drain
// completes now (§6.3 "全部 channel 终态时发送方可提前完成 drain").
func (s *Session) Quiesced() { s.c.quiesced() }

// Reconnect asks for a new connection (peer only, §16 issue #254): the connection epoch is
// invalidated, the transport closed with 1001, and the peer controller backs off and
// reconnects (reason namespace-recovery).
func (s *Session) Reconnect() {
	if s.c.side == observer.SidePeer {
		s.c.closeNow(protocol.CloseGoingAway, CloseInfo{Code: protocol.CloseGoingAway, Cause: CauseReconnect})
	}
}

// Timer is a connection timer from Session.AfterFunc. Stop it on the owner goroutine.
type Timer struct {
	c       *conn
	ct      clock.Timer
	f       func()
	stopped bool
}

// Stop prevents f from running; it reports whether it did.
func (t *Timer) Stop() bool {
	if t == nil || t.stopped {
		return false
	}
	t.stopped = true
	t.ct.Stop()
	delete(t.c.timers, t)
	return true
}

// DataItem is one unit of outbound data for an Outbox (§10, §17): a live update, or a
// snapshot or sync diff too large for one frame. The connection frames it at send time: a
// live update up to maxUpdateBytes as one UPDATE, anything larger as UPDATE_CHUNK frames of
// Kind (lazily, one per round-robin turn, each with its own sequence), which needs
// CAP_CHUNKED_UPDATE.
type DataItem struct {
	Kind    protocol.ChunkKind
	Bytes   []byte           // must not be modified until Sent is called or the item is dropped
	Binding protocol.Binding // of a snapshot (identity) or sync diff (round); zero for live updates
	// Sent, if set, is called on the owner goroutine when the item's last frame has been
	// handed to the writer.
	Sent func(SentInfo)
}

// SentInfo reports a sent data item.
type SentInfo struct {
	// Sequence is the item's last frame's sequence: the ackedSequence the receiver answers
	// with (UPDATE_ACK, BOOTSTRAP_ACK, SYNC_APPLIED), and the anchor of ackTimeoutMs.
	Sequence   uint32
	Chunked    bool
	TransferID uint32 // when Chunked
	ChunkCount uint32 // when Chunked; 1 otherwise
}

// Outbox is one namespace's queue of unsent data on a connection (§17). Items leave in
// order, one frame per round-robin turn across namespaces, while the connection is ready,
// below its high watermark, and the namespace's gate admits the next item. Use it on the
// owner goroutine.
type Outbox struct {
	c *conn
	q *nsQueue
}

// Enqueue validates item and queues it. Errors: ErrClosed, ErrDraining; a namespace-scope
// *protocol.Error for an item that cannot be framed (UPDATE_TOO_LARGE without
// CAP_CHUNKED_UPDATE, BOOTSTRAP_TOO_LARGE or SYNC_DIFF_TOO_LARGE for a snapshot or diff
// without it, or the kind's TRANSFER_TOO_LARGE code over the chunked caps); ErrQueueOverflow
// (the namespace's queue was dropped); ErrConnectionShed (the namespace's queue was shed).
func (o *Outbox) Enqueue(item DataItem) error { return o.c.enqueue(o.q, item) }

// Len returns the number of queued items and their bytes (an item in progress counts
// whole until its last frame is sent).
func (o *Outbox) Len() (items, bytes int) { return len(o.q.items), o.q.bytes }

// Coalesce replaces the unsent live updates of the queue (those whose first frame has not
// left) by one, merge(their bytes in queue order), at the place of the first of them, with
// sent as its Sent callback: §10.1 allows unsent, unsequenced updates to be merged
// (Y.mergeUpdates). Nothing changes when fewer than two qualify or when merge fails or
// yields an item that cannot be framed (that error is returned).
func (o *Outbox) Coalesce(merge func(updates [][]byte) ([]byte, error), sent func(SentInfo)) error {
	return o.c.coalesce(o.q, merge, sent)
}

// Clear drops every unsent item (a declared resync, a terminal state: §9.4, §10.3); the
// rest of a transfer in progress is not sent. It returns what was dropped.
func (o *Outbox) Clear() ShedInfo { return o.c.clearQueue(o.q) }

// Close clears the queue and removes it from the connection; a later Session.Outbox call
// creates a fresh one.
func (o *Outbox) Close() {
	o.c.clearQueue(o.q)
	if o.c.queues[o.q.ns] == o.q {
		delete(o.c.queues, o.q.ns)
	}
	o.q.closed = true
}
