package protocol

import "fmt"

// This file is the one place that says how each message type and each chunk kind behaves on
// a connection: who may send it, whether it belongs to the connection or to one namespace,
// which acknowledgement settles it, whether a draining connection still takes it, and whether
// it waits in a namespace's data queue. The connection layer (replication/ws) and the
// namespace layer (replication/namespace) read these rows instead of listing message types
// themselves, so a new message type is described here once and handled where it is handled.

// Endpoint is one end of a replication connection.
type Endpoint uint8

// The two endpoints.
const (
	EndpointPeer Endpoint = 1 << iota
	EndpointHub
)

// String returns "peer" or "hub", or UNKNOWN_ENDPOINT_0x...
func (e Endpoint) String() string {
	switch e {
	case EndpointPeer:
		return "peer"
	case EndpointHub:
		return "hub"
	}
	return fmt.Sprintf("UNKNOWN_ENDPOINT_0x%02x", uint8(e))
}

// Remote returns the other end of the connection.
func (e Endpoint) Remote() Endpoint { return (EndpointPeer | EndpointHub) &^ e }

// Direction is the set of endpoints that may send a message type: the direction column of
// the message table.
type Direction uint8

// The directions of the registry.
const (
	PeerToHub = Direction(EndpointPeer)
	HubToPeer = Direction(EndpointHub)
	EitherWay = PeerToHub | HubToPeer
)

// SentBy reports whether endpoint e may send a message of this direction.
func (d Direction) SentBy(e Endpoint) bool { return d&Direction(e) != 0 }

// String returns "Peer→Hub", "Hub→Peer" or "either", as the contract writes them.
func (d Direction) String() string {
	switch d {
	case PeerToHub:
		return "Peer→Hub"
	case HubToPeer:
		return "Hub→Peer"
	case EitherWay:
		return "either"
	}
	return fmt.Sprintf("UNKNOWN_DIRECTION_0x%02x", uint8(d))
}

// Lane is the way a message leaves its sender.
type Lane uint8

// The lanes.
const (
	// LaneControl: handed to the connection's writer at once, ahead of queued data, within
	// the connection's control reserve (maxQueuedControlBytes).
	LaneControl Lane = iota
	// LaneData: queued in its namespace's unsent queue and sent round-robin across
	// namespaces, within the namespace's window and below the connection's high watermark.
	LaneData
	// LanePresence: the presence extension's lane, the lowest: each namespace's latest
	// state per editor waits apart and goes only when no data frame could go, below the
	// connection's low watermark; never acknowledged, it takes no window slot, and under
	// backpressure an older state is replaced by a newer one.
	LanePresence
)

// String returns "control" or "data".
func (l Lane) String() string {
	switch l {
	case LaneControl:
		return "control"
	case LaneData:
		return "data"
	case LanePresence:
		return "presence"
	}
	return fmt.Sprintf("UNKNOWN_LANE_0x%02x", uint8(l))
}

// MessageRule is one row of the message table (docs/protocol.md#message-table), extended
// with the rules the connection and namespace layers apply to every frame of the type.
type MessageRule struct {
	Type MessageType
	Name string // the contract's name, e.g. "OPEN_NAMESPACE"
	// Scope is the message's scope. ERROR is either: its scope byte decides (ScopeOf), and
	// its row says ScopeConnection.
	Scope     Scope
	Direction Direction
	// AckedBy is the acknowledgement whose ackedSequence names a frame of this type: the
	// receiver answers every such frame with exactly one, and an acknowledgement naming
	// anything else is ACK_STATE_VIOLATION. 0 when frames of the type are not
	// acknowledged by sequence (answers such as OPEN_OK or SYNC_STEP2 carry no
	// ackedSequence). UPDATE_CHUNK: only a transfer's last chunk is acknowledged, with the
	// acknowledgement of its kind (ChunkKind.AckedBy).
	AckedBy MessageType
	// StartsWork: the frame would start new work, so a draining connection does not take
	// it.
	StartsWork bool
	// Lane is how the sender sends it.
	Lane Lane
	// EndsNamespace: once the frame has passed, in either direction, the namespace's
	// lifecycle on the connection is over and no acknowledgement of it is still owed. A
	// fatal namespace ERROR does the same (see EndsNamespace).
	EndsNamespace bool
	// AnswersOpen: the frame answers an OPEN_NAMESPACE (OPEN_OK, or a namespace ERROR).
	AnswersOpen bool
	// Violation is the namespace error answering a frame of this type that arrives where
	// the namespace's state does not allow it: SYNC_STATE_VIOLATION for the frames of a
	// sync round, NAMESPACE_STATE_VIOLATION for the others; "" for connection
	// messages.
	Violation ErrorCode
	// Requires is the capability both ends must have negotiated before the type may be sent
	// or received; 0 for the types of the base protocol.
	Requires Capability

	new func() Message // an empty message of the type
}

// messageRules is the message registry, indexed by type.
var messageRules = [...]MessageRule{
	TypeHello: {Name: "HELLO", Scope: ScopeConnection, Direction: PeerToHub,
		new: func() Message { return new(Hello) }},
	TypeHelloAck: {Name: "HELLO_ACK", Scope: ScopeConnection, Direction: HubToPeer,
		new: func() Message { return new(HelloAck) }},
	TypeGoAway: {Name: "GOAWAY", Scope: ScopeConnection, Direction: EitherWay,
		new: func() Message { return new(GoAway) }},
	TypeError: {Name: "ERROR", Scope: ScopeConnection, Direction: EitherWay, AnswersOpen: true,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(ErrorMessage) }},
	TypeOpenNamespace: {Name: "OPEN_NAMESPACE", Scope: ScopeNamespace, Direction: PeerToHub, StartsWork: true,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(OpenNamespace) }},
	TypeOpenOK: {Name: "OPEN_OK", Scope: ScopeNamespace, Direction: HubToPeer, AnswersOpen: true,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(OpenOK) }},
	TypeCloseNamespace: {Name: "CLOSE_NAMESPACE", Scope: ScopeNamespace, Direction: EitherWay, AckedBy: TypeCloseOK,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(CloseNamespace) }},
	TypeCloseOK: {Name: "CLOSE_OK", Scope: ScopeNamespace, Direction: EitherWay, EndsNamespace: true,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(CloseOK) }},
	TypeBootstrapSnapshot: {Name: "BOOTSTRAP_SNAPSHOT", Scope: ScopeNamespace, Direction: HubToPeer, AckedBy: TypeBootstrapAck,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(BootstrapSnapshot) }},
	TypeBootstrapAck: {Name: "BOOTSTRAP_ACK", Scope: ScopeNamespace, Direction: PeerToHub,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(BootstrapAck) }},
	TypeIdentityChanged: {Name: "IDENTITY_CHANGED", Scope: ScopeNamespace, Direction: HubToPeer, EndsNamespace: true,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(IdentityChanged) }},
	TypeSyncStep1: {Name: "SYNC_STEP1", Scope: ScopeNamespace, Direction: EitherWay, StartsWork: true,
		Violation: CodeSyncStateViolation,
		new:       func() Message { return new(SyncStep1) }},
	TypeSyncStep2: {Name: "SYNC_STEP2", Scope: ScopeNamespace, Direction: EitherWay, AckedBy: TypeSyncApplied,
		Violation: CodeSyncStateViolation,
		new:       func() Message { return new(SyncStep2) }},
	TypeSyncApplied: {Name: "SYNC_APPLIED", Scope: ScopeNamespace, Direction: EitherWay,
		Violation: CodeSyncStateViolation,
		new:       func() Message { return new(SyncApplied) }},
	TypeResyncRequired: {Name: "RESYNC_REQUIRED", Scope: ScopeNamespace, Direction: EitherWay, StartsWork: true,
		Violation: CodeSyncStateViolation,
		new:       func() Message { return new(ResyncRequired) }},
	TypeUpdate: {Name: "UPDATE", Scope: ScopeNamespace, Direction: EitherWay, AckedBy: TypeUpdateAck, StartsWork: true,
		Lane: LaneData, Violation: CodeNamespaceStateViolation,
		new: func() Message { return new(Update) }},
	TypeUpdateAck: {Name: "UPDATE_ACK", Scope: ScopeNamespace, Direction: EitherWay,
		Violation: CodeNamespaceStateViolation,
		new:       func() Message { return new(UpdateAck) }},
	TypeUpdateChunk: {Name: "UPDATE_CHUNK", Scope: ScopeNamespace, Direction: EitherWay, StartsWork: true,
		Lane: LaneData, Violation: CodeNamespaceStateViolation, Requires: CapChunkedUpdate,
		new: func() Message { return new(UpdateChunk) }},
	TypePresence: {Name: "PRESENCE", Scope: ScopeNamespace, Direction: EitherWay,
		Lane: LanePresence, Violation: CodeNamespaceStateViolation, Requires: CapPresence,
		new: func() Message { return new(Presence) }},
}

// Rule returns the registry row of t; a type outside the registry has the zero rule.
func (t MessageType) Rule() MessageRule {
	if !t.Known() {
		return MessageRule{}
	}
	r := messageRules[t]
	r.Type = t
	return r
}

// requires is t's Rule().Requires, without copying the row (the decoder asks for every
// frame).
func (t MessageType) requires() Capability {
	if !t.Known() {
		return 0
	}
	return messageRules[t].Requires
}

// MessageRules returns the rows of the message registry, in code order.
func MessageRules() []MessageRule {
	var out []MessageRule
	for i := range messageRules {
		if t := MessageType(i); t.Known() {
			out = append(out, t.Rule())
		}
	}
	return out
}

// newMessage returns an empty message of a registered type, nil for an unknown one.
func newMessage(t MessageType) Message {
	if r := t.Rule(); r.new != nil {
		return r.new()
	}
	return nil
}

// ScopeOf returns the scope of a message: its type's, or for ERROR the scope byte it
// carries.
func ScopeOf(m Message) Scope {
	if e, ok := m.(*ErrorMessage); ok {
		return e.Scope
	}
	return m.Type().Rule().Scope
}

// EndsNamespace reports whether m ends its namespace's lifecycle on the connection once it
// has passed, in either direction: CLOSE_OK, IDENTITY_CHANGED, and a fatal namespace ERROR.
// It returns the namespace.
func EndsNamespace(m Message) (NamespaceID, bool) {
	if e, ok := m.(*ErrorMessage); ok {
		return e.NamespaceID, e.Scope == ScopeNamespace && e.Fatal
	}
	nm, ok := m.(NamespaceMessage)
	if !ok || !m.Type().Rule().EndsNamespace {
		return NamespaceID{}, false
	}
	return nm.Namespace(), true
}

// AnswersOpen reports whether m answers an OPEN_NAMESPACE of its namespace: an OPEN_OK, or
// a namespace ERROR. It returns the namespace.
func AnswersOpen(m Message) (NamespaceID, bool) {
	nm, ok := m.(NamespaceMessage)
	if !ok || !m.Type().Rule().AnswersOpen || ScopeOf(m) != ScopeNamespace {
		return NamespaceID{}, false
	}
	return nm.Namespace(), true
}

// Acknowledgement is a message whose ackedSequence names one earlier frame of the other
// direction: UPDATE_ACK, BOOTSTRAP_ACK, SYNC_APPLIED and CLOSE_OK, the AckedBy of
// their rows.
type Acknowledgement interface {
	NamespaceMessage
	// Acknowledges returns the ackedSequence.
	Acknowledges() uint32
}

// KindRule is what differs between the three kinds of chunked transfer
// (docs/protocol.md#chunked-transfers): live updates, snapshots and sync diffs.
type KindRule struct {
	Kind ChunkKind
	Name string // "live-update", "snapshot", "sync-diff"
	// Whole is the single-frame message that carries the same bytes when they fit one
	// frame: UPDATE, BOOTSTRAP_SNAPSHOT or SYNC_STEP2. A transfer's last chunk is
	// acknowledged as Whole is (AckedBy).
	Whole MessageType
	// Unchunked is the namespace error for bytes over Whole's single-frame cap when
	// CAP_CHUNKED_UPDATE is not negotiated: UPDATE_TOO_LARGE, BOOTSTRAP_TOO_LARGE,
	// SYNC_DIFF_TOO_LARGE.
	Unchunked ErrorCode
	// TooLarge is the namespace error for a first chunk that declares more than the kind's
	// caps.
	TooLarge ErrorCode
	// Violation is the namespace error for an inconsistent transfer: geometry, a cross-frame
	// rule, or an assembly over the per-connection cap.
	Violation ErrorCode
	// ExpiredResync is the RESYNC_REQUIRED reasonCode that follows an assembly timeout, ""
	// when the timeout fails the namespace instead (ExpiredFailure).
	ExpiredResync string
	// ExpiredFailure is the terminal namespace error that follows an assembly timeout, ""
	// when the namespace resyncs instead.
	ExpiredFailure ErrorCode

	maxChunked func(*Config) int // the cap on a transfer's totalBytes
}

// kindRules is indexed by ChunkKind.
var kindRules = [...]KindRule{
	KindLiveUpdate: {Kind: KindLiveUpdate, Name: "live-update", Whole: TypeUpdate,
		Unchunked: CodeUpdateTooLarge, TooLarge: CodeUpdateTransferTooLarge, Violation: CodeUpdateTransferViolation,
		ExpiredResync: ResyncUpdateTransferExpired,
		maxChunked:    func(c *Config) int { return c.MaxChunkedUpdateBytes }},
	// A snapshot's assembly timeout ends like a failed bootstrap.
	KindSnapshot: {Kind: KindSnapshot, Name: "snapshot", Whole: TypeBootstrapSnapshot,
		Unchunked: CodeBootstrapTooLarge, TooLarge: CodeSnapshotTransferTooLarge, Violation: CodeSnapshotTransferViolation,
		ExpiredFailure: CodeBootstrapFailed,
		maxChunked:     func(c *Config) int { return c.MaxChunkedBootstrapBytes }},
	KindSyncDiff: {Kind: KindSyncDiff, Name: "sync-diff", Whole: TypeSyncStep2,
		Unchunked: CodeSyncDiffTooLarge, TooLarge: CodeSyncTransferTooLarge, Violation: CodeSyncTransferViolation,
		ExpiredResync: ResyncSyncTransferExpired,
		maxChunked:    func(c *Config) int { return c.MaxChunkedSyncDiffBytes }},
}

// Rule returns the row of kind k, and false for a kind outside the three.
func (k ChunkKind) Rule() (KindRule, bool) {
	if !k.Known() {
		return KindRule{}, false
	}
	return kindRules[k], true
}

// rule is Rule for a kind known to be valid; an unknown kind falls back to the live-update
// row, as the codes of an unknown kind have always done.
func (k ChunkKind) rule() KindRule {
	if r, ok := k.Rule(); ok {
		return r
	}
	return kindRules[KindLiveUpdate]
}

// AckedBy is the acknowledgement of a transfer's last chunk of kind k: UPDATE_ACK,
// BOOTSTRAP_ACK or SYNC_APPLIED.
func (k ChunkKind) AckedBy() MessageType { return k.rule().Whole.Rule().AckedBy }
