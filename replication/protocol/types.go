package protocol

import "fmt"

// MessageType is the envelope's messageType byte, one of the 18 codes of the append-only
// message table (docs/protocol.md#message-table). Its rules are in rules.go.
type MessageType uint8

// The message types. The comment on each names its Go type, whose fields method lists the
// payload fields in wire order.
const (
	TypeHello             MessageType = 0x01 // Hello
	TypeHelloAck          MessageType = 0x02 // HelloAck
	TypeGoAway            MessageType = 0x03 // GoAway
	TypeError             MessageType = 0x04 // ErrorMessage
	TypeOpenNamespace     MessageType = 0x10 // OpenNamespace
	TypeOpenOK            MessageType = 0x11 // OpenOK
	TypeCloseNamespace    MessageType = 0x12 // CloseNamespace
	TypeCloseOK           MessageType = 0x13 // CloseOK
	TypeBootstrapSnapshot MessageType = 0x20 // BootstrapSnapshot
	TypeBootstrapAck      MessageType = 0x21 // BootstrapAck
	TypeIdentityChanged   MessageType = 0x22 // IdentityChanged
	TypeSyncStep1         MessageType = 0x30 // SyncStep1
	TypeSyncStep2         MessageType = 0x31 // SyncStep2
	TypeSyncApplied       MessageType = 0x32 // SyncApplied
	TypeResyncRequired    MessageType = 0x33 // ResyncRequired
	TypeUpdate            MessageType = 0x40 // Update
	TypeUpdateAck         MessageType = 0x41 // UpdateAck
	TypeUpdateChunk       MessageType = 0x42 // UpdateChunk
	// TypePresence is this implementation's presence extension, sent and accepted only with
	// CapPresence negotiated (docs/protocol.md#presence-extension).
	TypePresence MessageType = 0x43 // Presence
)

// String returns the contract's message name, or UNKNOWN_MESSAGE_TYPE_0x.. for a code
// outside the registry.
func (t MessageType) String() string {
	if t.Known() {
		return messageRules[t].Name
	}
	return fmt.Sprintf("UNKNOWN_MESSAGE_TYPE_0x%02x", uint8(t))
}

// Known reports whether t is in the message registry.
func (t MessageType) Known() bool { return int(t) < len(messageRules) && messageRules[t].Name != "" }

// Scope is the scope of a message or of an error (the ERROR frame's scope byte): the
// connection as a whole, or one namespace.
type Scope uint8

const (
	ScopeConnection Scope = 0
	ScopeNamespace  Scope = 1
)

// String returns "connection" or "namespace", or UNKNOWN_SCOPE_0x.. for other bytes.
func (s Scope) String() string {
	switch s {
	case ScopeConnection:
		return "connection"
	case ScopeNamespace:
		return "namespace"
	}
	return fmt.Sprintf("UNKNOWN_SCOPE_0x%02x", uint8(s))
}

// Scope is the message's scope in the message registry. ERROR is "either": its own scope byte
// decides (ScopeOf); this method reports ScopeConnection for it.
func (t MessageType) Scope() Scope { return t.Rule().Scope }

// Capability is the capability bitset of HELLO and HELLO_ACK
// (docs/protocol.md#capabilities), a uint32 big-endian on the wire. The vocabulary is
// append-only.
type Capability uint32

// CapChunkedUpdate (bit 0): the endpoint sends and accepts UPDATE_CHUNK (0x42) frames.
const CapChunkedUpdate Capability = 0x00000001

// CapNamespaceDeleted (bit 1): the endpoint knows the namespace error NAMESPACE_DELETED
// (docs/protocol.md#namespace-deletion). The hub sends it, instead of NAMESPACE_NOT_FOUND,
// only on a connection that selected this bit; it adds no message type.
const CapNamespaceDeleted Capability = 0x00000002

// CapPresence (bit 2): this implementation's presence extension — the endpoint sends and
// accepts PRESENCE (0x43) frames carrying editors' awareness (docs/protocol.md#presence-extension).
const CapPresence Capability = 0x00000004

// KnownCapabilities are the bits this implementation knows.
const KnownCapabilities = CapChunkedUpdate | CapNamespaceDeleted | CapPresence

// Has reports whether every bit of c2 is set in c.
func (c Capability) Has(c2 Capability) bool { return c&c2 == c2 }

// String lists the set bits by name ("CAP_CHUNKED_UPDATE|0x00000008"), or "0".
func (c Capability) String() string {
	if c == 0 {
		return "0"
	}
	s := ""
	if c.Has(CapChunkedUpdate) {
		s = "CAP_CHUNKED_UPDATE"
	}
	if c.Has(CapNamespaceDeleted) {
		if s != "" {
			s += "|"
		}
		s += "CAP_NAMESPACE_DELETED"
	}
	if c.Has(CapPresence) {
		if s != "" {
			s += "|"
		}
		s += "CAP_PRESENCE"
	}
	if rest := c &^ KnownCapabilities; rest != 0 {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("0x%08x", uint32(rest))
	}
	return s
}

// OpenMode is OPEN_OK's mode byte (docs/protocol.md#open_ok).
type OpenMode uint8

const (
	ModeBootstrap OpenMode = 0
	ModeReconcile OpenMode = 1
)

// String returns "bootstrap" or "reconcile", or UNKNOWN_OPEN_MODE_0x.. for other bytes.
func (m OpenMode) String() string {
	switch m {
	case ModeBootstrap:
		return "bootstrap"
	case ModeReconcile:
		return "reconcile"
	}
	return fmt.Sprintf("UNKNOWN_OPEN_MODE_0x%02x", uint8(m))
}

// ChunkKind is UPDATE_CHUNK's first field (docs/protocol.md#update_chunk): what the chunked
// transfer carries, a live update, a snapshot or a sync diff. Each kind has its own size cap
// and error codes (its KindRule).
type ChunkKind uint8

const (
	KindLiveUpdate ChunkKind = 0
	KindSnapshot   ChunkKind = 1
	KindSyncDiff   ChunkKind = 2
)

// String returns "live-update", "snapshot" or "sync-diff", or UNKNOWN_CHUNK_KIND_0x...
func (k ChunkKind) String() string {
	if r, ok := k.Rule(); ok {
		return r.Name
	}
	return fmt.Sprintf("UNKNOWN_CHUNK_KIND_0x%02x", uint8(k))
}

// Known reports whether k is one of the three kinds.
func (k ChunkKind) Known() bool { return int(k) < len(kindRules) }

// TooLargeCode is the namespace error for a first chunk declaring more than the kind's caps.
func (k ChunkKind) TooLargeCode() ErrorCode { return k.rule().TooLarge }

// ViolationCode is the namespace error for an inconsistent geometry, a cross-frame violation
// or an assembly over the per-connection cap.
func (k ChunkKind) ViolationCode() ErrorCode { return k.rule().Violation }

// UnchunkedCode is the namespace error for bytes of kind k over their single-frame cap when
// CAP_CHUNKED_UPDATE is not negotiated: UPDATE_TOO_LARGE, BOOTSTRAP_TOO_LARGE or
// SYNC_DIFF_TOO_LARGE.
func (k ChunkKind) UnchunkedCode() ErrorCode { return k.rule().Unchunked }

// CloseCode is a WebSocket close code as the protocol uses them
// (docs/protocol.md#close-codes).
type CloseCode uint16

// The close codes the contract uses.
const (
	CloseNormal        CloseCode = 1000 // normal end of the connection
	CloseGoingAway     CloseCode = 1001 // GOAWAY, planned restart or shutdown
	CloseProtocolError CloseCode = 1002 // bad framing, sequence, message, ACK
	ClosePolicy        CloseCode = 1008 // identity or connection policy
	CloseTooBig        CloseCode = 1009 // outer frame over the limit
	CloseInternal      CloseCode = 1011 // unrecoverable internal error or control backpressure
)

// CloseAbnormal (1006, RFC 6455, section 7.1.5) is never sent: it is how a connection
// reports that its transport was lost without a close frame.
const CloseAbnormal CloseCode = 1006

// String returns the RFC 6455 name of the code, or UNKNOWN_CLOSE_CODE_<n>.
func (c CloseCode) String() string {
	switch c {
	case CloseNormal:
		return "NORMAL_CLOSURE"
	case CloseGoingAway:
		return "GOING_AWAY"
	case CloseProtocolError:
		return "PROTOCOL_ERROR"
	case ClosePolicy:
		return "POLICY_VIOLATION"
	case CloseTooBig:
		return "MESSAGE_TOO_BIG"
	case CloseInternal:
		return "INTERNAL_ERROR"
	case CloseAbnormal:
		return "ABNORMAL_CLOSURE"
	}
	return fmt.Sprintf("UNKNOWN_CLOSE_CODE_%d", uint16(c))
}
