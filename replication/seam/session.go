package seam

import (
	"errors"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/yjs"
)

// Session is the namespace layer's handle on one ready connection. Post and BeginWork may be
// called from any goroutine; every other method only on the connection's owner goroutine
// (from Handler methods, posted functions and AfterFunc callbacks).
type Session interface {
	// Side is the side of this end of the connection.
	Side() observer.Side
	// ConnectionID is the hub-generated connection id, for observability only.
	ConnectionID() string
	// PeerInstanceID is the peer's instance id; on the hub, the identity the authenticator
	// vouched for at the upgrade, never the peer's own claim.
	PeerInstanceID() string
	// HubInstanceID is the hub's instance id.
	HubInstanceID() string
	// Negotiated is the outcome of the handshake: protocol version and capabilities.
	Negotiated() protocol.Negotiated
	// Config is the connection's validated configuration. Do not modify it.
	Config() *protocol.Config
	// Clock is the connection's injected clock.
	Clock() clock.Clock
	// Emitter reports observer events with the side stamped. Namespace events should
	// carry observer.Some(ConnectionID()).
	Emitter() *observer.Emitter

	// Authorize asks the hub's authenticator whether the peer may replicate ns. It is false
	// on the peer.
	Authorize(ns protocol.NamespaceID) (auth.NamespaceGrant, bool)
	// Closed reports whether the connection is closed.
	Closed() bool
	// Draining reports the drain in progress, if any.
	Draining() (Drain, bool)
	// Stats returns the connection's outbound accounting.
	Stats() QueueStats

	// QueuePresence queues editors' awareness entries of namespace ns on the presence
	// extension's lane (only with CAP_PRESENCE negotiated: otherwise every entry is dropped):
	// the lowest lane, sent only when no data frame can go, never acknowledged; a newer
	// entry of the same client replaces one still waiting. It returns how many entries were
	// dropped (superseded, or beyond the lane's bounds). It never blocks.
	QueuePresence(ns protocol.NamespaceID, entries []protocol.AwarenessEntry) (dropped int)
	// Send sends a namespace control frame at once, ahead of queued data, and returns the
	// sequence it was stamped with (acknowledgements name it). It takes every namespace
	// message this side may send on the control lane (protocol.LaneControl), namespace
	// ERRORs included (build them with protocol.NewErrorMessage); UPDATE and UPDATE_CHUNK
	// go through an Outbox (ErrNotAllowed). A BOOTSTRAP_SNAPSHOT or SYNC_STEP2 that fits
	// one frame travels here. Control frames count against maxQueuedControlBytes until
	// written; exhausting it closes the connection with CONNECTION_BACKPRESSURE, and Send
	// returns ErrClosed. A message that does not encode returns its *protocol.Error.
	Send(m protocol.NamespaceMessage) (uint32, error)
	// Outbox returns ns's data queue on this connection, creating it on first use with
	// gate. The connection calls gate before the first frame of each item to ask whether
	// the namespace's window has room; nil means always. A later call returns the same
	// queue with its first gate.
	Outbox(ns protocol.NamespaceID, gate func() bool) Outbox
	// AfterFunc runs f on the owner goroutine after d, measured by the injected clock,
	// unless the timer is stopped first or the connection closes.
	AfterFunc(d time.Duration, f func()) Timer
	// Post runs f on the owner goroutine after the current call. It never blocks, and
	// returns false, without running f, once the owner goroutine has exited. Nothing bounds
	// the posted functions but their posters: post at most one completion per piece of
	// work the connection admitted.
	Post(f func()) bool
	// BeginWork marks admitted work (an apply in the write sequencer) that the hub's
	// Shutdown waits for; call end exactly once when it settles.
	BeginWork() (end func())
	// Fail closes the connection with a connection error of the registry (for example
	// ACK_STATE_VIOLATION found by the namespace layer): a best-effort ERROR frame, then
	// the registry's close code.
	Fail(code protocol.ErrorCode, detail string)
	// Quiesced tells a draining connection that every namespace has ended: the drain
	// completes now instead of at its deadline.
	Quiesced()
	// Working tells the peer's controller that the connection does the work it was made
	// for: every target the namespace layer took up on it is live (or has ended). The
	// controller then starts its reconnect backoff afresh. It does nothing on the hub.
	Working()
	// Reconnect asks the peer for a new connection: this one closes with 1001 and the
	// peer's controller backs off and dials again. It does nothing on the hub.
	Reconnect()
}

// Timer is a connection timer from Session.AfterFunc.
type Timer interface {
	// Stop prevents the timer's function from running and reports whether it did.
	Stop() bool
}

// Outbox is one namespace's queue of unsent data on a connection. Items leave one frame per
// turn of a round-robin across namespaces, while the connection is ready and below its high
// watermark and the item's gate admits it. Live updates leave in order, within the
// namespace's limits (maxQueuedUpdateBytes, maxQueuedUpdateCount) and the connection's
// (maxQueuedBytesPerConnection); snapshots and sync diffs (DataItem.Kind other than
// KindLiveUpdate) leave in order ahead of the live updates that have not started, and are
// bounded by their kind's chunked cap alone. At most maxConcurrentAssembliesPerConnection
// chunked transfers are in progress on a connection at once. Use it on the owner goroutine.
type Outbox interface {
	// Enqueue checks item and queues it. Errors: ErrClosed, ErrDraining; a namespace
	// *protocol.Error for an item that cannot be framed (over its single-frame cap without
	// CAP_CHUNKED_UPDATE: protocol.ChunkKind.UnchunkedCode; over the chunked caps: the
	// kind's TooLargeCode); for a live update, ErrQueueOverflow (the namespace's live
	// updates were dropped) or ErrConnectionShed (they were shed).
	Enqueue(item DataItem) error
	// Len returns the number of queued live updates and their bytes (an update in progress
	// counts whole until its last frame is sent). Snapshots and sync diffs are not counted.
	Len() (items, bytes int)
	// Coalesce replaces the queue's unsent live updates (those whose first frame has not
	// left) by one, merge(their bytes in queue order, their DataItem.Shared in the same
	// order), at the place of the first of them, with sent as its Sent callback: updates
	// that have no sequence yet may be merged (docs/protocol.md#sending-and-relaying).
	// Nothing changes when fewer than two qualify, or when merge fails or yields an
	// item that cannot be framed; that error is returned.
	Coalesce(merge func(updates [][]byte, shared []*yjs.Shared) ([]byte, error), sent func(SentInfo)) error
	// Wake tells the connection that the gate (the Outbox's, or an item's Gate) may admit
	// the item it refused: once a gate refuses, the queue is passed over until Wake, an
	// Enqueue or a Coalesce. Call it whenever something the gate reads may have changed in
	// its favour (a slot of the window freed, the state it waits for reached).
	Wake()
	// Clear drops every unsent live update (a declared resync); the rest of an update's
	// transfer in progress is not sent. Snapshots and sync diffs stay. It returns what was
	// dropped.
	Clear() ShedInfo
	// Close drops everything, snapshots and sync diffs too (the rest of a transfer in
	// progress is not sent), and removes the queue from the connection; a later
	// Session.Outbox call creates a fresh one.
	Close()
}

// DataItem is one unit of outbound data for an Outbox: a live update, or a snapshot or sync
// diff too large for one frame. The connection frames it when it is sent: a live update up
// to maxUpdateBytes as one UPDATE, anything larger as UPDATE_CHUNK frames of Kind (one per
// round-robin turn, each with its own sequence), which needs CAP_CHUNKED_UPDATE.
type DataItem struct {
	Kind    protocol.ChunkKind
	Bytes   []byte           // must not be modified until Sent is called or the item is dropped
	Binding protocol.Binding // of a snapshot (identity) or a sync diff (round); zero for live updates
	// Gate, if set, is asked instead of the Outbox's gate whether the item's first frame may
	// leave now.
	Gate func() bool
	// Sent, if set, is called on the owner goroutine once the item's last frame has been
	// handed to the writer.
	Sent func(SentInfo)
	// Tag is the caller's, handed back in SentInfo.Tag: one Sent callback made once can
	// then serve every item (no closure per item).
	Tag int64
	// Shared, for a live update, is Bytes as the registry fanned it out to every receiver,
	// if so: Coalesce hands it to merge, which reads each shared update once for all the
	// connections' queues it waits in (yjs.MergeShared).
	Shared *yjs.Shared
}

// SentInfo reports a sent data item.
type SentInfo struct {
	// Sequence is the sequence of the item's last frame: the ackedSequence the receiver's
	// acknowledgement names, and the start of the ACK timeout.
	Sequence   uint32
	Chunked    bool
	TransferID uint32 // when Chunked
	ChunkCount uint32 // when Chunked; 1 otherwise
	Bytes      int    // the item's bytes
	Tag        int64  // the item's DataItem.Tag (zero for a merged item)
}

// QueueStats is a snapshot of a connection's outbound accounting.
type QueueStats struct {
	QueuedBytes         int // unsent live updates in the namespace queues (the shed ledger)
	QueuedTransferBytes int // unsent snapshots and sync diffs in the namespace queues
	UnflushedData       int // data frames handed to the writer and not yet written
	UnflushedControl    int // control frames handed to the writer and not yet written
	Paused              bool
	Namespaces          int // namespaces with queued data
}

// Errors of Session and Outbox.
var (
	// ErrClosed: the connection is closed.
	ErrClosed = errors.New("replication: connection closed")
	// ErrDraining: the connection is draining and admits no new data.
	ErrDraining = errors.New("replication: connection draining")
	// ErrQueueOverflow: the namespace's unsent queue went over maxQueuedUpdateBytes or
	// maxQueuedUpdateCount, and every unsent item of the namespace was dropped. The
	// namespace needs a resync (cause queue-overflow).
	ErrQueueOverflow = errors.New("replication: namespace send queue overflow")
	// ErrConnectionShed: the connection's queued bytes went over
	// maxQueuedBytesPerConnection and this namespace's queue was shed; the item was not
	// queued. The namespace needs a resync (cause connection-shed).
	ErrConnectionShed = errors.New("replication: namespace queue shed by connection backpressure")
	// ErrNotAllowed: the message may not be sent this way (this side may not send it, it is
	// a connection message, or it is data that must go through an Outbox).
	ErrNotAllowed = errors.New("replication: message not allowed on this path")
)
