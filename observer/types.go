package observer

// Type is the envelope key `type`: one of the 36 event types of the vocabulary.
type Type string

// The 36 event types, in the order the contract lists them (§23.1).
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

// typeInfo says which sides may emit a type and whether it is a per-frame event.
type typeInfo struct {
	t         Type
	hub, peer bool
	perFrame  bool
}

const (
	both     = 0
	hubOnly  = 1
	peerOnly = 2
)

func info(t Type, sides int, perFrame bool) typeInfo {
	return typeInfo{t: t, hub: sides != peerOnly, peer: sides != hubOnly, perFrame: perFrame}
}

// typeTable says, for each type, which sides emit it and whether it is a
// per-frame event that log adapters aggregate (§23.6).
var typeTable = []typeInfo{
	info(TypeConnectionStateChanged, both, false),
	info(TypeConnectionBackoffScheduled, peerOnly, false),
	info(TypeGoAwayReceived, peerOnly, false),
	info(TypeEventLoopDelaySampled, both, true),
	info(TypeChannelStateChanged, both, false),
	info(TypeBootstrapSnapshotSent, hubOnly, false),
	info(TypeBootstrapImported, peerOnly, false),
	info(TypeSyncStep2Sent, both, true),
	info(TypeSyncDiffApplied, both, true),
	info(TypeUpdateSent, both, true),
	info(TypeUpdateApplied, both, true),
	info(TypeUpdateAcked, both, true),
	info(TypeDegradedBypassApplied, peerOnly, true),
	info(TypeChunkedUpdateSent, both, true),
	info(TypeChunkedUpdateApplied, both, true),
	info(TypeChunkedUpdateAcked, both, true),
	info(TypeChunkedSnapshotSent, hubOnly, true),
	info(TypeChunkedSnapshotApplied, peerOnly, true),
	info(TypeChunkedSnapshotAcked, hubOnly, true),
	info(TypeChunkedSyncSent, both, true),
	info(TypeChunkedSyncApplied, both, true),
	info(TypeChunkedSyncAcked, both, true),
	info(TypeAuthUpgradeRejected, hubOnly, false),
	info(TypeResyncRequired, both, false),
	info(TypeUpdateDropped, both, false),
	info(TypeSendPaused, both, true),
	info(TypeSendResumed, both, true),
	info(TypeConnectionFailed, both, false),
	info(TypeNamespaceError, both, false),
	info(TypeNamespaceFailed, both, false),
	info(TypeIdentityConflicted, both, false),
	info(TypeChunkedUpdateAborted, both, false),
	info(TypeChunkedSnapshotAborted, both, false),
	info(TypeChunkedSyncAborted, both, false),
	info(TypeSchemaRearmApplied, peerOnly, false),
	info(TypeSchemaRearmFailed, peerOnly, false),
}

func (t Type) info() (typeInfo, bool) {
	for _, ti := range typeTable {
		if ti.t == t {
			return ti, true
		}
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
	_, ok := t.info()
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
