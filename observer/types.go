package observer

// Type is the envelope key `type`: one of the 36 event types of the vocabulary.
type Type string

// The 36 event types, in the order the contract lists them
// (docs/protocol.md#events).
const (
	// Connection domain.
	TypeConnectionStateChanged     Type = "connection-state-changed"
	TypeConnectionBackoffScheduled Type = "connection-backoff-scheduled"
	TypeGoAwayReceived             Type = "goaway-received"
	TypeEventLoopDelaySampled      Type = "event-loop-delay-sampled"
	// Channel domain.
	TypeChannelStateChanged Type = "channel-state-changed"
	// Bootstrap, reconcile and update bytes and latencies (per frame).
	TypeBootstrapSnapshotSent  Type = "bootstrap-snapshot-sent"
	TypeBootstrapImported      Type = "bootstrap-imported"
	TypeSyncStep2Sent          Type = "sync-step2-sent"
	TypeSyncDiffApplied        Type = "sync-diff-applied"
	TypeUpdateSent             Type = "update-sent"
	TypeUpdateApplied          Type = "update-applied"
	TypeUpdateAcked            Type = "update-acked"
	TypeDegradedBypassApplied  Type = "degraded-bypass-applied"
	TypeChunkedUpdateSent      Type = "chunked-update-sent"
	TypeChunkedUpdateApplied   Type = "chunked-update-applied"
	TypeChunkedUpdateAcked     Type = "chunked-update-acked"
	TypeChunkedSnapshotSent    Type = "chunked-snapshot-sent"
	TypeChunkedSnapshotApplied Type = "chunked-snapshot-applied"
	TypeChunkedSnapshotAcked   Type = "chunked-snapshot-acked"
	TypeChunkedSyncSent        Type = "chunked-sync-sent"
	TypeChunkedSyncApplied     Type = "chunked-sync-applied"
	TypeChunkedSyncAcked       Type = "chunked-sync-acked"
	// Auth, backpressure, resync.
	TypeAuthUpgradeRejected Type = "auth-upgrade-rejected"
	TypeResyncRequired      Type = "resync-required"
	TypeUpdateDropped       Type = "update-dropped"
	TypeSendPaused          Type = "send-paused"
	TypeSendResumed         Type = "send-resumed"
	// Stable error counts.
	TypeConnectionFailed       Type = "connection-failed"
	TypeNamespaceError         Type = "namespace-error"
	TypeNamespaceFailed        Type = "namespace-failed"
	TypeIdentityConflicted     Type = "identity-conflicted"
	TypeChunkedUpdateAborted   Type = "chunked-update-aborted"
	TypeChunkedSnapshotAborted Type = "chunked-snapshot-aborted"
	TypeChunkedSyncAborted     Type = "chunked-sync-aborted"
	// Schema re-arm domain (peer: a replicated schema installed or refused).
	TypeSchemaRearmApplied Type = "schema-rearm-applied"
	TypeSchemaRearmFailed  Type = "schema-rearm-failed"
)

// typeInfo is what a type says about all its events: which sides emit them,
// whether they are per-frame, whether they report a failure, what their size
// measures and whether they are a step of a chunked transfer.
type typeInfo struct {
	t         Type
	hub, peer bool
	perFrame  bool
	failure   bool
	content   Content
	chunked   bool
}

type emitters uint8

const (
	both emitters = iota
	hubOnly
	peerOnly
)

// info is a row of typeTable; flags are the per-type attributes after the sides.
func info(t Type, s emitters, flags ...typeFlag) typeInfo {
	ti := typeInfo{t: t, hub: s != peerOnly, peer: s != hubOnly}
	for _, f := range flags {
		f(&ti)
	}
	return ti
}

type typeFlag func(*typeInfo)

var (
	perFrame typeFlag = func(ti *typeInfo) { ti.perFrame = true }
	failure  typeFlag = func(ti *typeInfo) { ti.failure = true }
	chunked  typeFlag = func(ti *typeInfo) { ti.chunked = true }
)

func content(c Content) typeFlag { return func(ti *typeInfo) { ti.content = c } }

var (
	updates   = content(ContentUpdate)
	syncDiffs = content(ContentSyncDiff)
	snapshots = content(ContentSnapshot)
)

// typeTable says, for each type in the contract's order, which sides emit it,
// whether it is a per-frame event that log adapters aggregate
// (docs/protocol.md#adapters), whether it reports a failure (logged as a
// warning), what its size measures, and whether it reports a step of a chunked
// transfer.
var typeTable = []typeInfo{
	info(TypeConnectionStateChanged, both),
	info(TypeConnectionBackoffScheduled, peerOnly),
	info(TypeGoAwayReceived, peerOnly),
	info(TypeEventLoopDelaySampled, both, perFrame),
	info(TypeChannelStateChanged, both),
	info(TypeBootstrapSnapshotSent, hubOnly, snapshots),
	info(TypeBootstrapImported, peerOnly, snapshots),
	info(TypeSyncStep2Sent, both, perFrame, syncDiffs),
	info(TypeSyncDiffApplied, both, perFrame, syncDiffs),
	info(TypeUpdateSent, both, perFrame, updates),
	info(TypeUpdateApplied, both, perFrame, updates),
	info(TypeUpdateAcked, both, perFrame, updates),
	info(TypeDegradedBypassApplied, peerOnly, perFrame, updates),
	info(TypeChunkedUpdateSent, both, perFrame, updates, chunked),
	info(TypeChunkedUpdateApplied, both, perFrame, updates, chunked),
	info(TypeChunkedUpdateAcked, both, perFrame, updates, chunked),
	info(TypeChunkedSnapshotSent, hubOnly, perFrame, snapshots, chunked),
	info(TypeChunkedSnapshotApplied, peerOnly, perFrame, snapshots, chunked),
	info(TypeChunkedSnapshotAcked, hubOnly, perFrame, snapshots, chunked),
	info(TypeChunkedSyncSent, both, perFrame, syncDiffs, chunked),
	info(TypeChunkedSyncApplied, both, perFrame, syncDiffs, chunked),
	info(TypeChunkedSyncAcked, both, perFrame, syncDiffs, chunked),
	info(TypeAuthUpgradeRejected, hubOnly, failure),
	info(TypeResyncRequired, both, failure),
	info(TypeUpdateDropped, both, failure),
	info(TypeSendPaused, both, perFrame),
	info(TypeSendResumed, both, perFrame),
	info(TypeConnectionFailed, both, failure),
	info(TypeNamespaceError, both, failure),
	info(TypeNamespaceFailed, both, failure),
	info(TypeIdentityConflicted, both, failure),
	info(TypeChunkedUpdateAborted, both, failure),
	info(TypeChunkedSnapshotAborted, both, failure),
	info(TypeChunkedSyncAborted, both, failure),
	info(TypeSchemaRearmApplied, peerOnly),
	info(TypeSchemaRearmFailed, peerOnly, failure),
}

// typeIndex finds a type's row; the sinks ask on every event.
var typeIndex = func() map[Type]int {
	m := make(map[Type]int, len(typeTable))
	for i, ti := range typeTable {
		m[ti.t] = i
	}
	return m
}()

func (t Type) info() (typeInfo, bool) {
	if i, ok := typeIndex[t]; ok {
		return typeTable[i], true
	}
	return typeInfo{}, false
}

// Types lists the 36 event types in the contract's order.
func Types() []Type {
	out := make([]Type, len(typeTable))
	for i, ti := range typeTable {
		out[i] = ti.t
	}
	return out
}

// Valid reports whether t is one of the 36 types.
func (t Type) Valid() bool {
	_, ok := typeIndex[t]
	return ok
}

// EmittedBy reports whether side may emit t.
func (t Type) EmittedBy(side Side) bool {
	ti, ok := t.info()
	switch {
	case !ok:
		return false
	case side == SideHub:
		return ti.hub
	case side == SidePeer:
		return ti.peer
	}
	return false
}

// PerFrame reports whether t is a per-frame event: one per UPDATE, Step2, chunked
// transfer, watermark crossing or liveness sample. Log adapters aggregate these
// rather than write a line each.
func (t Type) PerFrame() bool {
	ti, _ := t.info()
	return ti.perFrame
}

// Failure reports whether t reports something that went wrong — a failure, a
// refusal, a conflict, a loss of continuity or of data — rather than progress.
// Log adapters write these as warnings.
func (t Type) Failure() bool {
	ti, _ := t.info()
	return ti.failure
}

// Content is what the size of an event measures (Measures.Size).
type Content uint8

// The contents of event sizes.
const (
	ContentNone     Content = iota // the event has no size
	ContentUpdate                  // a live update, whole or chunked
	ContentSyncDiff                // a reconciliation diff, whole or chunked
	ContentSnapshot                // a bootstrap snapshot, whole or chunked
)

// Content is what the size of t's events measures.
func (t Type) Content() Content {
	ti, _ := t.info()
	return ti.content
}

// Chunked reports whether t reports a step of a chunked transfer: its last chunk
// sent, the reassembled transfer applied, or its acknowledgement.
func (t Type) Chunked() bool {
	ti, _ := t.info()
	return ti.chunked
}
